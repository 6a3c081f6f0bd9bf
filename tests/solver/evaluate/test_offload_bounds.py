"""The offload bounds (`solver.evaluate.offload_bounds`: the energy less the link's savings, and the chain after
a device's last B) never exceed a valid offloading schedule's makespan: the one-at-a-time order with everything
offloaded, every handwritten offload schedule that fits, the offload-gated starts, CP-SAT's under the same
limit, and the brute-force optimum without offload (offloading nothing is one of the choices)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipesat.models import Instance
from pipesat.models.tolerance import fits
from pipesat.solver.evaluate.bounds import least_offload_limits
from pipesat.solver.evaluate.metrics import compute_metrics
from pipesat.solver.evaluate.offload_bounds import last_backward_bound, offload_energy_bound
from pipesat.solver.evaluate.validator import validate
from pipesat.solver.heuristics import handwritten_schedules
from pipesat.solver.heuristics.offload_gated import offload_gated_schedules
from pipesat.solver.heuristics.offloaded import offloaded_one_at_a_time
from pipesat.solver.solve import solve
from tests.solver.brute_force import brute_force_values
from tests.strategies import PROPERTY_SETTINGS, assert_valid, instance_dicts

LAYOUTS = (("linear", 1), ("vshape", 2), ("interleaved", 2))


@st.composite
def offload_instances(
    draw: st.DrawFn, max_devices: int = 3, max_microbatches: int = 4, layouts: tuple[tuple[str, int], ...] = LAYOUTS
) -> Instance:
    """A random instance with a host link, an offload fraction, and a limit between the least one with offload
    and the 1F1B peak."""
    data: dict[str, Any] = draw(
        instance_dicts(max_devices=max_devices, max_microbatches=max_microbatches, layouts=layouts)
    )
    data["host_link_bandwidth"] = draw(st.sampled_from([0.25, 1.0, 4.0, 64.0]))
    data["offload_fraction"] = draw(st.sampled_from([0.25, 0.5, 1.0]))
    instance = Instance.from_dict(data)
    low = max(least_offload_limits(instance))
    high = max(low, instance.one_f_one_b_peak())
    return instance.with_changes(memory_limit=low + draw(st.floats(0, 1)) * (high - low))


def _at_or_above(bound: float, makespan: float) -> bool:
    return fits(bound, makespan)


def _bound(instance: Instance) -> float:
    split = instance.split_backward
    return max(offload_energy_bound(instance, split), last_backward_bound(instance, split))


@settings(PROPERTY_SETTINGS, max_examples=80)
@given(offload_instances())
def test_the_bounds_never_exceed_a_handwritten_or_offload_gated_schedule(instance: Instance) -> None:
    split = instance.split_backward
    bound = _bound(instance)
    schedules = [offloaded_one_at_a_time(instance, split), *offload_gated_schedules(instance, split)]
    for schedule in schedules:
        assert_valid(schedule)
    schedules += [schedule for _, schedule in handwritten_schedules(instance, offload=True) if not validate(schedule)]
    for schedule in schedules:
        assert _at_or_above(bound, compute_metrics(schedule).makespan), (bound, schedule.name)


@settings(PROPERTY_SETTINGS, max_examples=8)
@given(offload_instances(max_devices=2, max_microbatches=3))
def test_the_bound_never_exceeds_cp_sats_offloading_schedule(instance: Instance) -> None:
    result = solve(instance, time_limit=2, workers=1, seed=0, offload=True)
    assert result.schedule is not None
    assert_valid(result.schedule)
    assert _at_or_above(_bound(instance), compute_metrics(result.schedule).makespan)


@settings(PROPERTY_SETTINGS, max_examples=25)
@given(offload_instances(max_devices=2, max_microbatches=2, layouts=(("linear", 1),)))
def test_the_bounds_never_exceed_the_brute_force_optimum_without_offload(instance: Instance) -> None:
    values = brute_force_values(instance, instance.split_backward, "makespan")
    if values:  # an order alone fits the limit
        assert _at_or_above(_bound(instance), min(values))


def test_a_last_device_that_holds_one_microbatch_at_a_time_idles_through_the_chain_and_the_bound_says_so() -> None:
    # The last of 3 devices holds 3 of a limit of 5 from its F to its B and 2 until its W: never two
    # microbatches at once, so no W waits past the last B to fill the 3 Bs and the W of the chain down.
    data = {
        "num_devices": 3,
        "num_microbatches": 4,
        "forward_times": [1, 1, 1],
        "backward_times": [1, 1, 1],
        "weight_times": [1, 1, 1],
        "activation_memory": [1, 1, 3],
        "weight_memory": [1, 1, 2],
        "memory_limit": [5, 5, 4],
        "host_link_bandwidth": 1,
    }
    instance = Instance.from_dict(data)
    # Its first F starts at 2; it runs 4 x 3; its last B ends at 2 + 12 - 1 (its W is left) = 13, then
    # B1, B0 and W0 take 3 more (one W of 1 overlaps them): 16.
    assert last_backward_bound(instance, True) == pytest.approx(16)
    schedules = offload_gated_schedules(instance, True)
    assert schedules
    for schedule in schedules:
        assert_valid(schedule)
    assert min(compute_metrics(schedule).makespan for schedule in schedules) == pytest.approx(16)
    # With room for a second microbatch's M_W beside an M_B (4 + 1 W of 1), one more W fills the chain.
    assert last_backward_bound(instance.with_limit([5, 5, 5]), True) == pytest.approx(15)


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


def test_a_device_that_holds_one_microbatch_at_a_time_offloads_each_and_holds_it_for_f_two_transfers_and_b() -> None:
    # Device 0's limit of 1.5 holds one microbatch at a time. Offloaded, each is held for F + 2 x 0.25 + B = 2.5
    # (its round trip, F0 F1 B1 B0, is 4), so 6 of them take 15, and CP-SAT proves 15 optimal; counted as a
    # fluid, the same energy over the limit says 10.
    data = {
        "num_devices": 2,
        "num_microbatches": 6,
        "forward_times": [1, 1],
        "backward_times": [1, 1],
        "activation_memory": [1, 1],
        "memory_limit": 1.5,
        "p2p_time": 0,
        "host_link_bandwidth": 4,
    }
    instance = Instance.from_dict(data)
    assert offload_energy_bound(instance, False) == pytest.approx(15)
    result = solve(instance, offload=True, time_limit=10, workers=2, seed=0)
    assert result.schedule is not None
    assert_valid(result.schedule)
    assert compute_metrics(result.schedule).makespan == pytest.approx(15)
