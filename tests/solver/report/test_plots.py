"""Pictures: the Gantt chart and memory panels of a schedule, and the Pareto plot."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace

import matplotlib.image
import numpy as np
import pytest
from matplotlib.colors import to_rgb
from matplotlib.figure import Figure
from matplotlib.text import Text
from matplotlib.transforms import Bbox

from models import InputError, Instance, Schedule
from solver.evaluate.metrics import compute_metrics
from solver.heuristics import run_heuristic
from solver.report.plots import (
    KIND_COLOURS,
    MIN_FONT,
    fit_text,
    memory_ticks,
    ordinal,
    pareto_figure,
    picture_format,
    plot_schedule,
    save_figure,
    schedule_figure,
    schedule_title,
    shade,
    tick_text,
)
from solver.report.tables import format_percent
from tests.strategies import assert_valid


def _has_colour(image: np.ndarray, rgb: tuple[float, float, float], tolerance: float = 0.02) -> bool:
    return bool((np.abs(image[..., :3] - np.array(rgb)).max(axis=-1) < tolerance).any())


def _picture(schedule: Schedule, path: Path) -> np.ndarray:
    plot_schedule(schedule, path)
    image = matplotlib.image.imread(path)
    assert image.shape[0] > 300 and image.shape[1] > 800
    assert np.ptp(image[..., :3]) > 0.5
    return image


def test_kinds_have_their_colours(tmp_path: Path) -> None:
    fused = Instance.from_dict({"num_devices": 3, "num_microbatches": 4, "memory_limit": "1x"})
    image = _picture(assert_valid(run_heuristic("1f1b", fused)), tmp_path / "fused.png")
    assert _has_colour(image, to_rgb(KIND_COLOURS["F"])) and _has_colour(image, to_rgb(KIND_COLOURS["B"]))
    assert not _has_colour(image, to_rgb(KIND_COLOURS["W"]))
    split = fused.with_changes(weight_times=[0.5] * 3, weight_memory=None)
    image = _picture(assert_valid(run_heuristic("zb-h1", split)), tmp_path / "split.png")
    assert all(_has_colour(image, to_rgb(colour)) for colour in KIND_COLOURS.values())


def test_later_chunks_are_lighter_shades(tmp_path: Path) -> None:
    instance = Instance.from_dict({"num_devices": 2, "num_microbatches": 4, "chunks": 2, "placement": "interleaved"})
    image = _picture(assert_valid(run_heuristic("interleaved", instance)), tmp_path / "chunks.png")
    first, second = shade(KIND_COLOURS["F"], 0, 2), shade(KIND_COLOURS["F"], 1, 2)
    assert sum(second) > sum(first)
    assert _has_colour(image, first) and _has_colour(image, second)


def test_microbatch_numbers_are_written_when_they_fit() -> None:
    instance = Instance.from_dict({"num_devices": 2, "num_microbatches": 3})
    schedule = assert_valid(run_heuristic("1f1b", instance))
    gantt = schedule_figure(schedule).axes[0]
    assert sorted(text.get_text() for text in gantt.texts) == sorted(str(op.microbatch) for op in schedule.ops)


def test_memory_panels_one_per_device_with_the_limit() -> None:
    instance = Instance.from_dict({"num_devices": 3, "num_microbatches": 4, "memory_limit": 2.5})
    unlimited = assert_valid(run_heuristic("gpipe", instance.with_changes(memory_limit=None)))
    figure = schedule_figure(Schedule(instance, unlimited.ops, unlimited.name))
    panels = [axes for axes in figure.axes if axes.get_visible()][1:]
    assert len(panels) == 3
    for axes in panels:
        assert any(list(line.get_ydata()) == [2.5, 2.5] for line in axes.lines)


def test_title_names_schedule_objective_bubble_and_peak(one_f_one_b_instance: Instance) -> None:
    schedule = assert_valid(run_heuristic("1f1b", one_f_one_b_instance.with_changes(memory_limit="1x")))
    metrics = compute_metrics(schedule)
    title = schedule_title(schedule)
    assert title.startswith("1F1B")
    assert "makespan 33" in title and f"bubble rate {format_percent(metrics.bubble_rate)}" in title
    assert title.endswith("peak memory 4  ·  limit 4 (1x)")
    assert schedule_title(schedule, "span").splitlines()[1].startswith("max span 33")
    in_units = schedule.instance.with_changes(time_unit="ms", memory_unit="GiB")
    titled = schedule_title(Schedule(in_units, schedule.ops, schedule.name))
    assert "makespan 33 ms" in titled and titled.endswith("peak memory 4 GiB  ·  limit 4 GiB (1x)")


def test_formats_by_extension(tmp_path: Path) -> None:
    schedule = assert_valid(run_heuristic("gpipe", Instance.from_dict({"num_devices": 2, "num_microbatches": 2})))
    assert "<svg" in plot_schedule(schedule, tmp_path / "g.svg").read_text()
    assert plot_schedule(schedule, tmp_path / "g.PDF").read_bytes().startswith(b"%PDF")
    assert picture_format("x.png") == "png"
    with pytest.raises(InputError, match=r"name it \.png, \.svg or \.pdf"):
        plot_schedule(schedule, tmp_path / "g.jpg")
    assert not (tmp_path / "g.jpg").exists()


def test_pareto_plot_labels_every_heuristic(tmp_path: Path) -> None:
    def result(status: str, value: float | None, bound: float | None) -> SimpleNamespace:
        return SimpleNamespace(status=status, value=value, bound=bound)

    points = [
        (1.0, result("infeasible", None, None)),
        (2.0, result("feasible", 40.0, 35.0)),
        (4.0, result("optimal", 30.0, 30.0)),
    ]
    heuristics = [("1F1B", 4.0, 33.0), ("GPipe", 8.0, 33.0), ("ZB-H1", 4.0, 27.0), ("ZB-auto", 4.0, 27.0)]
    figure = pareto_figure(points, heuristics, reference=4.0)
    assert {text.get_text() for text in figure.axes[0].texts} == {"1F1B", "GPipe", "ZB-H1, ZB-auto"}
    legend = [text.get_text() for text in figure.legends[0].get_texts()]
    assert legend == [
        "solver: optimal",
        "solver: feasible, bar to bound",
        "handwritten schedule (at its peak memory)",
        "no schedule fits",
    ]
    only_optimal = pareto_figure(points[2:], [])
    assert [text.get_text() for text in only_optimal.legends[0].get_texts()] == ["solver: optimal"]
    path = save_figure(figure, tmp_path / "pareto.png")
    image = matplotlib.image.imread(path)
    assert np.ptp(image[..., :3]) > 0.5


# --- pictures at scale --------------------------------------------------------------------------


def _overlapping(extents: list[Bbox]) -> list[tuple[Bbox, Bbox]]:
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


def _within(inner: Bbox, outer: Bbox) -> bool:
    return outer.x0 <= inner.x0 and inner.x1 <= outer.x1 and outer.y0 <= inner.y0 and inner.y1 <= outer.y1


def _labels(figure: Figure) -> tuple[list[Text], list[str]]:
    """The Gantt chart's microbatch numbers, and its notes."""
    texts = figure.axes[0].texts
    return [text for text in texts if text.get_text().isdigit()], [
        t.get_text() for t in texts if "labels" in t.get_text()
    ]


def _scaled(p: int, m: int, name: str = "1f1b", **changes: object) -> Schedule:
    instance = Instance.from_dict({"num_devices": p, "num_microbatches": m, **changes})
    return assert_valid(run_heuristic(name, instance))


def test_every_op_is_labelled_or_a_note_says_which_are() -> None:
    small = _scaled(4, 8)
    labels, notes = _labels(schedule_figure(small))
    assert sorted(text.get_text() for text in labels) == sorted(str(op.microbatch) for op in small.ops) and not notes
    zb_v = {"weight_times": 1, "chunks": 2, "placement": "vshape"}
    for schedule, noted in ((_scaled(16, 64), True), (_scaled(16, 32, "zb-v", **zb_v), False)):
        labels, notes = _labels(schedule_figure(schedule))
        assert len(notes) == noted, "where not every microbatch has its number, the note says which have"
        step = int(re.search(r"every (\d+)(st|nd|rd|th) microbatch", notes[0]).group(1)) if notes else 1
        assert step > 1 or not noted
        written = {(round(text.get_position()[1]), int(text.get_text())) for text in labels}
        assert written == {(op.device, op.microbatch) for op in schedule.ops if op.microbatch % step == 0}


def test_two_digit_numbers_fit_a_smaller_font_before_any_is_left_out() -> None:
    # p=8, m=48: F boxes too narrow for two digits at 8 points, wide enough at a smaller font.
    schedule = _scaled(8, 48)
    labels, notes = _labels(schedule_figure(schedule))
    assert not notes and len(labels) == len(schedule.ops)
    assert MIN_FONT <= min(text.get_fontsize() for text in labels) < 8


@pytest.mark.parametrize("p", [16, 32])
def test_labels_and_ticks_never_overprint(p: int) -> None:
    schedule = _scaled(p, 4 * p, memory_limit=[p - d // 2 for d in range(p)])
    figure = schedule_figure(schedule)
    figure.draw_without_rendering()  # places the axis labels
    labels, _ = _labels(figure)
    assert not _overlapping([text.get_window_extent() for text in labels])
    ticks = [label.get_window_extent() for axes in figure.axes[2:] for label in axes.get_yticklabels()]
    names = [axes.yaxis.label.get_window_extent() for axes in figure.axes[2:]]
    assert len(names) == p and not _overlapping(ticks + names)
    assert all(_within(box, figure.bbox) for box in ticks + names)


def test_memory_ticks_leave_out_zero_only_when_it_would_touch_the_peak() -> None:
    assert memory_ticks(16, 18.4, 44, 7) == [0.0, 16]
    assert memory_ticks(1, 18.4, 44, 7) == [1]
    assert memory_ticks(0, 1, 44, 7) == [0.0]


def test_titles_fit_the_figure() -> None:
    limits = [round(40 + d * 1.37, 2) for d in range(32)]
    schedule = _scaled(32, 64, memory_limit=limits, time_unit="ms", memory_unit="GiB")
    assert len(schedule_title(schedule)) > 300
    figure = schedule_figure(schedule, window=(0, 20))  # a window: a narrow figure
    title = figure.get_suptitle()
    assert title.count("\n") >= 2
    assert _within(figure._suptitle.get_window_extent(), figure.bbox)
    assert all(_within(axes.title.get_window_extent(), figure.bbox) for axes in figure.axes)
    name = "a-rather-long-instance-name-for-a-70b-model-on-sixteen-gpus-with-vshape-placement " * 2
    pareto = pareto_figure([], [("1F1B", 4.0, 33.0)], title=f"makespan against memory limit: {name}")
    assert _within(pareto.axes[0].title.get_window_extent(), pareto.bbox)


def test_close_pareto_points_keep_their_labels_apart() -> None:
    heuristics = [("ZB-V", 4.0, 25.5), ("V-ZB", 4.02, 25.6), ("V-auto", 4.0, 25.4), ("GPipe", 8.0, 33.0)]
    figure = pareto_figure([], heuristics)
    axes = figure.axes[0]
    assert sorted(text.get_text() for text in axes.texts) == ["GPipe", "V-ZB", "V-auto", "ZB-V"]
    extents = [text.get_window_extent() for text in axes.texts]
    assert not _overlapping(extents)
    assert all(_within(box, axes.bbox) for box in extents)  # GPipe at the right edge goes to the left


def test_a_window_zooms_the_gantt_chart_and_memory_panels() -> None:
    schedule = _scaled(4, 8, time_unit="ms")
    figure = schedule_figure(schedule, window=(10, 20))
    assert all(axes.get_xlim() == (10, 20) for axes in figure.axes if axes.get_visible())
    assert "time 10 to 20 ms of 33 ms" in figure.get_suptitle()
    labels, _ = _labels(figure)
    shown = [op for op in schedule.ops if op.end > 10 and op.start < 20]
    assert sorted(text.get_text() for text in labels) == sorted(str(op.microbatch) for op in shown)
    assert schedule_figure(schedule, window=(30, 100)).axes[0].get_xlim() == (30, 33)
    with pytest.raises(InputError, match="starts after the schedule ends"):
        schedule_figure(schedule, window=(33, 40))


def test_notes_and_titles_read_well() -> None:
    assert [ordinal(n) for n in (1, 2, 3, 5, 11, 12, 22, 101)] == [
        "1st",
        "2nd",
        "3rd",
        "5th",
        "11th",
        "12th",
        "22nd",
        "101st",
    ]
    assert tick_text(16.078125) == "16.1" and tick_text(4116.5) == "4116" and tick_text(0.5) == "0.5"
    figure = Figure(figsize=(3, 2))
    text = figure.suptitle("makespan 33 ms  ·  bubble rate 27.27%  ·  peak memory 4 GiB  ·  limit 4 GiB (1x)")
    fit_text(text, figure.bbox.width)
    assert text.get_window_extent().width <= figure.bbox.width
    assert text.get_text().splitlines()[0] == "makespan 33 ms"  # broken at its separators
