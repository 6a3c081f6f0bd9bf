"""A device's bounds (its span, its time up to its last B, spaced forwards): each holds for every
schedule, and meets the hand-checked value of docs/bounds.md's examples."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from pipesat.models import Tuning
from pipesat.solver.evaluate.bounds import lower_bound, makespan_bound
from pipesat.solver.evaluate.device_bounds import (
    chain_offsets,
    device_span_bound,
    enclosure,
    forward_spacing,
    until_last_backward,
)
from pipesat.solver.evaluate.metrics import compute_metrics
from pipesat.solver.evaluate.simulator import simulate
from pipesat.solver.evaluate.validator import ensure_valid
from pipesat.solver.heuristics import handwritten_schedules, run_heuristic
from tests.conftest import make_instance
from tests.solver.brute_force import brute_force_optimum
from tests.strategies import (
    LAYOUTS,
    PROPERTY_SETTINGS,
    ZERO_OR_TIMES,
    dependency_respecting_orders,
    instances,
)


@settings(PROPERTY_SETTINGS, max_examples=40)
@given(st.data())
def test_bounds_hold_for_every_schedule_under_its_own_peak(data: st.DataObject) -> None:
    """Past what brute force reaches (devices of two stages, up to 6 microbatches, where what a
    microbatch holds at a device's last forward is its first stages' backwards): a valid schedule,
    random or handwritten, under its own per-device peak as the limit, is no faster than that
    instance's bounds, nor any device's time up to its last B shorter than `until_last_backward`,
    nor (its forwards spaced) the time to it from the earliest its first op can start after the
    schedule's first op or an enclosing device's."""
    instance = data.draw(instances(max_devices=3, max_microbatches=6, layouts=LAYOUTS[1:3], weight_times=ZERO_OR_TIMES))
    split = instance.split_backward
    random_order = simulate(instance, data.draw(dependency_respecting_orders(instance, split=split)))
    handwritten = [schedule for _, schedule in handwritten_schedules(instance) if schedule.split_backward == split]
    for schedule in [random_order, *handwritten]:
        metrics = compute_metrics(ensure_valid(schedule))
        limited = instance.with_limit(metrics.peak_memory)
        assert lower_bound(limited, "span", split) <= metrics.max_span + 1e-9, schedule.name
        assert lower_bound(limited, "makespan", split) <= metrics.makespan + 1e-9, schedule.name
        offsets = chain_offsets(limited, split)
        first_start = [min(op.start for op in schedule.ops if op.device == d) for d in range(instance.num_devices)]
        for device in range(instance.num_devices):
            ops = [op for op in schedule.ops if op.device == device]
            last_backward = max(op.end for op in ops if op.kind == "B")
            assert until_last_backward(limited, split, device, offsets) <= last_backward - first_start[device] + 1e-9
            if instance.bidirectional:
                continue
            # From the schedule's start, and from each enclosing device's first op, the earliest start
            # of the device's first op to the end of its last B, with forwards arriving spaced.
            first = limited.stages_of(device)[0]
            references = [(min(op.start for op in schedule.ops), 0)] + [
                (first_start[outer], limited.stages_of(outer)[0])
                for outer in range(instance.num_devices)
                if enclosure(limited, split, outer, device, offsets) is not None
            ]
            for start, since in references:
                spacing = forward_spacing(limited, since, first)
                earliest = start + offsets[("F", first)] - offsets[("F", since)]
                bound = until_last_backward(limited, split, device, offsets, spacing=spacing)
                assert bound <= last_backward - earliest + 1e-9


def test_a_device_of_two_stages_holds_its_first_stages_work() -> None:
    # V p = 3, m = 10 under 3 units (bench_targets' 400-op miss): F/B/W per stage 3/2/2, 1/4/0.5,
    # 2/2/2, 1.5/4/1, 2/3/2, 1.5/2/0.5; M_B 0.5, M_W 0.25, p2p 0.25.
    instance = make_instance(
        3,
        10,
        chunks=2,
        placement="vshape",
        forward_times=[3, 1, 2, 1.5, 2, 1.5],
        backward_times=[2, 4, 2, 4, 3, 2],
        weight_times=[2, 0.5, 2, 1, 2, 0.5],
        activation_memory=[0.5] * 6,
        weight_memory=[0.25] * 6,
        p2p_time=0.25,
        memory_limit=3,
    )
    # Device 1 (stages 1 and 4, busy 125): its first B comes at least 11 after its first F, and until
    # it ends every forward it began is held, 6 at most. Six forwards of stage 4 (12) would fill that,
    # but a microbatch's F of stage 4 follows its F of stage 1 on the same device: 3 pairs (9) at most,
    # so 2 idle.
    assert device_span_bound(instance, True, 1) == 127
    # Device 2 (stages 2 and 3, busy 125) up to its last B: its head idle (1) and the tail term, the
    # least over what it may hold at its last forward of max(15.5 - work, -W time). A microbatch whose
    # B of stage 3 is still to come holds stage 2's too (B3 runs first); enumerated, the least is
    # -10.5 (its Lagrangian bound, per stage, was -11.875).
    offsets = chain_offsets(instance, True)
    assert until_last_backward(instance, True, 2, offsets) == 125 + 1 - 10.5
    # Device 0 encloses it by 4.5 + 8.5, and device 2's forwards of stage 2 come no faster than device
    # 0's of stage 0, 3 apart, from 4.5 after device 0's first op. In the 13 from device 2's first op
    # to its first B, 4 of them end: with 6 forwards held at most, 2 of both stages and 2 of stage 2
    # alone, 11. So 2 idle; a later first op lets more in, but it is late by as much as they add.
    spacing = forward_spacing(instance, 0, 2)
    assert spacing == 3
    assert until_last_backward(instance, True, 2, offsets, spacing=spacing) == 125 + 2 - 10.5
    assert lower_bound(instance, "span", True) == 13 + 116.5


def test_forwards_spaced_by_a_slower_stage_before_fill_less_of_a_head_window() -> None:
    # Linear p = 4, m = 11, F 3/2/1/1, B 2/4/4/4 fused, 6 activations at most on each device.
    instance = make_instance(4, 11, forward_times=[3, 2, 1, 1], backward_times=[2, 4, 4, 4], memory_limit=6)
    offsets = chain_offsets(instance, False)
    # Device 1 (busy 66): 12 from its first op to its first B, which 6 forwards of 2 would fill. But
    # its forwards follow stage 0's, 3 apart: 4 can end in the window (8), and each later first op
    # lets one more in for 3 of delay, so 4 idle rather than none.
    assert until_last_backward(instance, False, 1, offsets) == 66
    assert until_last_backward(instance, False, 1, offsets, spacing=forward_spacing(instance, 0, 1)) == 70
    # With the chain before it (3) and after its last B (stage 0's B, 2): a makespan of at least 75,
    # where 1F1B runs 79 (a CP-SAT run finds 75, so that is the optimum).
    assert makespan_bound(instance, False) == 75
    assert compute_metrics(ensure_valid(run_heuristic("1f1b", instance))).makespan == 79
    # Without the spacing (the tuning's `spaced_forwards` off) the head window fills: 4 less.
    unspaced = Tuning(spaced_forwards=False)
    assert forward_spacing(instance, 0, 1, tuning=unspaced) == 0
    assert makespan_bound(instance, False, tuning=unspaced) == lower_bound(instance, tuning=unspaced) == 71


def test_a_longer_head_window_takes_in_forwards_that_arrive_later() -> None:
    # V p = 2, m = 2, fused: F 4/3/0.5/0.5, B 1/3/1/1, M_B 0.5/1/1/0.5, p2p 0.25, limit 3.5.
    times = {"forward_times": [4, 3, 0.5, 0.5], "backward_times": [1, 3, 1, 1], "p2p_time": 0.25}
    instance = make_instance(
        2, 2, chunks=2, placement="vshape", **times, activation_memory=[0.5, 1, 1, 0.5], memory_limit=3.5
    )
    offsets = chain_offsets(instance, False)
    # Device 1 (stages 1 and 2, busy 15): at least 5.5 from its first op to its first B, and its
    # forwards of stage 1 come 4 apart, behind stage 0's. In 5.5 one microbatch's forwards (3.5) end:
    # 2 idle. In a window 1.5 longer the second's end too, 6.5 within the limit: 0.5 idle, the least.
    # Without the spacing, none; counting only what ends in the shortest window, 2, and a bound of
    # 22.5 above the optimum.
    assert until_last_backward(instance, False, 1, offsets) == 15
    assert until_last_backward(instance, False, 1, offsets, spacing=forward_spacing(instance, 0, 1)) == 15.5
    for objective in ("makespan", "span"):
        assert lower_bound(instance, objective) == brute_force_optimum(instance, False, objective) == 21
