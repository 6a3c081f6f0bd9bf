"""What the picture tests share: building schedules at scale, and reading what a figure drew."""

from __future__ import annotations

from matplotlib.figure import Figure
from matplotlib.text import Text
from matplotlib.transforms import Bbox

from pipesat.models import Instance, Schedule
from pipesat.solver.heuristics import run_heuristic
from tests.strategies import assert_valid


def overlapping(extents: list[Bbox]) -> list[tuple[Bbox, Bbox]]:
    """The pairs of boxes that overlap (a sweep along x)."""
    ordered = sorted(extents, key=lambda box: box.x0)
    pairs = []
    for i, box in enumerate(ordered):
        for other in ordered[i + 1 :]:
            if other.x0 >= box.x1:
                break
            if other.y0 < box.y1 and box.y0 < other.y1:
                pairs.append((box, other))
    return pairs


def within(inner: Bbox, outer: Bbox) -> bool:
    return outer.x0 <= inner.x0 and inner.x1 <= outer.x1 and outer.y0 <= inner.y0 and inner.y1 <= outer.y1


def gantt_labels(figure: Figure) -> tuple[list[Text], list[str]]:
    """The Gantt chart's microbatch numbers, and its notes."""
    texts = figure.axes[0].texts
    return [text for text in texts if text.get_text().isdigit()], [
        t.get_text() for t in texts if "labels" in t.get_text()
    ]


def scaled(p: int, m: int, name: str = "1f1b", **changes: object) -> Schedule:
    instance = Instance.from_dict({"num_devices": p, "num_microbatches": m, **changes})
    return assert_valid(run_heuristic(name, instance))
