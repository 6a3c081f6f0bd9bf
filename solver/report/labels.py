"""Where the Gantt chart writes microbatch numbers.

Every op's microbatch number is written in its box, in a smaller font where it must be; where even
the smallest does not fit, numbers go on white chips in a lane per kind and chunk, for every k-th
microbatch, and a note says which.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Sequence
from typing import NamedTuple

from pipesat.models import KINDS, Op
from pipesat.solver.report.figures import DPI, MIN_FONT

# Microbatch numbers: DejaVu Sans digits are 0.636 em wide; a number keeps LABEL_PAD pixels free in
# its box; MIN_FONT points is the smallest drawn. Numbers that spill over their box sit on a chip.
DIGIT_EM = 0.64
LABEL_PAD = 3.0
CHIP_PAD = 0.15
CHIP_STYLE = {"boxstyle": f"round,pad={CHIP_PAD}", "facecolor": "white", "edgecolor": "none", "alpha": 0.85}


class Box(NamedTuple):
    """An op as drawn: its bar's start and length on the time axis, cut to the window shown, and the
    whole op's centre and duration, which its label is centred on and fitted to (a label of an op the
    window cuts is cut with it). `band` is the part of the bar's height it fills, from the top: all
    of it, or half of it in an overlapped pair (F above, B below)."""

    op: Op
    chunk: int
    start: float
    length: float
    centre: float
    duration: float
    band: tuple[float, float] = (0.0, 1.0)

    @property
    def label(self) -> str:
        return str(self.op.microbatch)


class Chip(NamedTuple):
    """A microbatch number on a white chip, in its row's `lane` (one per kind and chunk, F chunk 0 on
    top), centred on its box, or on a run of its boxes that lie side by side there."""

    device: int
    lane: int
    microbatch: int
    centre: float

    @property
    def label(self) -> str:
        return str(self.microbatch)


class LabelPlan(NamedTuple):
    """How the Gantt chart writes microbatch numbers: in `font` points inside each box; or, where they
    do not fit, as `chips` in `lanes` (kind, chunk) for the `labelled` microbatches (every step-th of
    those shown)."""

    font: float
    chips: Sequence[Chip] = ()
    labelled: range = range(0)
    lanes: Sequence[tuple[str, int]] = ()

    def note(self) -> str:
        """`labels: every 5th microbatch (0, 5, 10, …)`, for the figure."""
        examples = ", ".join(str(mb) for mb in self.labelled[:3]) + (", …" if len(self.labelled) > 3 else "")
        return f"labels: every {ordinal(self.labelled.step)} microbatch ({examples})"


def ordinal(n: int) -> str:
    """`1st`, `2nd`, `5th`, `12th`, `22nd`."""
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def label_plan(boxes: Sequence[Box], pixels_per_time: float, font: float) -> LabelPlan:
    """The largest font from `font` down to MIN_FONT at which every number fits inside its box; when
    none does, MIN_FONT chips for the fewest microbatches (every 2nd, 5th, 10th, ...) that none of
    them touch another in its lane."""
    fitting = min(
        ((box.duration * pixels_per_time - LABEL_PAD) / _text_pixels(box.label, 1.0) for box in boxes),
        default=font,
    )
    if fitting >= MIN_FONT:
        return LabelPlan(min(font, math.floor(fitting * 2) / 2))
    lanes = sorted({(box.op.kind, box.chunk) for box in boxes}, key=lambda lane: (KINDS.index(lane[0]), lane[1]))
    first, last = min(box.op.microbatch for box in boxes), max(box.op.microbatch for box in boxes)
    labellings = (range(first, last + 1, step) for step in _label_steps())
    # One microbatch alone always has room (its chips side by side are one), so some labelling fits.
    chips, labelled = next(
        (chips, labelled)
        for labelled in labellings
        if (chips := _chips(boxes, labelled, lanes, pixels_per_time)) is not None
    )
    return LabelPlan(MIN_FONT, chips, labelled, lanes)


def _label_steps() -> Iterator[int]:
    """1, 2, 5, 10, 20, 50, 100, ..."""
    for power in itertools.count():
        for first in (1, 2, 5):
            yield first * 10**power


def _text_pixels(text: str, font: float) -> float:
    return font * DIGIT_EM * len(text) * DPI / 72


def _chips(
    boxes: Sequence[Box], labelled: range, lanes: Sequence[tuple[str, int]], pixels_per_time: float
) -> list[Chip] | None:
    """The chips of the `labelled` microbatches, one for boxes of a microbatch side by side in a lane;
    None when two chips would touch."""
    rows: dict[tuple[int, int], list[Chip]] = {}
    for box in sorted(boxes, key=lambda box: box.centre):
        if box.op.microbatch not in labelled:
            continue
        lane = lanes.index((box.op.kind, box.chunk))
        row = rows.setdefault((box.op.device, lane), [])
        row.append(Chip(box.op.device, lane, box.op.microbatch, box.centre))
        while len(row) > 1 and _touch(row[-2], row[-1], pixels_per_time):
            if row[-2].microbatch != row[-1].microbatch:
                return None
            last = row.pop()
            row[-1] = last._replace(centre=(row[-1].centre + last.centre) / 2)
    return [chip for row in rows.values() for chip in row]


def _touch(left: Chip, right: Chip, pixels_per_time: float) -> bool:
    """Whether two chips in a lane (`left` first) touch."""
    widths = sum(_text_pixels(chip.label, MIN_FONT) + 2 * CHIP_PAD * MIN_FONT * DPI / 72 for chip in (left, right))
    return (right.centre - left.centre) * pixels_per_time < widths / 2 + 1
