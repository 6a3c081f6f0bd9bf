"""Held memory counted in quanta (`solver.evaluate.memory_quanta`): never below the fluid bound, exact where a
limit holds a whole number of pieces less a fraction, and the bound it gives a device meets the brute-force optimum
where the limit holds one microbatch at a time."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipesat.models import Instance
from pipesat.solver.evaluate.bounds import lower_bound
from pipesat.solver.evaluate.memory_quanta import memory_slots, quanta, quanta_of, quantized_span
from tests.solver.brute_force import brute_force_optimum
from tests.strategies import PROPERTY_SETTINGS

HELD = st.lists(st.tuples(st.floats(0.1, 10), st.floats(0, 100)), min_size=1, max_size=6)


@settings(PROPERTY_SETTINGS, max_examples=200)
@given(HELD, st.floats(0.1, 40))
def test_quanta_are_never_below_the_fluid_bound(held: list[tuple[float, float]], capacity: float) -> None:
    fluid = sum(amount * duration for amount, duration in held) / capacity
    assert quantized_span(held, capacity) >= fluid * (1 - 1e-12)


@settings(PROPERTY_SETTINGS, max_examples=200)
@given(st.lists(st.floats(0.1, 10), min_size=1, max_size=8), st.floats(0.1, 40))
def test_what_fits_the_capacity_never_fills_more_quanta_than_it_has(amounts: list[float], capacity: float) -> None:
    # Any set of pieces that fits together counts at most the capacity's quanta, at every candidate.
    fitting, total = [], 0.0
    for amount in amounts:
        if total + amount <= capacity:
            fitting.append(amount)
            total += amount
    for quantum in quanta(amounts, capacity):
        assert sum(quanta_of(a, quantum) for a in fitting) <= memory_slots(capacity, quantum)


def test_a_limit_of_two_and_two_thirds_pieces_holds_two_at_a_time() -> None:
    held = [(3.0, 10.0)]  # 10 time units of a piece of 3 in total
    assert quantized_span(held, 8.0) == pytest.approx(10.0 / 2)  # the fluid bound says 30 / 8
    assert quantized_span(held, 9.0) == pytest.approx(10.0 / 3)
    assert quantized_span(held, 0.0) == 0.0


def test_a_first_device_that_holds_one_microbatch_at_a_time_runs_their_round_trips_one_after_another() -> None:
    # Device 0 holds each microbatch for its round trip, F0 F1 B1 B0 = 4, and a limit of 1.5 holds one:
    # 3 microbatches take 12. The fluid energy says 3 x 4 / 1.5 = 8.
    instance = Instance.from_dict(
        {
            "num_devices": 2,
            "num_microbatches": 3,
            "forward_times": [1, 1],
            "backward_times": [1, 1],
            "activation_memory": [1, 1],
            "memory_limit": 1.5,
            "p2p_time": 0,
        }
    )
    assert lower_bound(instance) == pytest.approx(12)
    assert brute_force_optimum(instance, False, "makespan") == pytest.approx(12)
