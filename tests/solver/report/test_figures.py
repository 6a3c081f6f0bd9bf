"""What every picture shares: the file format by extension, and titles that fit the figure."""

from __future__ import annotations

from pathlib import Path

import pytest
from matplotlib.figure import Figure

from pipesat.models import InputError, Instance
from pipesat.solver.heuristics import run_heuristic
from pipesat.solver.report.figures import fit_text, picture_format
from pipesat.solver.report.pareto_plot import pareto_figure
from pipesat.solver.report.schedule_plot import plot_schedule, schedule_figure, schedule_title
from tests.solver.report.helpers import scaled, within
from tests.strategies import assert_valid


def test_formats_by_extension(tmp_path: Path) -> None:
    schedule = assert_valid(run_heuristic("gpipe", Instance.from_dict({"num_devices": 2, "num_microbatches": 2})))
    assert "<svg" in plot_schedule(schedule, tmp_path / "g.svg").read_text()
    assert plot_schedule(schedule, tmp_path / "g.PDF").read_bytes().startswith(b"%PDF")
    assert picture_format("x.png") == "png"
    with pytest.raises(InputError, match=r"name it \.png, \.svg or \.pdf"):
        plot_schedule(schedule, tmp_path / "g.jpg")
    assert not (tmp_path / "g.jpg").exists()


def test_titles_fit_the_figure() -> None:
    limits = [round(40 + d * 1.37, 2) for d in range(32)]
    schedule = scaled(32, 64, memory_limit=limits, time_unit="ms", memory_unit="GiB")
    assert len(schedule_title(schedule)) > 300
    figure = schedule_figure(schedule, window=(0, 20))  # a window: a narrow figure
    title = figure.get_suptitle()
    assert title.count("\n") >= 2
    assert within(figure._suptitle.get_window_extent(), figure.bbox)
    assert all(within(axes.title.get_window_extent(), figure.bbox) for axes in figure.axes)
    name = "a-rather-long-instance-name-for-a-70b-model-on-sixteen-gpus-with-vshape-placement " * 2
    pareto = pareto_figure([], [("1F1B", 4.0, 33.0)], title=f"makespan against memory limit: {name}")
    assert within(pareto.axes[0].title.get_window_extent(), pareto.bbox)


def test_titles_break_at_their_separators() -> None:
    figure = Figure(figsize=(3, 2))
    text = figure.suptitle("makespan 33 ms  ·  bubble rate 27.27%  ·  peak memory 4 GiB  ·  limit 4 GiB (1x)")
    fit_text(text, figure.bbox.width)
    assert text.get_window_extent().width <= figure.bbox.width
    assert text.get_text().splitlines()[0] == "makespan 33 ms"  # broken at its separators
