"""The model's data: the values an optimum can take, checked on every order of small instances."""

from __future__ import annotations

import pytest

from pipesat.models import Instance
from pipesat.solver.cpsat.data import model_data
from tests.solver.brute_force import brute_force_values, two_chunk_instance

# Three devices, times in quarters: a max span's ticks are 1/24, its values thirds, halves and wholes of quarters.
QUARTERS = Instance.from_dict(
    {
        "num_devices": 3,
        "num_microbatches": 2,
        "forward_times": [1.25, 0.5, 1],
        "backward_times": [1.5, 2.25, 1],
        "weight_times": [0.75, 0.5, 0.25],
        "p2p_time": 0.25,
    }
)
# Every time a multiple of 1.5 (3 ticks of 1/2): so is every makespan.
THREE_HALVES = Instance.from_dict(
    {"num_devices": 2, "num_microbatches": 2, "forward_times": 1.5, "backward_times": 3, "weight_times": 1.5}
)
INSTANCES = [QUARTERS, THREE_HALVES, two_chunk_instance("vshape"), two_chunk_instance("interleaved")]


@pytest.mark.parametrize("objective", ["makespan", "span"])
@pytest.mark.parametrize("instance", INSTANCES, ids=["quarters", "three-halves", "vshape", "interleaved"])
def test_every_orders_least_value_is_one_an_optimum_can_take(instance: Instance, objective: str) -> None:
    split = instance.split_backward
    data = model_data(instance, objective=objective, split_backward=split)
    values = brute_force_values(instance, split, objective)
    assert len(values) > 1
    for value in values:
        ticks = round(value * data.ticks_per_unit)
        assert ticks == pytest.approx(value * data.ticks_per_unit)
        assert data.least_value_from(ticks) == ticks
        # Nothing below it rises past it: a bound proven below an order's value stays at most that value.
        assert data.least_value_from(ticks - 1) <= ticks


def test_a_proven_span_bound_rises_to_the_next_cycle_mean_and_a_makespan_bound_to_the_next_multiple() -> None:
    span = model_data(QUARTERS, objective="span", split_backward=True)
    assert span.ticks_per_unit == 24
    # Refuting 2.5 proves more than 2.5: the next value with k <= 3 devices on the cycle is 2.5 + 1/12.
    assert span.proven_bound(2.5 * 24 + 1) == pytest.approx(2.5 + 1 / 12)
    assert span.proven_bound(2.5 * 24 + 2.5) == pytest.approx(2.5 + 1 / 8)
    assert span.proven_bound(2.5 * 24) == pytest.approx(2.5)
    makespan = model_data(THREE_HALVES, objective="makespan", split_backward=True)
    assert makespan.ticks_per_unit == 2
    assert makespan.proven_bound(10) == 6 and makespan.proven_bound(12) == 6
    memory = model_data(THREE_HALVES, objective="makespan", split_backward=True, minimize_memory=True)
    assert memory.least_value_from(7) == 7
