"""The simulator: hand-computed timelines, agreement with the validator on random orders, rejected orders."""

from __future__ import annotations

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from pipesat.models import Instance, OpKey, Pair, Schedule, ScheduleError
from pipesat.models.ops import dependency
from pipesat.solver.evaluate.simulator import simulate
from pipesat.solver.heuristics import get_heuristic, run_heuristic
from tests.conftest import make_instance
from tests.strategies import (
    PROPERTY_SETTINGS,
    assert_valid,
    dependency_respecting_orders,
    instances,
    instances_with_orders,
)


def _starts(schedule: Schedule) -> dict[OpKey, float]:
    return {op.key: op.start for op in schedule.ops}


def test_one_f_one_b_timeline_by_hand(one_f_one_b_instance: Instance) -> None:
    schedule = assert_valid(run_heuristic("1f1b", one_f_one_b_instance))
    starts = _starts(schedule)
    # Microbatch 0 runs down the pipeline and back without waiting: F at s, B(3) at 4, then 2 per stage.
    assert [starts[("F", s, 0)] for s in range(4)] == [0, 1, 2, 3]
    assert [starts[("B", s, 0)] for s in (3, 2, 1, 0)] == [4, 6, 8, 10]
    # Device 0's warm-up forwards run back to back; its fourth F waits only for the device.
    assert [starts[("F", 0, j)] for j in range(4)] == [0, 1, 2, 3]
    # After B(3, 0) device 3 alternates F (waiting for device 2's F) and B: F(3,1) at 6, B(3,1) at 7.
    assert (starts[("F", 3, 1)], starts[("B", 3, 1)], starts[("F", 3, 2)]) == (6, 7, 9)
    # Device 1's F(1, 3) comes after its B(1, 0) (8..10) in the 1F1B order.
    assert starts[("F", 1, 3)] == 10
    assert starts[("B", 0, 1)] == 13
    # The last backward ends at (m + p - 1)(F + B) = 33.
    assert max(op.end for op in schedule.ops) == 33
    assert starts[("B", 0, 7)] == 31


def test_p2p_is_paid_only_between_devices() -> None:
    # V placement on 2 devices: stages 1 and 2 share device 1, stages 0 and 3 share device 0.
    instance = make_instance(
        2, 1, chunks=2, placement="vshape", forward_times=[1, 1, 1, 1], backward_times=[2, 2, 2, 2], p2p_time=0.5
    )
    orders = [
        [("F", 0, 0), ("F", 3, 0), ("B", 3, 0), ("B", 0, 0)],
        [("F", 1, 0), ("F", 2, 0), ("B", 2, 0), ("B", 1, 0)],
    ]
    schedule = assert_valid(simulate(instance, orders))
    starts = _starts(schedule)
    assert [starts[("F", s, 0)] for s in range(4)] == [0, 1.5, 2.5, 4]
    assert [starts[("B", s, 0)] for s in (3, 2, 1, 0)] == [5, 7.5, 9.5, 12]


def test_name_and_source_are_kept(one_f_one_b_instance: Instance) -> None:
    orders = get_heuristic("gpipe").orders(one_f_one_b_instance)
    schedule = assert_valid(simulate(one_f_one_b_instance, orders, name="g", source={"kind": "x"}))
    assert (schedule.name, schedule.source) == ("g", {"kind": "x"})


def _latency(instance: Instance, a: int, b: int) -> float:
    return instance.p2p_time if instance.placement[a] != instance.placement[b] else 0.0


@PROPERTY_SETTINGS
@given(instances_with_orders())
def test_random_orders_simulate_to_valid_as_soon_as_possible_schedules(case) -> None:
    instance, orders = case
    schedule = assert_valid(simulate(instance, orders))
    assert schedule.orders() == orders
    # As soon as possible: each op starts when its device is free or its dependency (+ p2p) has ended.
    ends = {op.key: op.end for op in schedule.ops}
    device_free = [0.0] * instance.num_devices
    for op in sorted(schedule.ops, key=lambda o: (o.start, o.end)):
        before = dependency(op.key, instance)
        ready = 0.0 if before is None else ends[before] + _latency(instance, before[1], op.stage)
        assert op.start == max(device_free[op.device], ready)
        device_free[op.device] = op.end


@PROPERTY_SETTINGS
@given(instances_with_orders(), st.randoms(use_true_random=False))
def test_an_op_ordered_before_its_same_device_dependency_deadlocks(case, rng) -> None:
    instance, orders = case
    candidates = [
        (device, i)
        for device, order in enumerate(orders)
        for i, key in enumerate(order)
        if (before := dependency(key, instance)) is not None and instance.placement[before[1]] == device
    ]
    assume(candidates)  # some dependency stays on one device (not so for linear placement, fused backward)
    device, i = rng.choice(candidates)
    order = orders[device]
    j = order.index(dependency(order[i], instance))
    order.insert(j, order.pop(i))
    with pytest.raises(ScheduleError, match=f"the orders deadlock: .*device {device} is stuck at "):
        simulate(instance, orders)


def test_deadlock_names_the_stuck_op_and_what_it_waits_for_on_each_device() -> None:
    instance = make_instance(2, 1)
    orders = [[("B", 0, 0), ("F", 0, 0)], [("F", 1, 0), ("B", 1, 0)]]
    with pytest.raises(ScheduleError) as caught:
        simulate(instance, orders)
    assert str(caught.value) == (
        "the orders deadlock: device 0 is stuck at B(stage 0, mb 0) waiting for B(stage 1, mb 0); "
        "device 1 is stuck at F(stage 1, mb 0) waiting for F(stage 0, mb 0)"
    )


def test_deadlock_lists_only_stuck_devices() -> None:
    instance = make_instance(2, 1, weight_times=1)
    orders = [[("F", 0, 0), ("W", 0, 0), ("B", 0, 0)], [("F", 1, 0), ("B", 1, 0), ("W", 1, 0)]]
    with pytest.raises(ScheduleError) as caught:
        simulate(instance, orders)
    assert str(caught.value) == (
        "the orders deadlock: device 0 is stuck at W(stage 0, mb 0) waiting for B(stage 0, mb 0)"
    )


def _linear(m: int = 1) -> Instance:
    return make_instance(2, m, weight_times=1)


@pytest.mark.parametrize(
    ("orders", "message"),
    [
        ([[("F", 0, 0), ("B", 0, 0)], [("F", 1, 0)]], r"not a complete set of ops: missing: B\(stage 1, mb 0\)$"),
        (
            [[("F", 0, 0), ("F", 0, 0), ("B", 0, 0)], [("F", 1, 0), ("B", 1, 0)]],
            r"not a complete set of ops: repeated: F\(stage 0, mb 0\)$",
        ),
        (
            [[("F", 0, 0), ("B", 0, 0)], [("F", 1, 0), ("B", 1, 0), ("F", 2, 0)]],
            r"not a complete set of ops: unknown: F\(stage 2, mb 0\)$",
        ),
        (
            [[("F", 0, 0), ("B", 0, 0), ("W", 0, 0)], [("F", 1, 0), ("B", 1, 0)]],
            r"missing: W\(stage 1, mb 0\)$",
        ),
        (
            [[("F", 0, 0), ("B", 0, 0), ("F", 1, 0)], [("B", 1, 0)]],
            r"F\(stage 1, mb 0\) is ordered on device 0, but stage 1 is placed on device 1",
        ),
        ([[("F", 0, 0), ("B", 0, 0)]], "got orders for 1 devices, the instance has 2"),
    ],
)
def test_bad_orders_are_rejected(orders, message: str) -> None:
    with pytest.raises(ScheduleError, match=message):
        simulate(_linear(), orders)


def test_many_missing_ops_are_summarised() -> None:
    with pytest.raises(
        ScheduleError, match=r"missing: F\(stage 0, mb 0\), F\(stage 0, mb 1\), F\(stage 0, mb 2\) and 9 more$"
    ):
        simulate(_linear(m=3), [[], []])


def test_w_ops_need_weight_times(one_f_one_b_instance: Instance) -> None:
    orders = [[("F", 0, 0), ("W", 0, 0)]] + [[] for _ in range(3)]
    with pytest.raises(ScheduleError, match="the orders hold W ops but the instance has no weight_times"):
        simulate(one_f_one_b_instance, orders)


@PROPERTY_SETTINGS
@given(st.data())
def test_fused_orders_of_a_split_instance_use_the_whole_backward(data) -> None:
    instance = data.draw(instances(split=True))
    schedule = assert_valid(simulate(instance, data.draw(dependency_respecting_orders(instance, split=False))))
    assert not schedule.split_backward
    for op in schedule.ops:
        if op.kind == "B":
            assert op.end - op.start == instance.backward_times[op.stage] + instance.weight_times[op.stage]


ONE_DEVICE_MOE = make_instance(1, 2, forward_times=2, backward_times=3, forward_comm_times=0.5, backward_comm_times=1)
"""One device, F = 2 and B = 3 (fused), with all-to-alls of 0.5 and 1: a pair lasts 1.5 + 2 = 3.5."""

PAIR = Pair(OpKey("F", 0, 1), OpKey("B", 0, 0))


def test_a_pair_is_one_step_timed_by_the_overlap_model() -> None:
    schedule = simulate(ONE_DEVICE_MOE, [[OpKey("F", 0, 0), PAIR, OpKey("B", 0, 1)]])
    timeline = sorted((op.kind, op.microbatch, op.start, op.end) for op in schedule.ops)
    assert timeline == [("B", 0, 2, 5.5), ("B", 1, 5.5, 8.5), ("F", 0, 0, 2), ("F", 1, 2, 5.5)]
    assert schedule.orders() == [[OpKey("F", 0, 0), PAIR, OpKey("B", 0, 1)]]
    assert schedule.has_pairs


def test_a_pair_waits_for_both_its_ops_dependencies() -> None:
    times = {"forward_times": 2, "backward_times": 3, "forward_comm_times": 0.5, "backward_comm_times": 1}
    instance = make_instance(2, 2, p2p_time=1, **times)
    forward_b_pair = Pair(OpKey("F", 1, 1), OpKey("B", 1, 0))
    orders = [
        [OpKey("F", 0, 0), OpKey("F", 0, 1), OpKey("B", 0, 0), OpKey("B", 0, 1)],
        [OpKey("F", 1, 0), forward_b_pair, OpKey("B", 1, 1)],
    ]
    schedule = simulate(instance, orders)
    start = {op.key: op.start for op in schedule.ops}
    # F(1, 1) may start at 2 + 2 + 1 (stage 0's second forward, p2p); B(1, 0) at 1 + 2 + 2 = 5 after F(1, 0).
    assert start[OpKey("F", 1, 1)] == start[OpKey("B", 1, 0)] == 5


@pytest.mark.parametrize(
    ("pair", "message"),
    [
        (Pair(OpKey("F", 0, 0), OpKey("B", 0, 0)), "pairs one microbatch with itself"),
        (Pair(OpKey("F", 0, 0), OpKey("F", 0, 1)), "a pair runs an F with a B"),
    ],
)
def test_inadmissible_pairs_are_refused(pair: Pair, message: str) -> None:
    with pytest.raises(ScheduleError, match=message):
        simulate(ONE_DEVICE_MOE, [[pair, OpKey("F", 0, 1), OpKey("B", 0, 1)]])


def test_a_stuck_pair_is_named_in_the_deadlock() -> None:
    backwards_first = Pair(OpKey("F", 0, 0), OpKey("B", 0, 1))
    with pytest.raises(
        ScheduleError, match=r"stuck at F\(stage 0, mb 0\) with B\(stage 0, mb 1\) waiting for F\(stage 0, mb 1\)"
    ):
        simulate(ONE_DEVICE_MOE, [[backwards_first, OpKey("F", 0, 1), OpKey("B", 0, 0)]])
