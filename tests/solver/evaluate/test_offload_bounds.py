"""The offload energy bound (`solver.evaluate.offload_bounds`) never exceeds a valid offloading schedule's
makespan: the one-at-a-time order with everything offloaded, every handwritten offload schedule that fits, and
CP-SAT's under the same limit."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipesat.models import Instance
from pipesat.models.tolerance import fits
from pipesat.solver.evaluate.bounds import least_offload_limits
from pipesat.solver.evaluate.metrics import compute_metrics
from pipesat.solver.evaluate.offload_bounds import offload_energy_bound
from pipesat.solver.evaluate.validator import validate
from pipesat.solver.heuristics import handwritten_schedules
from pipesat.solver.heuristics.offloaded import offloaded_one_at_a_time
from pipesat.solver.solve import solve
from tests.strategies import PROPERTY_SETTINGS, assert_valid, instance_dicts

LAYOUTS = (("linear", 1), ("vshape", 2), ("interleaved", 2))


@st.composite
def offload_instances(draw: st.DrawFn, max_devices: int = 3, max_microbatches: int = 4) -> Instance:
    """A random instance with a host link, an offload fraction, and a limit between the least one with offload
    and the 1F1B peak."""
    data: dict[str, Any] = draw(
        instance_dicts(max_devices=max_devices, max_microbatches=max_microbatches, layouts=LAYOUTS)
    )
    data["host_link_bandwidth"] = draw(st.sampled_from([0.25, 1.0, 4.0, 64.0]))
    data["offload_fraction"] = draw(st.sampled_from([0.25, 0.5, 1.0]))
    instance = Instance.from_dict(data)
    low = max(least_offload_limits(instance))
    high = max(low, instance.one_f_one_b_peak())
    return instance.with_changes(memory_limit=low + draw(st.floats(0, 1)) * (high - low))


def _at_or_above(bound: float, makespan: float) -> bool:
    return fits(bound, makespan)


@settings(PROPERTY_SETTINGS, max_examples=80)
@given(offload_instances())
def test_the_bound_never_exceeds_a_handwritten_offloading_schedule(instance: Instance) -> None:
    split = instance.split_backward
    bound = offload_energy_bound(instance, split)
    schedules = [offloaded_one_at_a_time(instance, split)]
    schedules += [schedule for _, schedule in handwritten_schedules(instance, offload=True) if not validate(schedule)]
    for schedule in schedules[:1]:
        assert_valid(schedule)
    for schedule in schedules:
        assert _at_or_above(bound, compute_metrics(schedule).makespan), (bound, schedule.name)


@settings(PROPERTY_SETTINGS, max_examples=8)
@given(offload_instances(max_devices=2, max_microbatches=3))
def test_the_bound_never_exceeds_cp_sats_offloading_schedule(instance: Instance) -> None:
    result = solve(instance, time_limit=2, workers=1, seed=0, offload=True)
    assert result.schedule is not None
    assert_valid(result.schedule)
    assert _at_or_above(
        offload_energy_bound(instance, instance.split_backward), compute_metrics(result.schedule).makespan
    )


def test_a_slow_link_saves_nothing_and_the_bound_is_the_energy_over_the_limit() -> None:
    # A transfer far longer than the round trip: no offload can save energy, so the bound is the one without.
    data = {"num_devices": 2, "num_microbatches": 4, "memory_limit": "0.5x", "host_link_bandwidth": 1e-3}
    instance = Instance.from_dict(data)
    plain = offload_energy_bound(instance.with_changes(host_link_bandwidth=None), instance.split_backward)
    assert plain > 0
    assert offload_energy_bound(instance, instance.split_backward) == pytest.approx(plain)


def test_a_fast_link_lowers_the_bound_and_none_without_a_limit() -> None:
    data = {"num_devices": 2, "num_microbatches": 4, "memory_limit": "0.5x"}
    slow = offload_energy_bound(Instance.from_dict({**data, "host_link_bandwidth": 1e-3}), False)
    fast = offload_energy_bound(Instance.from_dict({**data, "host_link_bandwidth": 1e3}), False)
    assert fast < slow
    assert offload_energy_bound(Instance.from_dict({**data, "memory_limit": None}), False) == 0.0
