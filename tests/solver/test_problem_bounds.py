"""What the analytic bounds say before a search: a memory limit below the smallest feasible one is
infeasible without a search, and the result names that smallest limit."""

from __future__ import annotations

from pipesat.models import Instance, Objective
from pipesat.models.solve_result import Infeasibility, InfeasibleReason
from pipesat.solver.evaluate.bounds import minimum_memory_limit
from pipesat.solver.report.solve_text import outcome_text
from pipesat.solver.solve import solve
from tests.strategies import assert_valid

FAST = {"time_limit": 10.0, "workers": 1, "seed": 0}


def test_infeasible_limit_names_the_smallest_feasible_limit() -> None:
    instance = Instance.from_dict(
        {"num_devices": 3, "num_microbatches": 4, "chunks": 2, "placement": "vshape", "memory_limit": 0.9}
    )
    result = solve(instance, **FAST)
    assert result.status == "infeasible" and result.schedule is None
    assert result.smallest_feasible_limit == minimum_memory_limit(instance) == 1.0
    assert "smallest feasible limit is 1" in outcome_text(result)
    assert result.infeasibility == Infeasibility(InfeasibleReason.MEMORY_LIMIT, Objective.MAKESPAN, 0.9, 1.0)
    at_that_limit = solve(instance.with_changes(memory_limit=result.smallest_feasible_limit), **FAST)
    assert at_that_limit.status in ("optimal", "feasible")
    assert_valid(at_that_limit.schedule)
