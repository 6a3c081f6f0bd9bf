"""The offload-gated list scheduler (solver/heuristics/offload_gated.py): every schedule it gives is
valid under its limit, it finds one below the memory the order alone needs, and an offload solve
starts from it."""

from __future__ import annotations

import time

import pytest

from pipesat.models import Instance, Kind, Objective, OpKey
from pipesat.models.ops import dependency
from pipesat.solver.evaluate.bounds import least_offload_limits, minimum_memory_limits
from pipesat.solver.evaluate.metrics import compute_metrics
from pipesat.solver.heuristics.offload_gated import (
    VARIANTS,
    Variant,
    offload_gated_schedule,
    offload_gated_schedules,
)
from pipesat.solver.portfolio import Problem, offload_gated_candidate
from pipesat.solver.solve import solve
from tests.strategies import assert_valid

SHAPES = {
    "linear-split": {"num_devices": 3, "num_microbatches": 6, "weight_times": 1},
    "linear-fused": {"num_devices": 4, "num_microbatches": 8},
    "vshape-split": {"num_devices": 3, "num_microbatches": 6, "chunks": 2, "placement": "vshape", "weight_times": 1},
    "interleaved-uneven": {
        "num_devices": 2,
        "num_microbatches": 4,
        "chunks": 3,
        "activation_memory": [1, 2, 3, 1, 0.5, 2],
        "p2p_time": 0.25,
    },
}


def _limits(instance: Instance) -> dict[str, list[float]]:
    """The least limit offload allows, the least the order alone allows, and half of 1F1B's peak
    (never below the first)."""
    least, alone = least_offload_limits(instance), minimum_memory_limits(instance)
    half = [instance.one_f_one_b_peak() / 2] * instance.num_devices
    return {
        "least": least,
        "order alone": alone,
        "half 1f1b": [max(h, low) for h, low in zip(half, least, strict=True)],
    }


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("bandwidth", [3.0, 0.5])
@pytest.mark.parametrize("limit", ["least", "order alone", "half 1f1b"])
def test_every_variant_is_valid_under_its_limit_and_one_finds_a_schedule(
    shape: str, bandwidth: float, limit: str
) -> None:
    instance = Instance.from_dict({**SHAPES[shape], "host_link_bandwidth": bandwidth})
    limited = instance.with_limit(_limits(instance)[limit])
    found = []
    for variant in VARIANTS:
        schedule = offload_gated_schedule(limited, limited.split_backward, variant)
        if schedule is not None:
            assert_valid(schedule)  # the memory limit included
            found.append(schedule)
    assert found


@pytest.mark.parametrize("shape", ["linear-split", "vshape-split"])
def test_with_a_lookahead_of_one_a_reload_waits_for_the_op_right_before_its_b_to_start(shape: str) -> None:
    instance = Instance.from_dict({**SHAPES[shape], "host_link_bandwidth": 0.5})
    limited = instance.with_limit(_limits(instance)["order alone"])
    schedule = offload_gated_schedule(limited, True, Variant(eager_weights=False, in_flight=1.0, lookahead=1))
    assert schedule is not None
    assert_valid(schedule)
    starts = {op.key: op.start for op in schedule.ops}
    reloads = [op for op in schedule.transfers if op.kind == Kind.R]
    assert reloads
    for reload in reloads:
        before = dependency(OpKey(Kind.B, reload.stage, reload.microbatch), limited)
        assert before is not None
        assert starts[before] <= reload.start + 1e-9


def test_below_what_the_order_alone_needs_it_offloads() -> None:
    instance = Instance.from_dict({**SHAPES["vshape-split"], "host_link_bandwidth": 3.0})
    least, alone = least_offload_limits(instance), minimum_memory_limits(instance)
    assert all(low < needed for low, needed in zip(least, alone, strict=True))
    schedules = offload_gated_schedules(instance.with_limit(least), split=True)
    assert schedules
    for schedule in schedules:
        assert_valid(schedule)
        assert schedule.transfers


def test_without_a_host_link_there_is_none() -> None:
    instance = Instance.from_dict(SHAPES["linear-split"]).with_limit("0.5x")
    assert offload_gated_schedules(instance, split=True) == []


def test_an_offload_solve_ends_at_or_below_it() -> None:
    instance = Instance.from_dict({**SHAPES["vshape-split"], "host_link_bandwidth": 0.5}).with_limit("0.5x")
    problem = Problem(
        instance=instance,
        objective=Objective.MAKESPAN,
        minimize_memory=False,
        split=True,
        time_cap=None,
        symmetry_breaking=True,
        offload=True,
    )
    start = offload_gated_candidate(problem, time.monotonic())
    assert start is not None
    assert_valid(start.schedule)
    assert offload_gated_candidate(Problem(**{**problem.__dict__, "offload": False}), time.monotonic()) is None
    result = solve(instance, offload=True, time_limit=2, workers=2, seed=0)
    assert result.schedule is not None and result.value is not None
    assert_valid(result.schedule)
    assert result.value <= start.value + 1e-9
    assert compute_metrics(result.schedule).max_peak_memory <= instance.memory_limit[0] + 1e-9
