"""The validator: a readable message for each rule, and every mutated random schedule is caught."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipesat.models import Instance, Op, OpKey, Pair, Schedule, ScheduleError
from pipesat.solver.evaluate.metrics import compute_metrics
from pipesat.solver.evaluate.simulator import simulate
from pipesat.solver.evaluate.validator import Rule, ensure_valid, validate
from pipesat.solver.heuristics import run_heuristic
from tests.strategies import PROPERTY_SETTINGS, assert_valid, instances_with_orders

TWO_DEVICES = Instance.from_dict(
    {
        "num_devices": 2,
        "num_microbatches": 1,
        "forward_times": 1,
        "backward_times": 2,
        "weight_times": 1,
        "p2p_time": 0.5,
    }
)


def _valid_two_device_schedule() -> Schedule:
    """F(0) 0-1, F(1) 1.5-2.5, B(1) 2.5-4.5, W(1) 4.5-5.5, B(0) 5-7, W(0) 7-8."""
    orders = [[("F", 0, 0), ("B", 0, 0), ("W", 0, 0)], [("F", 1, 0), ("B", 1, 0), ("W", 1, 0)]]
    return assert_valid(simulate(TWO_DEVICES, orders))


def _replace(schedule: Schedule, key: tuple[str, int, int], **changes: float | int) -> Schedule:
    ops = tuple(op._replace(**changes) if op.key == key else op for op in schedule.ops)
    return dataclasses.replace(schedule, ops=ops)


def _messages(schedule: Schedule) -> list[tuple[Rule, str]]:
    return [(v.rule, str(v)) for v in validate(schedule)]


def test_missing() -> None:
    schedule = _valid_two_device_schedule()
    ops = tuple(op for op in schedule.ops if op.key != ("B", 1, 0))
    # Without its B, the W ops still make the schedule split; only the missing op is reported.
    assert _messages(dataclasses.replace(schedule, ops=ops)) == [(Rule.MISSING, "B(stage 1, mb 0) is missing")]


def test_repeated() -> None:
    schedule = _valid_two_device_schedule()
    ops = (*schedule.ops, Op("W", 0, 0, 0, 8.0, 9.0))
    assert _messages(dataclasses.replace(schedule, ops=ops)) == [
        (Rule.REPEATED, "W(stage 0, mb 0) appears more than once")
    ]


def test_unknown() -> None:
    schedule = _valid_two_device_schedule()
    ops = (*schedule.ops, Op("F", 2, 0, 1, 9.0, 10.0), Op("F", 0, 3, 0, 9.0, 10.0))
    assert _messages(dataclasses.replace(schedule, ops=ops)) == [
        (Rule.UNKNOWN, "F(stage 2, mb 0) does not exist: stages are 0..1, microbatches 0..0"),
        (Rule.UNKNOWN, "F(stage 0, mb 3) does not exist: stages are 0..1, microbatches 0..0"),
    ]


def test_an_op_off_its_microbatchs_route_is_unknown() -> None:
    # Bidirectional: microbatch 1 runs down the replica (stages 2, 3), never stage 0.
    instance = Instance.from_dict({"num_devices": 2, "num_microbatches": 2, "chunks": 2, "placement": "bidirectional"})
    schedule = assert_valid(
        simulate(
            instance,
            [
                [("F", 0, 0), ("F", 3, 1), ("B", 3, 1), ("B", 0, 0)],
                [("F", 2, 1), ("F", 1, 0), ("B", 1, 0), ("B", 2, 1)],
            ],
        )
    )
    ops = (*schedule.ops, Op("F", 0, 1, 0, 20.0, 21.0))
    assert _messages(dataclasses.replace(schedule, ops=ops)) == [
        (
            Rule.UNKNOWN,
            "F(stage 0, mb 1) does not exist: microbatch 1 runs stages 2..3 (one copy of a bidirectional placement)",
        )
    ]


def test_w_op_without_weight_times_is_unknown() -> None:
    instance = TWO_DEVICES.with_changes(weight_times=None, weight_memory=0)
    schedule = assert_valid(simulate(instance, [[("F", 0, 0), ("B", 0, 0)], [("F", 1, 0), ("B", 1, 0)]]))
    ops = (*schedule.ops, Op("W", 0, 0, 0, 20.0, 21.0))
    assert _messages(dataclasses.replace(schedule, ops=ops)) == [
        (Rule.UNKNOWN, "W(stage 0, mb 0) is a W op but the instance has no weight_times")
    ]


def test_placement() -> None:
    schedule = _replace(_valid_two_device_schedule(), ("W", 1, 0), device=0, start=8.0, end=9.0)
    assert _messages(schedule) == [
        (Rule.PLACEMENT, "device 0: W(stage 1, mb 0) runs here but stage 1 is placed on device 1"),
    ]


def test_duration() -> None:
    schedule = _replace(_valid_two_device_schedule(), ("W", 0, 0), end=8.5)
    assert _messages(schedule) == [(Rule.DURATION, "device 0: W(stage 0, mb 0) lasts 1.5 (from 7 to 8.5), expected 1")]


def test_fused_backward_lasts_b_plus_w() -> None:
    schedule = assert_valid(simulate(TWO_DEVICES, [[("F", 0, 0), ("B", 0, 0)], [("F", 1, 0), ("B", 1, 0)]]))
    shortened = _replace(schedule, ("B", 0, 0), end=schedule.ops[-1].start + 2)
    assert [rule for rule, _ in _messages(shortened)] == ["duration"]
    assert "expected 3" in _messages(shortened)[0][1]


def test_dependency_across_devices_names_the_p2p() -> None:
    schedule = _replace(_valid_two_device_schedule(), ("F", 1, 0), start=1.2, end=2.2)
    assert _messages(schedule) == [
        (Rule.DEPENDENCY, "device 1: F(stage 1, mb 0) starts at 1.2 before F(stage 0, mb 0) ends at 1 + p2p 0.5"),
    ]


def test_dependency_on_the_same_device_has_no_p2p() -> None:
    schedule = _replace(_valid_two_device_schedule(), ("W", 1, 0), start=4.0, end=5.0)
    rules = _messages(schedule)
    assert (Rule.DEPENDENCY, "device 1: W(stage 1, mb 0) starts at 4 before B(stage 1, mb 0) ends at 4.5") in rules


def test_dependency_message_of_the_issue() -> None:
    instance = Instance.from_dict({"num_devices": 3, "num_microbatches": 6, "p2p_time": 0.5})
    ops = (Op("F", 1, 5, 1, 9.6, 10.6), Op("F", 2, 5, 2, 11.0, 12.0))
    messages = _messages(Schedule(instance, ops))
    assert (
        Rule.DEPENDENCY,
        "device 2: F(stage 2, mb 5) starts at 11 before F(stage 1, mb 5) ends at 10.6 + p2p 0.5",
    ) in messages


def test_overlap() -> None:
    schedule = _replace(_valid_two_device_schedule(), ("W", 0, 0), start=6.5, end=7.5)
    assert _messages(schedule) == [
        (Rule.DEPENDENCY, "device 0: W(stage 0, mb 0) starts at 6.5 before B(stage 0, mb 0) ends at 7"),
        (Rule.OVERLAP, "device 0: W(stage 0, mb 0) starts at 6.5 while B(stage 0, mb 0) runs until 7"),
    ]


def test_overlap_without_dependency() -> None:
    instance = Instance.from_dict({"num_devices": 1, "num_microbatches": 2})
    schedule = assert_valid(simulate(instance, [[("F", 0, 0), ("F", 0, 1), ("B", 0, 0), ("B", 0, 1)]]))
    moved = _replace(schedule, ("F", 0, 1), start=0.5, end=1.5)
    assert _messages(moved) == [
        (Rule.OVERLAP, "device 0: F(stage 0, mb 1) starts at 0.5 while F(stage 0, mb 0) runs until 1")
    ]


def test_memory_limit(one_f_one_b_instance: Instance) -> None:
    # 1F1B holds (4, 3, 2, 1) microbatches; device 0 reaches 4 when F(0, 3) starts at 3.
    limited = one_f_one_b_instance.with_changes(memory_limit=3)
    schedule = run_heuristic("1f1b", limited)
    assert _messages(schedule) == [(Rule.MEMORY, "device 0: holds 4 of activation memory at time 3, over the limit 3")]
    assert validate(run_heuristic("1f1b", one_f_one_b_instance.with_changes(memory_limit="1x"))) == []


def test_a_peak_over_the_limit_by_float_noise_fits(one_f_one_b_instance: Instance) -> None:
    # The peak is 4: a limit below it by float noise (`models.tolerance`) still holds it, a real difference does not.
    assert validate(run_heuristic("1f1b", one_f_one_b_instance.with_changes(memory_limit=4 - 1e-12))) == []
    assert [
        v.rule for v in validate(run_heuristic("1f1b", one_f_one_b_instance.with_changes(memory_limit=4 - 1e-6)))
    ] == ["memory"]


def test_memory_is_not_checked_when_ops_are_missing(one_f_one_b_instance: Instance) -> None:
    schedule = run_heuristic("1f1b", one_f_one_b_instance.with_changes(memory_limit=1))
    ops = tuple(op for op in schedule.ops if op.key != ("B", 0, 0))
    assert [v.rule for v in validate(dataclasses.replace(schedule, ops=ops))] == ["missing"]


@pytest.mark.parametrize("device", [7, -1])
def test_op_on_a_device_that_does_not_exist_is_a_placement_violation(
    one_f_one_b_instance: Instance, device: int
) -> None:
    schedule = run_heuristic("1f1b", one_f_one_b_instance.with_changes(memory_limit=1))
    moved = _replace(schedule, ("F", 1, 1), device=device)
    assert _messages(moved) == [
        (Rule.PLACEMENT, f"device {device}: F(stage 1, mb 1) runs here but stage 1 is placed on device 1"),
    ]


def test_every_violation_is_returned() -> None:
    schedule = _replace(_valid_two_device_schedule(), ("F", 1, 0), device=0, start=0.0, end=3.0)
    rules = [rule for rule, _ in _messages(schedule)]
    assert all(type(rule) is Rule for rule in rules)
    assert rules == [Rule.PLACEMENT, Rule.DURATION, Rule.DEPENDENCY, Rule.DEPENDENCY, Rule.OVERLAP]


def test_rounding_noise_is_tolerated() -> None:
    schedule = _valid_two_device_schedule()
    noisy = dataclasses.replace(
        schedule, ops=tuple(op._replace(start=op.start - 1e-12) if op.start > 0 else op for op in schedule.ops)
    )
    assert validate(noisy) == []


def test_a_start_before_time_zero_is_reported() -> None:
    schedule = _valid_two_device_schedule()
    shifted = dataclasses.replace(
        schedule, ops=tuple(op._replace(start=op.start - 1, end=op.end - 1) for op in schedule.ops)
    )
    assert _messages(shifted) == [(Rule.START, "device 0: F(stage 0, mb 0) starts at -1, before time 0")]


def _with_far_last_w(schedule: Schedule, at: float) -> Schedule:
    """The schedule with its last W (nothing waits for it) moved to time `at`: still valid."""
    last_w = max((op for op in schedule.ops if op.kind == "W"), key=lambda op: op.end)
    return _replace(schedule, last_w.key, start=at, end=at + (last_w.end - last_w.start))


@pytest.mark.parametrize("far", [1e6, 1e12, 1e15])
def test_an_op_far_away_does_not_widen_the_tolerance_of_the_others(far: float) -> None:
    schedule = _with_far_last_w(_valid_two_device_schedule(), far)
    assert validate(schedule) == []
    # F(stage 1) 0.75 into B(stage 1)... each of these alone must still be caught.
    overlapping = _replace(schedule, ("B", 1, 0), start=2.5 - 0.75, end=4.5 - 0.75)
    assert Rule.OVERLAP in {v.rule for v in validate(overlapping)}
    half_f = _replace(schedule, ("F", 0, 0), end=0.5)
    assert [v.rule for v in validate(half_f)] == ["duration"]
    no_p2p = _replace(schedule, ("F", 1, 0), start=1.0, end=2.0)
    assert [v.rule for v in validate(no_p2p)] == ["dependency"]


def test_a_schedule_shifted_far_from_zero_is_checked_as_tightly() -> None:
    schedule = _valid_two_device_schedule()
    far = 1e12
    shifted = dataclasses.replace(
        schedule, ops=tuple(op._replace(start=op.start + far, end=op.end + far) for op in schedule.ops)
    )
    assert validate(shifted) == []
    overlapping = _replace(shifted, ("W", 1, 0), start=far + 4.5 - 0.75, end=far + 5.5 - 0.75)
    assert {Rule.DEPENDENCY, Rule.OVERLAP} <= {v.rule for v in validate(overlapping)}


def test_ensure_valid() -> None:
    schedule = _valid_two_device_schedule()
    assert ensure_valid(schedule) is schedule
    # Without W ops the schedule is fused, so 4 ops are missing; the message shows 3 of them.
    broken = dataclasses.replace(schedule, ops=(), name="empty")
    with pytest.raises(
        ScheduleError, match=r"^invalid schedule empty: F\(stage 0, mb 0\) is missing; .* \(and 1 more\)$"
    ):
        ensure_valid(broken)


@PROPERTY_SETTINGS
@given(instances_with_orders(), st.randoms(use_true_random=False), st.floats(0.01, 10))
def test_moving_one_start_earlier_is_reported(case, rng, shift: float) -> None:
    instance, orders = case
    schedule = assert_valid(simulate(instance, orders))
    op = rng.choice(schedule.ops)
    moved = _replace(schedule, op.key, start=op.start - shift)
    rules = {v.rule for v in validate(moved)}
    assert Rule.DURATION in rules
    assert rules <= {Rule.START, Rule.DURATION, Rule.DEPENDENCY, Rule.OVERLAP}


@PROPERTY_SETTINGS
@given(instances_with_orders(), st.randoms(use_true_random=False), st.floats(0.01, 0.99))
def test_moving_one_op_earlier_breaks_a_dependency_or_overlaps(case, rng, fraction: float) -> None:
    # An as-soon-as-possible op that starts after 0 waits for its device or its dependency, so moving
    # it earlier by less than any op's duration must break one of those.
    instance, orders = case
    schedule = assert_valid(simulate(instance, orders))
    shift = fraction * min(op.end - op.start for op in schedule.ops)
    op = rng.choice([op for op in schedule.ops if op.start > 0])
    moved = _replace(schedule, op.key, start=op.start - shift, end=op.end - shift)
    rules = {v.rule for v in validate(moved)}
    assert rules and rules <= {Rule.DEPENDENCY, Rule.OVERLAP}


@PROPERTY_SETTINGS
@given(instances_with_orders(), st.floats(0.5, 0.99))
def test_memory_limit_below_the_peak_is_reported(case, fraction: float) -> None:
    instance, orders = case
    peaks = compute_metrics(assert_valid(simulate(instance, orders))).peak_memory
    at_peak = simulate(instance.with_changes(memory_limit=max(peaks)), orders)
    assert validate(at_peak) == []
    limit = fraction * max(peaks)
    below = simulate(instance.with_changes(memory_limit=limit), orders)
    reported = [v for v in validate(below) if v.rule == Rule.MEMORY]
    assert [int(v.message.split(":")[0].removeprefix("device ")) for v in reported] == [
        d for d, peak in enumerate(peaks) if peak > limit
    ]


def test_memory_limit_in_the_instance_units(one_f_one_b_instance: Instance) -> None:
    in_units = one_f_one_b_instance.with_changes(
        memory_limit=3072, activation_memory=1024, time_unit="ms", memory_unit="MiB"
    )
    schedule = run_heuristic("1f1b", in_units)
    assert _messages(schedule) == [
        (Rule.MEMORY, "device 0: holds 4 GiB of activation memory at time 3 ms, over the limit 3 GiB")
    ]


ONE_DEVICE_MOE = Instance.from_dict(
    {
        "num_devices": 1,
        "num_microbatches": 2,
        "forward_times": 2,
        "backward_times": 2,
        "weight_times": 1,
        "forward_comm_times": 0.5,
        "backward_comm_times": 1,
    }
)
"""One device, F = 2, B = 2, W = 1, all-to-alls 0.5 (F) and 1 (B): F with B lasts 1.5 + 1 = 2.5, with
its W inside 1.5 + 2 = 3.5."""


def _paired(with_weight: bool) -> list[Op]:
    """F0, then F1 with B0 (and W0 inside or after), then B1, W1."""
    end = 3.5 if with_weight else 2.5
    ops = [Op("F", 0, 0, 0, 0, 2), Op("F", 0, 1, 0, 2, 2 + end), Op("B", 0, 0, 0, 2, 2 + end)]
    t = 2 + end
    if with_weight:
        ops.append(Op("W", 0, 0, 0, 2, t))
    else:
        ops.append(Op("W", 0, 0, 0, t, t + 1))
        t += 1
    return [*ops, Op("B", 0, 1, 0, t, t + 2), Op("W", 0, 1, 0, t + 2, t + 3)]


@pytest.mark.parametrize("with_weight", [False, True])
def test_an_overlapped_pair_is_valid(with_weight: bool) -> None:
    schedule = assert_valid(Schedule(ONE_DEVICE_MOE, tuple(_paired(with_weight))))
    assert schedule.orders()[0][1] == Pair(OpKey("F", 0, 1), OpKey("B", 0, 0), with_weight)
    # The device is busy once for the pair: 2 + 2.5 + 1 + 2 + 1, or 2 + 3.5 + 2 + 1.
    assert compute_metrics(schedule).busy == (8.5,)


def _rules(ops: list[Op]) -> list[Rule]:
    return [violation.rule for violation in validate(Schedule(ONE_DEVICE_MOE, tuple(ops)))]


def test_a_pair_must_last_the_overlap_models_time() -> None:
    ops = _paired(False)
    ops[1], ops[2] = ops[1]._replace(end=4), ops[2]._replace(end=4)  # 2 instead of 2.5
    assert Rule.DURATION in _rules(ops)


def test_ops_sharing_a_device_without_sharing_an_interval_are_not_a_pair() -> None:
    apart = _paired(False)
    apart[1] = apart[1]._replace(end=4.4)  # F1 starts with B0 but ends apart from it
    assert Rule.OVERLAP in _rules(apart)


def test_a_pair_of_the_same_microbatch_is_not_a_pair() -> None:
    instance = ONE_DEVICE_MOE
    ops = (Op("F", 0, 0, 0, 0, 2.5), Op("B", 0, 0, 0, 0, 2.5), Op("W", 0, 0, 0, 2.5, 3.5))
    ops += (Op("F", 0, 1, 0, 3.5, 5.5), Op("B", 0, 1, 0, 5.5, 7.5), Op("W", 0, 1, 0, 7.5, 8.5))
    rules = [violation.rule for violation in validate(Schedule(instance, ops))]
    assert Rule.OVERLAP in rules and Rule.DEPENDENCY in rules
