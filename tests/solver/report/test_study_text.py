"""The text of the studies: the compare table's frame and the Pareto tables."""

from __future__ import annotations

import json

from pipesat.models import Instance, Objective, Schedule, Status
from pipesat.models.solve_result import SolveResult
from pipesat.solver.evaluate.metrics import compute_metrics
from pipesat.solver.heuristics import run_heuristic
from pipesat.solver.report.study_text import comparison_columns, comparison_text, pareto_text, pareto_title
from tests.conftest import make_instance


def test_comparison_text_frames_only_the_text_table(one_f_one_b_instance: Instance) -> None:
    assert comparison_text(one_f_one_b_instance, "a,b", "csv", 30.0) == "a,b"
    assert comparison_text(one_f_one_b_instance, "TABLE", "text", None) == (
        "4 devices, 8 microbatches, fused backward\n\nTABLE"
    )
    assert comparison_text(one_f_one_b_instance, "TABLE", "text", 30.0).endswith(
        "TABLE\n\nThe optimum is not proven: gaps are to the lower bound 30."
    )


def _points(instance: Instance) -> list[tuple[float, SolveResult]]:
    """An infeasible point at 1 and an optimal one at 4 (the 1F1B schedule)."""
    infeasible = SolveResult(status=Status.INFEASIBLE, objective=Objective.MAKESPAN, solve_time=0.0)
    optimal = _solved(Status.OPTIMAL, run_heuristic("1f1b", instance), value=33.0, bound=33.0)
    return [(1.0, infeasible), (4.0, optimal)]


def _solved(status: Status, schedule: Schedule, value: float, bound: float) -> SolveResult:
    """A makespan solve's result with `schedule`, its value and bound (the gap between them)."""
    gap = (value - bound) / bound
    return SolveResult(
        status=status,
        objective=Objective.MAKESPAN,
        schedule=schedule,
        value=value,
        bound=bound,
        gap=gap,
        solve_time=0.0,
    )


def test_pareto_text_table(one_f_one_b_instance: Instance) -> None:
    text = pareto_text(
        one_f_one_b_instance, _points(one_f_one_b_instance), [("1f1b", 4.0, 33.0)], Objective.SPAN, "text"
    )
    lines = text.splitlines()
    assert lines[0] == "4 devices, 8 microbatches, fused backward; 1x = the 1F1B peak 4"
    assert lines[2].split() == [
        "memory",
        "limit",
        "x",
        "1F1B",
        "peak",
        "status",
        "max",
        "span",
        "lower",
        "bound",
        "over",
        "bound",
        "peak",
        "memory",
    ]
    assert lines[4].split() == ["1", "0.25x", "infeasible", "-", "-", "-", "-"]
    assert lines[5].split() == ["4", "1.00x", "optimal", "33", "33", "0.00%", "4"]
    assert lines[-1].split() == ["1F1B", "4", "33"]


def test_pareto_text_machine_formats_hold_only_the_frontier(one_f_one_b_instance: Instance) -> None:
    text = pareto_text(
        one_f_one_b_instance, _points(one_f_one_b_instance), [("1f1b", 4.0, 33.0)], Objective.MAKESPAN, "json"
    )
    rows = json.loads(text)
    assert [row["status"] for row in rows] == ["infeasible", "optimal"]
    assert rows[1] == {
        "limit": 4.0,
        "relative_limit": 1.0,
        "status": "optimal",
        "value": 33.0,
        "bound": 33.0,
        "gap": 0.0,
        "peak_memory": 4.0,
    }


def test_pareto_title_leaves_out_the_limit() -> None:
    instance = make_instance(4, 8, memory_limit="0.5x")
    assert (
        pareto_title(instance, Objective.MAKESPAN)
        == "makespan against memory limit: 4 devices, 8 microbatches, fused backward"
    )


def test_compare_columns_follow_the_limit_the_units_and_format() -> None:
    makespan = Objective.MAKESPAN
    plain = make_instance(4, 8)
    keys = ["title", "value", "bubble_rate", "peak_memory", "gap", "note"]
    assert [c.key for c in comparison_columns(plain, makespan, None)] == keys
    assert [c.key for c in comparison_columns(plain, makespan, None, machine=True)][:2] == ["name", "title"]
    assert "fits 2" in [c.header for c in comparison_columns(plain.with_limit(2), makespan, "optimum")]
    assert "fits limits" in [c.header for c in comparison_columns(plain.with_limit([2, 2, 3, 3]), makespan, None)]
    headers = [c.header for c in comparison_columns(plain, Objective.SPAN, "bound")]
    assert "max span" in headers and "slower than bound" in headers
    in_units = plain.with_changes(time_unit="ms", memory_unit="MiB").with_limit(20 * 1024)
    headers = [c.header for c in comparison_columns(in_units, makespan, None)]
    assert "makespan (ms)" in headers and "peak memory (GiB)" in headers and "fits 20 GiB" in headers


def test_pareto_text_shows_the_offload_points_in_their_own_table() -> None:
    linked = Instance.from_dict({"num_devices": 4, "num_microbatches": 8, "host_link_bandwidth": 64})
    schedule = run_heuristic("pipeoffload-full-1f1b", linked)
    assert schedule.transfers
    offloaded = _solved(Status.FEASIBLE, schedule, value=33.0, bound=30.0)
    points = _points(linked)
    text = pareto_text(linked, points, [], Objective.MAKESPAN, "text", offloaded=[(2.0, offloaded)])
    lines = text.splitlines()
    assert lines[2] == "without offload:"
    start = lines.index("with offload over the host link:")
    assert lines[start + 1].split()[-1] == "offloads"
    assert lines[start + 3].split() == [
        "2",
        "0.50x",
        "feasible",
        "33",
        "30",
        "10.00%",
        f"{compute_metrics(schedule).max_peak_memory:g}",
        f"{len(schedule.transfers) // 2}/32",
    ]
    # A machine format holds both series in one table, told apart by the offload column.
    csv_lines = pareto_text(linked, points, [], Objective.MAKESPAN, "csv", offloaded=[(2.0, offloaded)]).splitlines()
    assert csv_lines[0].split(",")[-2:] == ["offload", "offloads"]
    assert [line.split(",")[-2] for line in csv_lines[1:]] == ["no"] * len(points) + ["yes"]
    assert csv_lines[-1].split(",")[-1] == f"{len(schedule.transfers) // 2}/32"
