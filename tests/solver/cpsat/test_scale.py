"""Tick scaling: exact scales for small fractions, the span's extra factor, floored irrational times."""

from __future__ import annotations

import math

import pytest

from pipesat.models import Instance, Objective
from pipesat.solver.cpsat.scale import ceil_ticks, choose_scale, scaled_instance, to_ticks


def _instance(**changes: object) -> Instance:
    data = {"num_devices": 3, "num_microbatches": 4, "forward_times": 1, "backward_times": 2}
    return Instance.from_dict({**data, **changes})


def test_decimal_times_scale_exactly() -> None:
    instance = _instance(forward_times=18.522, backward_times=[18.086, 18.1, 1 / 3], weight_times=9.337, p2p_time=0.601)
    scale = choose_scale(instance, Objective.MAKESPAN)
    assert scale.exact_time and scale.time == 3000
    ticks = scaled_instance(instance, scale)
    assert ticks.forward_times[0] == 55566 and ticks.p2p_time == 1803 and ticks.backward_times[2] == 1000


def test_span_scale_makes_cycle_means_whole_ticks() -> None:
    instance = _instance(forward_times=0.5)
    assert choose_scale(instance, Objective.MAKESPAN).time == 2
    span_scale = choose_scale(instance, Objective.SPAN)
    assert span_scale.exact_span and span_scale.time == 2 * math.lcm(1, 2, 3)
    assert choose_scale(_instance(num_devices=8, forward_times=0.001), Objective.SPAN).time == 1000 * 840
    assert not choose_scale(_instance(num_devices=16, forward_times=0.001), Objective.SPAN).exact_span


def test_irrational_times_are_floored_at_fine_resolution() -> None:
    instance = _instance(forward_times=math.pi, backward_times=math.e)
    scale = choose_scale(instance, Objective.MAKESPAN)
    assert not scale.exact_time
    ticks = scaled_instance(instance, scale)
    assert ticks.forward_times[0] == math.floor(math.pi * scale.time)
    assert ticks.forward_times[0] / scale.time == pytest.approx(math.pi, rel=1e-4)


def test_memory_of_three_chunks_scales_exactly() -> None:
    instance = _instance(chunks=3, placement="interleaved", memory_limit=2)
    scale = choose_scale(instance, Objective.MAKESPAN)
    assert scale.exact_memory and scale.memory == 3
    assert scaled_instance(instance, scale).activation_memory[0] == 1


def test_whole_ticks_round_float_noise_and_floor_the_rest() -> None:
    assert to_ticks(0.601, 3000) == 1803  # 0.601 * 3000 is 1802.9999999999998 in floats
    assert to_ticks(0.5004, 1000) == 500
    assert to_ticks(2 * math.pi, 100_000) == 628_318  # 628,318.53: floored, never rounded up
    assert ceil_ticks(7.000000000001) == 7
    assert ceil_ticks(7.25) == 8
