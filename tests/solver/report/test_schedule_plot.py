"""A schedule's picture: the Gantt chart's colours, the memory panels and their ticks, the title, a window."""

from __future__ import annotations

from pathlib import Path

import matplotlib.image
import numpy as np
import pytest
from matplotlib.colors import to_rgb

from pipesat.models import KINDS, InputError, Instance, Schedule
from pipesat.solver.evaluate.metrics import compute_metrics
from pipesat.solver.evaluate.simulator import simulate
from pipesat.solver.heuristics import run_heuristic
from pipesat.solver.report.figures import KIND_COLOURS, shade
from pipesat.solver.report.schedule_plot import (
    ALL,
    LINK_COLOURS,
    READABLE_OP_INCHES,
    SLIVER_INCHES,
    kind_names,
    memory_ticks,
    plot_schedule,
    readable_window,
    schedule_figure,
    schedule_title,
    tick_text,
)
from pipesat.solver.report.tables import format_percent
from tests.offloaded import INSTANCE, offloaded, one_at_a_time
from tests.solver.report.helpers import gantt_labels, overlapping, scaled, within
from tests.strategies import assert_valid


def _has_colour(image: np.ndarray, rgb: tuple[float, float, float], tolerance: float = 0.02) -> bool:
    return bool((np.abs(image[..., :3] - np.array(rgb)).max(axis=-1) < tolerance).any())


def _picture(schedule: Schedule, path: Path) -> np.ndarray:
    plot_schedule(schedule, path)
    image = matplotlib.image.imread(path)
    assert image.shape[0] > 300 and image.shape[1] > 800
    assert np.ptp(image[..., :3]) > 0.5
    return image


def test_every_kind_has_a_colour_and_a_name() -> None:
    # A new op kind needs both before any schedule holding it can be drawn.
    assert tuple(KIND_COLOURS) == KINDS
    assert all(tuple(kind_names(split)) == KINDS for split in (True, False))


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


# --- pictures at scale --------------------------------------------------------------------------


@pytest.mark.parametrize("p", [16, 32])
def test_labels_and_ticks_never_overprint(p: int) -> None:
    schedule = scaled(p, 4 * p, memory_limit=[p - d // 2 for d in range(p)])
    figure = schedule_figure(schedule)
    figure.draw_without_rendering()  # places the axis labels
    labels, _ = gantt_labels(figure)
    assert not overlapping([text.get_window_extent() for text in labels])
    ticks = [label.get_window_extent() for axes in figure.axes[2:] for label in axes.get_yticklabels()]
    names = [axes.yaxis.label.get_window_extent() for axes in figure.axes[2:]]
    assert len(names) == p and not overlapping(ticks + names)
    assert all(within(box, figure.bbox) for box in ticks + names)


def test_memory_ticks_leave_out_zero_only_when_it_would_touch_the_peak() -> None:
    assert memory_ticks(16, 18.4, 44, 7) == [0.0, 16]
    assert memory_ticks(1, 18.4, 44, 7) == [1]
    assert memory_ticks(0, 1, 44, 7) == [0.0]


def test_a_window_zooms_the_gantt_chart_and_memory_panels() -> None:
    schedule = scaled(4, 8, time_unit="ms")
    figure = schedule_figure(schedule, window=(10, 20))
    assert all(axes.get_xlim() == (10, 20) for axes in figure.axes if axes.get_visible())
    assert "time 10 to 20 ms of 33 ms" in figure.get_suptitle()
    labels, _ = gantt_labels(figure)
    shown = [op for op in schedule.ops if op.end > 10 and op.start < 20]
    assert sorted(text.get_text() for text in labels) == sorted(str(op.microbatch) for op in shown)
    assert schedule_figure(schedule, window=(30, 100)).axes[0].get_xlim() == (30, 33)
    with pytest.raises(InputError, match="starts after the schedule ends"):
        schedule_figure(schedule, window=(33, 40))


def test_memory_tick_texts_read_well() -> None:
    assert tick_text(16.078125) == "16.1" and tick_text(4116.5) == "4116" and tick_text(0.5) == "0.5"


def test_a_schedule_that_offloads_gets_a_link_lane(tmp_path: Path) -> None:
    schedule = offloaded()
    assert_valid(schedule)
    figure = schedule_figure(schedule)
    lanes = [
        ax for ax in figure.axes if ax.get_visible() and "GPU 0 link" in [t.get_text() for t in ax.get_yticklabels()]
    ]
    assert len(lanes) == 1
    bars = [patch for collection in lanes[0].collections for patch in collection.get_paths()]
    assert len(bars) >= len(schedule.transfers)
    image = _picture(schedule, tmp_path / "offload.png")
    assert all(_has_colour(image, to_rgb(colour)) for colour in LINK_COLOURS.values())
    plain = schedule_figure(simulate(INSTANCE, one_at_a_time()))
    assert not any("link" in t.get_text() for ax in plain.axes for t in ax.get_yticklabels())


def _shortest_op_inches(figure, schedule: Schedule) -> float:
    """How wide the schedule's shortest op is drawn in the Gantt chart, in inches."""
    gantt = figure.axes[0]
    start, end = gantt.get_xlim()
    shortest = min(op.end - op.start for op in schedule.ops)
    return shortest / (end - start) * gantt.get_position().width * figure.get_figwidth()


def test_a_long_schedule_shows_a_readable_first_part_by_default() -> None:
    """A 4,096-op picture (p16 m64 interleaved v2, its shortest op 0.5 of 289) was slivers: by default it shows as much of the
    start as draws every op at least READABLE_OP_INCHES wide; ALL draws it all, a short schedule is
    drawn whole."""
    long = scaled(16, 64, "interleaved", chunks=2, backward_times=2, weight_times=1)
    window = readable_window(long)
    makespan = compute_metrics(long).makespan
    assert window is not None and 0 < window[1] < makespan
    figure = schedule_figure(long)
    assert figure.axes[0].get_xlim() == window
    assert f"time 0 to {window[1]:g} of {makespan:g}" in figure.get_suptitle()
    assert _shortest_op_inches(figure, long) >= READABLE_OP_INCHES
    assert _shortest_op_inches(schedule_figure(long, window=ALL), long) < SLIVER_INCHES
    whole = schedule_figure(long, window=ALL)
    assert whole.axes[0].get_xlim() == (0, makespan) and "time 0 to" not in whole.get_suptitle()
    short = scaled(4, 8)
    assert readable_window(short) is None
    assert schedule_figure(short).axes[0].get_xlim() == (0, compute_metrics(short).makespan)
