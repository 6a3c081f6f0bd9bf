"""Where a max-span solve's phases apply: phase 0 proves the bound from stage 0's device on coarse
times, and leaves fine-grained ones alone."""

from __future__ import annotations

import logging

import pytest

from pipesat.models import Tuning
from pipesat.solver.evaluate.bounds import first_device_instance, lower_bound
from pipesat.solver.evaluate.metrics import compute_metrics
from pipesat.solver.solve import solve
from tests.conftest import make_instance
from tests.strategies import assert_valid

FAST = {"time_limit": 10.0, "workers": 1, "seed": 0}


@pytest.mark.parametrize("deterministic", [False, True])
def test_a_split_span_solve_first_proves_the_bound_from_stage_zero_device(
    deterministic: bool, caplog: pytest.LogCaptureFixture
) -> None:
    # Linear p = 3, m = 6, F = B = W = 1 at half the 1F1B peak: the analytic bound is 26, the optimum
    # makespan of the instance with every W off device 0 free is 37, and so is the optimum max span.
    # (Phase 0 is for larger models; this one is small enough to check against a proof.)
    instance = make_instance(3, 6, weight_times=1, memory_limit="0.5x")
    caplog.set_level(logging.INFO, logger="pipesat")
    result = solve(instance, "span", deterministic=deterministic, tuning=Tuning(proof_small_ops=0), **FAST)
    assert "stage 0's device's span (proven in phase 0)" in "\n".join(caplog.messages)
    relaxed = solve(first_device_instance(instance), "makespan", **FAST)
    assert relaxed.status == "optimal" and relaxed.value == 37 > lower_bound(instance, "span")
    assert result.status == "optimal" and result.value == result.bound == 37
    assert compute_metrics(assert_valid(result.schedule)).max_span == 37
    assert_valid(relaxed.schedule)


def test_phase_zero_leaves_fine_grained_times_alone(caplog: pytest.LogCaptureFixture) -> None:
    # The same instance with times of 1.001: a thousand ticks a unit puts its model past
    # Tuning.first_device_most_ticks, where CP-SAT was measured never to prove phase 0's makespan.
    times = {"forward_times": 1.001, "backward_times": 1.001, "weight_times": 1.001}
    instance = make_instance(3, 6, memory_limit="0.5x", **times)
    caplog.set_level(logging.INFO, logger="pipesat")
    result = solve(instance, "span", tuning=Tuning(proof_small_ops=0), **FAST)
    log = "\n".join(caplog.messages)
    assert "span solve, phase 1" in log and "phase 0" not in log
    assert result.value == compute_metrics(assert_valid(result.schedule)).max_span
