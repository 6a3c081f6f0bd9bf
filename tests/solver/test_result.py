"""A solve's result: an honest gap for inexact times, and why every result ended."""

from __future__ import annotations

import math

from pipesat.models import Instance
from pipesat.models.solve_result import StopReason
from pipesat.solver.report.solve_text import outcome_text
from pipesat.solver.solve import solve
from tests.conftest import make_instance
from tests.strategies import assert_valid

FAST = {"time_limit": 10.0, "workers": 1, "seed": 0}


def test_inexact_times_report_a_small_honest_gap() -> None:
    # Irrational times are floored to ticks: the bound stays proven, the gap is never shown as zero.
    instance = Instance.from_dict(
        {
            "num_devices": 3,
            "num_microbatches": 5,
            "forward_times": [math.pi, 2.0, math.e],
            "backward_times": [3 * math.sqrt(2), 5, 4],
            "weight_times": [1 / 7, 2 / 3, math.sqrt(3)],
            "p2p_time": 0.1234567,
            "memory_limit": "1.5x",
        }
    )
    result = solve(instance, **FAST)
    assert_valid(result.schedule)
    assert result.bound <= result.value
    if result.status != "optimal":
        assert 0 < result.gap < 1e-4
        assert outcome_text(result) == f"feasible, gap {100 * result.gap:.3g}%"
    elif result.bound < result.value:
        # Optimal at the model's resolution: the order is proven optimal for the floored times.
        assert result.resolution is not None and 0 < result.gap < 1e-4


def test_every_result_says_why_it_ended(hard_instance: Instance, one_f_one_b_instance: Instance) -> None:
    met = solve(one_f_one_b_instance, **FAST)
    assert met.stopped_by == StopReason.BOUNDS and met.reason == "1f1b meets the lower bound" and not met.searched
    proven = solve(make_instance(3, 4, weight_times=1, memory_limit="0.5x"), **FAST)
    assert proven.status == "optimal" and proven.stopped_by == StopReason.PROOF and proven.reason == "proven by CP-SAT"
    too_small = solve(make_instance(2, 4, memory_limit=0.5), **FAST)
    assert too_small.status == "infeasible" and too_small.stopped_by == StopReason.BOUNDS
