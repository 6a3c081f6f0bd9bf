"""The Pareto picture: the frontier's marks, a label for every heuristic, labels kept apart."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import matplotlib.image
import numpy as np

from pipesat.solver.report.figures import save_figure
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
