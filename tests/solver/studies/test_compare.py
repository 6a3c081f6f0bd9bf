"""The comparison: every heuristic once, n/a reasons, fits against the limit, gaps, best first."""

from __future__ import annotations

import pytest

from pipesat.models import Instance, Objective, Status
from pipesat.models.solve_result import Infeasibility, InfeasibleReason, SolveResult
from pipesat.solver.evaluate.metrics import compute_metrics
from pipesat.solver.evaluate.retime import retime_for_span
from pipesat.solver.heuristics import all_heuristics, run_heuristic
from pipesat.solver.studies.compare import SOLVER_NAME, compare, compare_placements, solver_row, with_torch_rows
from pipesat.solver.torch.import_schedule import TORCH_SCHEDULES
from tests.conftest import moe_instance
from tests.strategies import assert_valid

SPLIT = {"num_devices": 3, "num_microbatches": 6, "weight_times": 1, "backward_times": 1}


def test_every_heuristic_once_with_its_own_metrics() -> None:
    instance = Instance.from_dict(SPLIT)
    comparison = compare(instance, solve=False)
    assert sorted(row.name for row in comparison.rows) == sorted(h.name for h in all_heuristics())
    for row in comparison.rows:
        if row.schedule is None:
            assert row.note.startswith("n/a: needs") and row.value is None
            continue
        metrics = compute_metrics(assert_valid(run_heuristic(row.name, instance)))
        assert (row.value, row.bubble_rate, row.peak_memory) == (
            metrics.makespan,
            metrics.bubble_rate,
            metrics.max_peak_memory,
        )
        assert row.fits is None and row.gap is None


def test_fits_the_limit_and_order() -> None:
    instance = Instance.from_dict({**SPLIT, "memory_limit": "1x"})
    rows = compare(instance, "span", solve=False).rows
    by_name = {row.name: row for row in rows}
    assert by_name["gpipe"].fits is False and by_name["gpipe"].note == "over the memory limit"
    assert by_name["1f1b"].fits is True and by_name["zb-h2"].fits is False
    for row in rows:
        if row.schedule is not None:
            # The max span of the order re-timed for the least span, as the solver measures it.
            retimed = assert_valid(retime_for_span(run_heuristic(row.name, instance.with_changes(memory_limit=None))))
            assert row.value == pytest.approx(compute_metrics(retimed).max_span)
            assert row.value <= compute_metrics(run_heuristic(row.name, instance)).max_span + 1e-9
    keys = [(row.value is None, row.fits is False, row.value or 0.0) for row in rows]
    assert keys == sorted(keys)


def test_solver_row_says_feasible_or_why_not() -> None:
    schedule = assert_valid(run_heuristic("1f1b", Instance.from_dict({"num_devices": 2, "num_microbatches": 2})))
    ended = {"objective": Objective.MAKESPAN, "solve_time": 1.5}
    feasible = SolveResult(status=Status.FEASIBLE, schedule=schedule, gap=0.125, **ended)
    row = solver_row(feasible, "makespan")
    assert row.name == SOLVER_NAME and row.note == "feasible" and row.gap == 0.125 and row.value == 9
    too_small = Infeasibility(InfeasibleReason.MEMORY_LIMIT, Objective.MAKESPAN, limit=1, least=2)
    infeasible = SolveResult(status=Status.INFEASIBLE, smallest_feasible_limit=2, infeasibility=too_small, **ended)
    assert solver_row(infeasible, "makespan").note == (
        "infeasible: memory limit 1 is too small; the smallest feasible limit is 2"
    )
    proven = SolveResult(
        status=Status.INFEASIBLE, infeasibility=Infeasibility(InfeasibleReason.PROVEN, Objective.MAKESPAN), **ended
    )
    assert solver_row(proven, "makespan").note == "infeasible: no schedule fits; searched for one"
    unknown = SolveResult(status=Status.UNKNOWN, **ended)
    assert solver_row(unknown, "makespan").note == "unknown: no schedule found in 1.5 s"


def test_with_the_solver_gaps_are_to_its_optimum_or_bound() -> None:
    instance = Instance.from_dict({"num_devices": 2, "num_microbatches": 3, "weight_times": 0.5, "backward_times": 1})
    comparison = compare(instance, time_limit=3, workers=1)
    solver = comparison.rows[0]
    assert solver.name == SOLVER_NAME and solver.schedule is not None
    assert_valid(solver.schedule)
    assert comparison.reference_kind in ("optimum", "bound")
    for row in comparison.rows[1:]:
        if row.value is not None:
            assert row.value >= solver.value - 1e-9
            # How much slower than the optimum (or bound): the one definition of a gap.
            assert row.gap == pytest.approx((row.value - comparison.reference) / comparison.reference)


VSHAPE_SPLIT = {
    "num_devices": 4,
    "num_microbatches": 8,
    "p2p_time": 0.25,
    "weight_times": 1,
    "chunks": 2,
    "placement": "vshape",
}


def test_compare_with_torch_adds_one_row_per_builtin_after_pipesats() -> None:
    pytest.importorskip("torch")
    instance = Instance.from_dict({**VSHAPE_SPLIT, "memory_limit": "1x"})
    comparison = compare(instance, solve=False)
    extended = with_torch_rows(comparison)
    assert extended.rows[: len(comparison.rows)] == comparison.rows
    torch_part = {row.name: row for row in extended.rows[len(comparison.rows) :]}
    assert set(torch_part) == {f"torch:{name}" for name in TORCH_SCHEDULES}
    zbv = torch_part["torch:ZBVZeroBubble"]
    assert_valid(zbv.schedule)
    assert zbv.value == compute_metrics(zbv.schedule).makespan and zbv.fits is True
    # DualPipeV holds more than the 1F1B peak here: timed anyway, and marked as not fitting.
    dual = torch_part["torch:DualPipeV"]
    assert dual.fits is False and dual.note == "over the memory limit"
    assert instance.over_limit(compute_metrics(dual.schedule).peak_memory)
    assert torch_part["torch:GPipe"].note == "n/a: needs one stage per device (chunks 1, linear placement)"


def test_the_same_model_at_several_placements_in_one_table() -> None:
    moe = moe_instance(4, 8, p2p_time=0.05)
    comparison = compare_placements(moe, ("linear", "vshape"), time_limit=2, workers=1, seed=0)
    assert comparison.placements == ("linear", "vshape") and comparison.reference_kind == "best"
    by_name = {(row.name, row.placement): row for row in comparison.rows}
    assert {(SOLVER_NAME, "linear"), (SOLVER_NAME, "vshape"), ("dualpipe-v", "vshape"), ("1f1b", "linear")} <= set(
        by_name
    )
    # Interleaved 1F1B applies at neither placement: one row says what it needs.
    assert [row.note for row in comparison.rows if row.name == "interleaved"] == [
        "n/a: needs chunks >= 2 with interleaved placement"
    ]
    for row in comparison.rows:
        if row.schedule is not None:
            assert_valid(row.schedule)
            assert row.schedule.instance.placement_name() == row.placement
    values = [row.value for row in comparison.rows if row.value is not None]
    assert values == sorted(values) and comparison.reference == values[0] and comparison.rows[0].gap == 0
    assert by_name[("dualpipe-v", "vshape")].value < min(by_name[(name, "vshape")].value for name in ("zb-v", "v-zb"))
    assert by_name[("dualpipe-v", "vshape")].value < by_name[("1f1b", "linear")].value
    assert by_name[(SOLVER_NAME, "vshape")].value <= by_name[("dualpipe-v", "vshape")].value
