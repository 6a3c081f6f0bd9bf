"""The Pareto picture: the frontier's marks, a label for every heuristic, labels kept apart."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import matplotlib.image
import numpy as np

from pipesat.solver.report.figures import save_figure
from pipesat.solver.report.pareto_plot import OFFLOAD_COLOUR as GREEN
from pipesat.solver.report.pareto_plot import pareto_figure
from tests.solver.report.helpers import overlapping, within


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


def test_close_pareto_points_keep_their_labels_apart() -> None:
    heuristics = [("ZB-V", 4.0, 25.5), ("V-ZB", 4.02, 25.6), ("V-auto", 4.0, 25.4), ("GPipe", 8.0, 33.0)]
    figure = pareto_figure([], heuristics)
    axes = figure.axes[0]
    assert sorted(text.get_text() for text in axes.texts) == ["GPipe", "V-ZB", "V-auto", "ZB-V"]
    extents = [text.get_window_extent() for text in axes.texts]
    assert not overlapping(extents)
    assert all(within(box, axes.bbox) for box in extents)  # GPipe at the right edge goes to the left


def test_a_frontier_bounded_by_the_devices_budget_ends_at_its_dashed_line() -> None:
    """The frontier's last step ran on to the roomiest heuristic (GPipe's 8x); with a budget it ends there."""
    points = [(1.0, SimpleNamespace(status="optimal", value=40.0, bound=40.0))]
    heuristics = [("GPipe", 8.0, 33.0)]
    figure = pareto_figure(points, heuristics, open_ended=True, ceiling=3.0)
    axes = figure.axes[0]
    step = axes.lines[0]
    assert list(step.get_xdata()) == [1.0, 3.0]
    assert any(list(line.get_xdata()) == [3.0, 3.0] and line.get_linestyle() == "--" for line in axes.lines)
    assert "what a device holds (its budget)" in [text.get_text() for text in figure.legends[0].get_texts()]
    unbounded = pareto_figure(points, heuristics, open_ended=True)
    assert list(unbounded.axes[0].lines[0].get_xdata()) == [1.0, 8.0]


def test_the_offload_series_and_the_offload_schedules_have_their_own_marks() -> None:
    def optimal(value: float) -> SimpleNamespace:
        return SimpleNamespace(status="optimal", value=value, bound=value)

    points = [(1.0, SimpleNamespace(status="infeasible", value=None, bound=None)), (2.0, optimal(30.0))]
    offloaded = [(1.0, optimal(32.0)), (2.0, optimal(27.0))]
    heuristics = [("V-Half", 3.0, 26.5), ("PipeOffload full (V)", 2.0, 26.5)]
    figure = pareto_figure(points, heuristics, offloaded=offloaded, offloading={"PipeOffload full (V)"})
    legend = [text.get_text() for text in figure.legends[0].get_texts()]
    assert legend == [
        "solver: optimal",
        "solver with offload: optimal",
        "handwritten schedule (at its peak memory)",
        "handwritten offload schedule (at its peak memory)",
        "no schedule fits",
    ]
    drawn = [line for line in figure.axes[0].lines if len(line.get_xdata())]  # legend handles are empty
    squares = [(list(line.get_xdata()), list(line.get_ydata())) for line in drawn if line.get_marker() == "s"]
    assert squares == [([2.0], [26.5])]
    green_dots = [list(line.get_ydata()) for line in drawn if line.get_marker() == "o" and line.get_color() == GREEN]
    assert green_dots == [[32.0], [27.0]]
    assert {text.get_text() for text in figure.axes[0].texts} == {"V-Half", "PipeOffload full (V)"}
