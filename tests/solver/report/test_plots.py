"""Pictures: the Gantt chart and memory panels of a schedule, and the Pareto plot."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import matplotlib.image
import numpy as np
import pytest
from matplotlib.colors import to_rgb

from models import InputError, Instance, Schedule
from solver.evaluate.metrics import compute_metrics
from solver.heuristics import run_heuristic
from solver.report.plots import (
    KIND_COLOURS,
    pareto_figure,
    picture_format,
    plot_schedule,
    save_figure,
    schedule_figure,
    schedule_title,
    shade,
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
    legend = [text.get_text() for text in figure.axes[0].get_legend().get_texts()]
    assert legend == [
        "solver: optimal",
        "solver: feasible, bar to bound",
        "handwritten schedule (at its peak memory)",
        "no schedule fits",
    ]
    only_optimal = pareto_figure(points[2:], [])
    assert [text.get_text() for text in only_optimal.axes[0].get_legend().get_texts()] == ["solver: optimal"]
    path = save_figure(figure, tmp_path / "pareto.png")
    image = matplotlib.image.imread(path)
    assert np.ptp(image[..., :3]) > 0.5
