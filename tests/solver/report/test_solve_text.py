"""The words for a solve: its outcome line, why there is no schedule, its summary and progress line."""

from __future__ import annotations

from typing import Any

from pipesat.models import Instance, Minimize, Objective, Status
from pipesat.models.solve_result import Infeasibility, InfeasibleReason, NamedValue, SolveResult, StopReason
from pipesat.solver.heuristics import run_heuristic
from pipesat.solver.report.solve_text import (
    goal_text,
    no_schedule_text,
    outcome_text,
    progress_text,
    summary_fields,
)

SCHEDULE = run_heuristic("1f1b", Instance.from_dict({"num_devices": 2, "num_microbatches": 2}))


def _result(**fields: Any) -> SolveResult:
    return SolveResult(**{"status": Status.OPTIMAL, "objective": Objective.MAKESPAN, "solve_time": 2.0, **fields})


def _solved(value: float, bound: float, **fields: Any) -> SolveResult:
    gap = (value - bound) / value
    return _result(schedule=SCHEDULE, value=value, bound=bound, gap=gap, **fields)


def test_outcome_of_a_schedule() -> None:
    assert outcome_text(_solved(9, 9)) == "optimal"
    assert outcome_text(_solved(9, 8, status=Status.FEASIBLE)) == "feasible, gap 11.1%"
    assert outcome_text(_solved(9, 9, status=Status.INTERRUPTED)) == "interrupted, gap 0%"
    start = NamedValue("1f1b", 9)
    assert outcome_text(_solved(9, 9, searched=False, starting_point=start)) == "optimal (1f1b meets the lower bound)"
    within = _solved(9, 8, status=Status.FEASIBLE, searched=False, starting_point=start)
    assert outcome_text(within) == "feasible, gap 11.1% (1f1b is within the gap)"


def test_outcome_and_error_without_a_schedule() -> None:
    limit = _result(
        status=Status.INFEASIBLE,
        smallest_feasible_limit=1.0,
        infeasibility=Infeasibility(InfeasibleReason.MEMORY_LIMIT, Objective.MAKESPAN, 0.9, 1.0),
    )
    assert outcome_text(limit) == "infeasible: memory limit 0.9 is too small; the smallest feasible limit is 1"
    assert no_schedule_text(limit) == "no schedule fits the memory limit 0.9; the smallest feasible limit is 1"
    cap = _result(
        status=Status.INFEASIBLE,
        objective=Objective.MEMORY,
        infeasibility=Infeasibility(InfeasibleReason.TIME_CAP, Objective.SPAN, 3, 12),
    )
    assert outcome_text(cap) == "infeasible: no schedule has a span within 3; the lower bound is 12"
    assert no_schedule_text(cap) == "no schedule fits: no schedule has a span within 3; the lower bound is 12"
    proven = Infeasibility(InfeasibleReason.PROVEN, Objective.MAKESPAN, 40)
    searched = _result(status=Status.INFEASIBLE, infeasibility=proven)
    assert outcome_text(searched) == "infeasible: no schedule fits; searched for a makespan within 40"
    unknown = _result(status=Status.UNKNOWN)
    assert outcome_text(unknown) == "unknown: no schedule found in 2 s"
    assert no_schedule_text(unknown) == (
        "the solver found no schedule (unknown) (unknown: no schedule found in 2 s); raise `time_limit`"
    )
    interrupted = _result(status=Status.INTERRUPTED)
    assert outcome_text(interrupted) == "interrupted before any schedule was found"


def test_summary_names_the_best_heuristic_and_the_starting_point() -> None:
    result = _solved(
        8,
        8,
        best_heuristic=NamedValue("zb-h1", 10),
        starting_point=NamedValue("periodic", 9),
        time_to_first=0.5,
        time_to_best=1.25,
        stopped_by=StopReason.PROOF,
        reason="proven by CP-SAT",
    )
    assert summary_fields(result) == [
        ("status", "optimal (proven by CP-SAT)"),
        ("makespan", "8"),
        ("lower bound", "8"),
        ("gap", "0.00% over the lower bound"),
        ("best heuristic", "ZB-H1 = 10, 25.00% slower"),
        ("started from", "periodic start (pipesat's, not handwritten) = 9"),
        ("solve time", "2.00 s, first schedule at 0.50 s, best at 1.25 s"),
    ]
    alone = dict(summary_fields(_solved(8, 7, status=Status.FEASIBLE, objective=Objective.MEMORY)))
    assert alone["best heuristic"] == "no handwritten schedule fits this instance and limit"
    assert alone["peak memory"] == "8" and "started from" not in alone and alone["solve time"] == "2.00 s"


def test_the_status_says_why_the_solve_ended() -> None:
    start = {"searched": False, "starting_point": NamedValue("1f1b", 9), "stopped_by": StopReason.BOUNDS}
    met = _solved(9, 9, reason="1f1b meets the lower bound", **start)
    assert dict(summary_fields(met))["status"] == "optimal (1f1b meets the lower bound)"
    timed_out = _solved(9, 8, status=Status.FEASIBLE, stopped_by=StopReason.TIME_LIMIT, reason="the time limit ran out")
    assert dict(summary_fields(timed_out))["status"] == "feasible (the time limit ran out)"
    rounded = _solved(9, 8.99, stopped_by=StopReason.PROOF, reason="proven by CP-SAT", resolution=0.01)
    assert dict(summary_fields(rounded))["status"] == "optimal (proven by CP-SAT for times rounded down to 0.01)"


def test_a_solve_without_a_schedule_says_why_and_hints_only_at_what_helps() -> None:
    late = _result(status=Status.UNKNOWN, stopped_by=StopReason.TIME_LIMIT, reason="the time limit ran out")
    assert outcome_text(late) == "unknown: no schedule found in 2 s (the time limit ran out)"
    assert no_schedule_text(late).endswith(
        "(unknown: no schedule found in 2 s (the time limit ran out)); raise `time_limit`"
    )
    invalid = "CP-SAT refused the model: var #0 has no domain()"
    refused = _result(status=Status.UNKNOWN, stopped_by=StopReason.MODEL_INVALID, reason=invalid)
    assert (
        no_schedule_text(refused)
        == f"the solver found no schedule (unknown) (unknown: no schedule found in 2 s ({invalid}))"
    )
    died = "the CP-SAT process was killed by signal SIGKILL; it last wrote: F0101 check failed"
    crashed = _result(status=Status.UNKNOWN, stopped_by=StopReason.CRASH, reason=died)
    assert died in no_schedule_text(crashed) and "time_limit" not in no_schedule_text(crashed)


def test_goal_and_progress_line() -> None:
    assert goal_text(Objective.SPAN, Minimize.TIME, None) == "least max span"
    assert goal_text(Objective.MAKESPAN, Minimize.MEMORY, 40) == "least peak memory with makespan <= 40"
    assert progress_text(1.25, 10, 8) == "    1.2s  best         10  bound          8  gap 25.00%"
    assert progress_text(0, None, None) == "    0.0s  best          -  bound          -"
