"""Each runtime's best of a plan, and a plan held to a runtime, from the schedules the plan times."""

from __future__ import annotations

from pipesat.models.plan_result import Outcome
from pipesat.models.tolerance import fits
from pipesat.solver.evaluate.validator import validate
from pipesat.solver.plan.executors import LocalExecutor
from pipesat.solver.plan.runtimes import RUNTIMES
from pipesat.solver.plan.search import PlanOptions, plan
from tests.solver.plan.conftest import tiny


def test_a_plan_held_to_megatron_ranks_only_its_schedules_with_b_one_op() -> None:
    result = plan(tiny(training={"runtime": "megatron"}), LocalExecutor(2), PlanOptions(time_budget=20))
    ranked = [item for item in result.results if item.measure is not None]
    assert ranked and all(RUNTIMES["megatron"].runs(item.config, item.made_by) for item in ranked)
    assert {item.made_by for item in ranked} <= {"1f1b", "interleaved"}
    assert result.best_schedule is not None and validate(result.best_schedule) == []
    assert not result.best_schedule.split_backward  # Megatron's backward is one op: input and weight gradients
    assert "megatron" in result.best_runs_on and result.runtime == "megatron"


def test_each_runtime_best_is_one_it_runs_and_csv_runs_the_plans_best() -> None:
    result = plan(tiny(training={"zero": [0, 3]}), LocalExecutor(2), PlanOptions(time_budget=20))
    assert result.best is not None and result.best.measure is not None
    bests = {item.runtime: item for item in result.runtime_bests}
    assert set(bests) == set(RUNTIMES)
    for name, item in bests.items():
        assert RUNTIMES[name].runs(item.config, item.made_by), name
    # torch runs every schedule, CP-SAT's too: its best is the plan's; the others' are no faster.
    assert fits(bests["torch"].measure.iteration_ms, result.best.measure.iteration_ms)
    assert bests["megatron-zb"].measure.iteration_ms <= bests["megatron"].measure.iteration_ms
    for item in bests.values():
        assert item.measure.iteration_ms >= result.best.measure.iteration_ms * (1 - 1e-9)
    unassessed = {Outcome.PRUNED, Outcome.UNFINISHED}
    for item in bests.values():  # complete: no unassessed configuration's bound is below it
        beaten = [
            r
            for r in result.results
            if r.outcome in unassessed
            and r.measure is None
            and r.iteration_bound_ms is not None
            and r.iteration_bound_ms < item.measure.iteration_ms
        ]
        assert item.complete == (not beaten)
