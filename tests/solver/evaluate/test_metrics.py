"""Metrics: hand-computed makespan, spans, busy time, bubble rates, memory (split and fused), bounds."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
from hypothesis import given

from pipesat.models import Instance, Schedule
from pipesat.solver.evaluate.metrics import bubble_rate, compute_metrics, memory_profiles
from pipesat.solver.evaluate.simulator import simulate
from pipesat.solver.heuristics import run_heuristic
from tests.strategies import PROPERTY_SETTINGS, assert_valid, instances, instances_with_orders

# p=2, m=2, F=1, B=1, W=(0.5, 5), p2p 0.5, M_B=2, M_W=1. The slow W of stage 1 makes device 1 end last.
SLOW_W = Instance.from_dict(
    {
        "num_devices": 2,
        "num_microbatches": 2,
        "forward_times": 1,
        "backward_times": 1,
        "weight_times": [0.5, 5],
        "p2p_time": 0.5,
        "activation_memory": 2,
        "weight_memory": 1,
    }
)
ALL_F_THEN_B = [("F", 0), ("F", 1), ("B", 0), ("B", 1)]


def _orders(instance: Instance, pattern: list[tuple[str, int]]) -> list[list[tuple[str, int, int]]]:
    return [[(kind, device, j) for kind, j in pattern] for device in range(instance.num_devices)]


def test_one_f_one_b_by_hand(one_f_one_b_instance: Instance) -> None:
    metrics = compute_metrics(assert_valid(run_heuristic("1f1b", one_f_one_b_instance)))
    assert metrics.makespan == 33  # (m + p - 1)(F + B)
    assert Fraction(metrics.bubble_rate).limit_denominator(100) == Fraction(3, 11)
    assert metrics.busy == (24, 24, 24, 24)
    # Device d starts its first F at d and ends its last B at 33 - 2d.
    assert metrics.spans == (33, 30, 27, 24)
    assert metrics.max_span == 33
    assert metrics.span_bubble_rate == metrics.bubble_rate
    assert metrics.peak_memory == (4, 3, 2, 1)
    assert metrics.max_peak_memory == 4 == one_f_one_b_instance.one_f_one_b_peak()
    assert metrics.zero_bubble_bound == 24


def test_split_backward_by_hand() -> None:
    # Device 0: F 0-1, 1-2; B 5-6, 6-7; W 7-7.5, 7.5-8.   Device 1: F 1.5-2.5, 2.5-3.5; B 3.5-4.5, 4.5-5.5;
    # W 5.5-10.5, 10.5-15.5.
    pattern = [*ALL_F_THEN_B, ("W", 0), ("W", 1)]
    metrics = compute_metrics(assert_valid(simulate(SLOW_W, _orders(SLOW_W, pattern))))
    assert metrics.makespan == 15.5
    assert metrics.spans == (8, 14)
    assert metrics.max_span == 14
    assert metrics.busy == (5, 14)
    assert metrics.bubble_rate == pytest.approx(1 - 19 / 31)
    assert metrics.span_bubble_rate == pytest.approx(1 - 19 / 28)
    assert metrics.zero_bubble_bound == 14
    assert metrics.peak_memory == (4, 4)
    assert metrics.objective("makespan") == 15.5 and metrics.objective("span") == 14
    assert metrics.bubble_rate_for("span") == metrics.span_bubble_rate


def test_split_memory_profile_by_hand() -> None:
    # F allocates M_B=2 at its start, B frees M_B - M_W = 1 at its end, W frees M_W = 1 at its end.
    pattern = [*ALL_F_THEN_B, ("W", 0), ("W", 1)]
    device0, device1 = memory_profiles(assert_valid(simulate(SLOW_W, _orders(SLOW_W, pattern))))
    assert device0.times.tolist() == [0, 1, 6, 7, 7.5, 8]
    assert device0.memory.tolist() == [2, 4, 3, 2, 1, 0]
    assert device1.times.tolist() == [1.5, 2.5, 4.5, 5.5, 10.5, 15.5]
    assert device1.memory.tolist() == [2, 4, 3, 2, 1, 0]


def test_fused_backward_frees_all_activation_memory_at_its_end() -> None:
    # Device 0: F 0-1, 1-2, B (1.5 long) 10-11.5, 16-17.5.  Device 1: F 1.5-2.5, 2.5-3.5, B (6 long) 3.5-9.5, 9.5-15.5.
    schedule = assert_valid(simulate(SLOW_W, _orders(SLOW_W, ALL_F_THEN_B)))
    assert not schedule.split_backward
    device0, device1 = memory_profiles(schedule)
    assert device0.times.tolist() == [0, 1, 11.5, 17.5]
    assert device0.memory.tolist() == [2, 4, 2, 0]
    assert device1.times.tolist() == [1.5, 2.5, 9.5, 15.5]
    metrics = compute_metrics(schedule)
    assert metrics.makespan == 17.5 and metrics.busy == (5, 14)


def test_a_free_and_an_allocation_at_the_same_time_do_not_add_up() -> None:
    # Device 1 runs F0 B0 F1: B(1, 0) ends at 3.5 exactly when F(1, 1) starts, so it holds at most 3, not 4.
    orders = _orders(SLOW_W, [*ALL_F_THEN_B, ("W", 0), ("W", 1)])
    orders[1] = [("F", 1, 0), ("B", 1, 0), ("F", 1, 1), ("B", 1, 1), ("W", 1, 0), ("W", 1, 1)]
    schedule = assert_valid(simulate(SLOW_W, orders))
    starts = {op.key: op.start for op in schedule.ops}
    ends = {op.key: op.end for op in schedule.ops}
    assert ends[("B", 1, 0)] == starts[("F", 1, 1)] == 3.5
    assert compute_metrics(schedule).peak_memory[1] == 3


def test_empty_schedule_has_zero_metrics() -> None:
    metrics = compute_metrics(Schedule(SLOW_W, ()))
    assert metrics.makespan == 0 and metrics.spans == (0, 0) and metrics.peak_memory == (0, 0)
    assert metrics.bubble_rate == 0


def test_bubble_rate() -> None:
    assert bubble_rate(24 * 4, 4, 33) == pytest.approx(3 / 11)
    assert bubble_rate(10, 2, 5) == 0
    assert bubble_rate(0, 2, 0) == 0


def test_to_dict_lists_per_device_values(one_f_one_b_instance: Instance) -> None:
    data = compute_metrics(assert_valid(run_heuristic("1f1b", one_f_one_b_instance))).to_dict()
    assert data["makespan"] == 33 and data["peak_memory"] == [4, 3, 2, 1]
    assert set(data) >= {"spans", "max_span", "busy", "bubble_rate", "span_bubble_rate", "zero_bubble_bound"}


@PROPERTY_SETTINGS
@given(instances_with_orders())
def test_metrics_of_random_schedules_are_consistent(case) -> None:
    instance, orders = case
    schedule = assert_valid(simulate(instance, orders))
    metrics = compute_metrics(schedule)
    for device in range(instance.num_devices):
        ops = [op for op in schedule.ops if op.device == device]
        assert metrics.busy[device] == pytest.approx(sum(op.end - op.start for op in ops))
        assert metrics.spans[device] == pytest.approx(max(op.end for op in ops) - min(op.start for op in ops))
    assert metrics.zero_bubble_bound == max(metrics.busy) <= metrics.max_span <= metrics.makespan
    assert 0 <= metrics.bubble_rate < 1 and 0 <= metrics.span_bubble_rate <= metrics.bubble_rate
    for device, profile in enumerate(memory_profiles(schedule)):
        assert profile.memory[-1] == pytest.approx(0)  # a complete schedule frees everything it allocated
        assert profile.peak == metrics.peak_memory[device]
        assert profile.peak >= max(instance.activation_memory[s] for s in instance.stages_of(device))


@PROPERTY_SETTINGS
@given(instances(layouts=(("linear", 1),)))
def test_one_f_one_b_peak_matches_the_closed_form(instance: Instance) -> None:
    # Device d holds min(p - d, m) microbatches (docs/reference.md, closed forms).
    metrics = compute_metrics(assert_valid(run_heuristic("1f1b", instance)))
    p, m = instance.num_devices, instance.num_microbatches
    assert metrics.peak_memory == tuple(min(p - d, m) * instance.activation_memory[d] for d in range(p))
    assert metrics.max_peak_memory == instance.one_f_one_b_peak()


def test_relative_gap_ignores_float_noise_but_not_real_differences():
    from pipesat.solver.evaluate.metrics import relative_gap

    assert relative_gap(40.2, 40.2 - 1e-14) == 0.0
    assert relative_gap(0.1 + 0.2, 0.3) == 0.0
    # How much slower than the reference: 110 against an optimum of 100 is 10%.
    assert relative_gap(110.0, 100.0) == 0.1
    assert relative_gap(100.0, 100.0 - 1e-6) > 0.0
    assert relative_gap(1.0, 0.0) == math.inf and relative_gap(0.0, 0.0) == 0.0
