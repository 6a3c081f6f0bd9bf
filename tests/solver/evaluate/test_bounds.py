"""Lower bounds: each is proven, so it never exceeds the brute-force optimum of a tiny instance."""

from __future__ import annotations

import math

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from pipesat.models import Instance, InstanceError, Objective, Tuning, load_instance
from pipesat.solver.evaluate.bounds import (
    critical_path_bound,
    first_device_instance,
    first_device_span_bound,
    lower_bound,
    makespan_bound,
    memory_bound_under_cap,
    span_is_makespan,
    without_communication,
)
from pipesat.solver.evaluate.device_bounds import chain_offsets, enclosure, zero_bubble_bound
from pipesat.solver.evaluate.metrics import compute_metrics
from pipesat.solver.evaluate.retime import min_span_schedule
from pipesat.solver.evaluate.simulator import simulate
from pipesat.solver.evaluate.validator import ensure_valid
from pipesat.solver.heuristics import run_heuristic
from tests.conftest import INSTANCES_DIR, make_instance, moe_instance
from tests.solver.brute_force import brute_force_least_memory, brute_force_optimum, device_orders
from tests.strategies import (
    LAYOUTS,
    PROPERTY_SETTINGS,
    ZERO_OR_TIMES,
    dependency_respecting_orders,
    instances,
    with_feasible_limit,
)


@st.composite
def _tiny_instances(draw: st.DrawFn) -> Instance:
    """Tiny instances (every layout, split or fused, p2p, a limit between the least feasible and the 1F1B
    peak or none) with at most 20 000 order combinations to enumerate."""
    layout = draw(st.sampled_from(LAYOUTS))
    size = 3 if layout == ("linear", 1) else 2
    instance = draw(instances(max_devices=size, max_microbatches=size, layouts=(layout,), weight_times=ZERO_OR_TIMES))
    fraction = draw(st.sampled_from([None, 0.0, 0.5, 1.0]))
    instance = instance if fraction is None else with_feasible_limit(instance, fraction)
    split = instance.split_backward
    assume(math.prod(len(device_orders(instance, d, split)) for d in range(instance.num_devices)) <= 20_000)
    return instance


@settings(PROPERTY_SETTINGS, max_examples=24)
@given(_tiny_instances())
def test_bounds_never_exceed_the_brute_force_optimum(instance: Instance) -> None:
    split = instance.split_backward
    for objective in ("makespan", "span"):
        optimum = brute_force_optimum(instance, split, objective)
        assert lower_bound(instance, objective, split) <= optimum + 1e-9, objective
    assert zero_bubble_bound(instance, split) <= optimum + 1e-9
    assert lower_bound(instance, "memory", split) == brute_force_optimum(instance, split, "memory")
    # The least memory under a cap on the time: never above what the fastest schedules within it hold.
    unlimited = instance.with_changes(memory_limit=None)
    for objective in ("makespan", "span"):
        fastest = brute_force_optimum(unlimited, split, objective)
        for cap in (fastest, fastest * 1.1, fastest * 1.5):
            least = brute_force_least_memory(instance, split, objective, cap)
            assert least is not None
            assert memory_bound_under_cap(unlimited, split, objective, cap) <= least + 1e-9, (objective, cap)


@settings(PROPERTY_SETTINGS, max_examples=24)
@given(_tiny_instances())
def test_the_first_device_instance_makespan_never_exceeds_the_max_span(instance: Instance) -> None:
    # The solve proves its optimum makespan and takes it as a bound on the max span (`solver.solve`,
    # phase 0), so it must hold of the optimum itself, not only of the analytic bound.
    assume(instance.split_backward and not instance.bidirectional)
    relaxed = first_device_instance(instance)
    assert brute_force_optimum(relaxed, True, "makespan") <= brute_force_optimum(instance, True, "span") + 1e-9


@settings(PROPERTY_SETTINGS, max_examples=60)
@given(st.data())
def test_with_the_backward_fused_on_one_route_every_max_span_is_the_makespan(data: st.DataObject) -> None:
    instance = data.draw(instances(max_devices=4, max_microbatches=4, layouts=LAYOUTS[:3]))
    assert span_is_makespan(instance, False)
    orders = data.draw(dependency_respecting_orders(instance, split=False))
    for schedule in (simulate(instance, orders), min_span_schedule(instance, orders)):
        metrics = compute_metrics(ensure_valid(schedule))
        assert metrics.max_span == pytest.approx(metrics.makespan)
    assert lower_bound(instance, "span", False) == lower_bound(instance, "makespan", False)


def test_a_late_w_or_a_second_route_leaves_a_max_span_below_the_makespan() -> None:
    # W1 (5) outlasts B0 and W0 on device 0: device 1's span is 7, the makespan 8.
    split = make_instance(2, 1, forward_times=1, backward_times=1, weight_times=[1, 5])
    assert not span_is_makespan(split, True) and span_is_makespan(split, False)
    orders = [[("F", 0, 0), ("B", 0, 0), ("W", 0, 0)], [("F", 1, 0), ("B", 1, 0), ("W", 1, 0)]]
    metrics = compute_metrics(ensure_valid(simulate(split, orders)))
    assert (metrics.max_span, metrics.makespan) == (7, 8)
    bidirectional = make_instance(2, 2, chunks=2, placement="bidirectional")
    assert not span_is_makespan(bidirectional, False)


@pytest.mark.parametrize(("p", "m"), [(2, 2), (3, 5), (4, 8), (8, 4)])
def test_fused_uniform_bound_is_one_f_one_b(p: int, m: int) -> None:
    instance = Instance.from_dict({"num_devices": p, "num_microbatches": m, "forward_times": 2, "backward_times": 3})
    assert lower_bound(instance) == (m + p - 1) * (2 + 3)


def test_memory_aware_bound_beats_zero_bubble_under_the_1f1b_limit() -> None:
    # Device 0, limit 4 M_B: busy 8 x 15 = 120. Head: at most 4 forwards (20) before its first B can
    # start at 4F + 3B = 38, so 18 idle. Tail: from its last F's start the round trip to that
    # microbatch's W ends after 4F + 4B + W = 48, while it can run only that F and the B + W of the at
    # most 4 microbatches it holds (5 + 40), so 3 idle. 120 + 18 + 3 = 141, ZB-auto's makespan.
    data = {"num_devices": 4, "num_microbatches": 8, "forward_times": 5, "backward_times": 6, "weight_times": 4}
    limited = Instance.from_dict({**data, "memory_limit": "1x"})
    unlimited = Instance.from_dict(data)
    assert zero_bubble_bound(limited, True) == 120
    # Unlimited, device 0's span still covers device 3's 16 F and B ops from the first forward that
    # reaches it (15 + 88) and the last microbatch's backward back to W0 (6 + 6 + 6 + 4): 125.
    assert lower_bound(unlimited, "span") == 125
    assert lower_bound(limited, "span") == 141
    assert lower_bound(limited, "makespan") == 141


def v_instance(limit: float) -> Instance:
    """V-shape, p = 8, m = 16, per stage F/B/W 1/1.5/0.5, p2p 0.1, M_B 0.5, M_W 0.25 (docs/bounds.md's example)."""
    times = {"forward_times": 2, "backward_times": 3, "weight_times": 1, "p2p_time": 0.1}
    memory = {"activation_memory": 1, "weight_memory": 0.5, "memory_limit": limit}
    return make_instance(8, 16, chunks=2, placement="vshape", **times, **memory)


def test_stage_zero_device_bounds_the_max_span_by_the_makespan_with_other_w_free() -> None:
    # Every W off device 0 given no time: device 0's span is that instance's makespan. On V p = 8,
    # m = 16 under limit 16 this is 99.4, the max span CP-SAT proves optimal (bench_proofs), where the
    # device-by-device bounds reach 96.
    instance = v_instance(16)
    free = [t if instance.placement[s] == 0 else 0.0 for s, t in enumerate(instance.weight_times or ())]
    assert first_device_span_bound(instance, True) == pytest.approx(
        makespan_bound(instance.with_changes(weight_times=free), True)
    )
    assert lower_bound(instance, "span") == pytest.approx(99.4)
    fused = first_device_span_bound(instance, False)
    assert fused == pytest.approx(makespan_bound(instance, False)) and lower_bound(instance, "span", False) >= fused
    assert first_device_span_bound(make_instance(2, 2, chunks=2, placement="bidirectional"), False) == 0


def test_enclosed_device_bounds_the_v_shape_max_span() -> None:
    # docs/bounds.md: device 0 encloses device 7 (lead 7.7, trail 11.7); device 7 reaches the end of
    # its last B at least 96 + 4.9 (head idle) - 8.5 (W it may defer) after its first op.
    instance = v_instance(8)
    offsets = chain_offsets(instance, True)
    assert enclosure(instance, True, 0, 7, offsets) == pytest.approx(7.7 + 11.7)
    assert enclosure(instance, True, 7, 0, offsets) is None  # device 7's stages come after stage 0
    bound = lower_bound(instance, "span")
    assert bound == pytest.approx(111.8)
    zb_v = ensure_valid(run_heuristic("zb-v", instance))
    assert bound <= compute_metrics(zb_v).max_span <= 113.5 + 1e-9
    assert lower_bound(v_instance(10), "span") == pytest.approx(103.8)


def test_enclosed_devices_prove_zb_auto_optimal_at_the_1f1b_peak() -> None:
    # The 7B profile's linear p = 4, m = 16 at the 1F1B peak (its first and last stages are the
    # heaviest): every device is enclosed by device 0, and the bound meets ZB-auto's max span, which
    # the windows of one device left 7% below (1694.7 ms against 1823.0 ms).
    instance = load_instance(INSTANCES_DIR / "modern" / "7b-p4-m16.yaml").with_changes(memory_limit="1x")
    zb_auto = compute_metrics(ensure_valid(run_heuristic("zb-auto", instance))).max_span
    assert zb_auto == pytest.approx(1822.98, abs=0.01)
    assert lower_bound(instance, "span") == pytest.approx(zb_auto)


def test_critical_path_counts_p2p_each_way() -> None:
    instance = make_instance(3, 1, forward_times=1, backward_times=2, weight_times=1, p2p_time=0.5)
    assert critical_path_bound(instance, True) == 3 * 1 + 3 * 2 + 1 + 4 * 0.5
    assert critical_path_bound(instance, False) == 3 * 1 + 3 * 3 + 4 * 0.5


def test_split_needs_weight_times() -> None:
    with pytest.raises(InstanceError, match="weight_times"):
        lower_bound(Instance.from_dict({"num_devices": 2, "num_microbatches": 2}), split_backward=True)


@settings(PROPERTY_SETTINGS, max_examples=12)
@given(_tiny_instances(), st.sampled_from([0.25, 0.5, 1.0]), st.sampled_from([0.25, 0.5, 1.0]))
def test_bounds_hold_for_schedules_with_overlapped_pairs(instance: Instance, forward: float, backward: float) -> None:
    """With communication, the bounds of the compute alone never exceed the optimum over schedules with pairs."""
    assume(not instance.split_backward)  # a fused backward keeps the enumeration with pairs small
    moe = instance.with_changes(
        forward_comm_times=[forward * f for f in instance.forward_times],
        backward_comm_times=[backward * b for b in instance.backward_times],
    )
    assume(math.prod(len(device_orders(moe, d, False)) for d in range(moe.num_devices)) <= 20_000)
    for objective in ("makespan", "span"):
        optimum = brute_force_optimum(moe, False, objective)
        assert lower_bound(moe, objective, False) <= optimum + 1e-9, objective
        unlimited = moe.with_changes(memory_limit=None)
        cap = brute_force_optimum(unlimited, False, objective)
        least = brute_force_least_memory(moe, False, objective, cap)
        assert least is not None
        assert memory_bound_under_cap(unlimited, False, objective, cap) <= least + 1e-9, objective


def test_the_least_memory_under_a_cap_is_bisected_as_the_tuning_says() -> None:
    # Linear p = 4, m = 8, W apart: a makespan of at most 30 needs 3 (three quarters of the 1F1B
    # peak); the energy over the cap says 2.27, and only the bisection of the time bound finds 3.
    instance = make_instance(4, 8, weight_times=1)
    cap = lower_bound(instance.with_limit(0.75 * instance.one_f_one_b_peak()), "makespan", True)
    assert cap == 30
    bisected = memory_bound_under_cap(instance, True, Objective.MAKESPAN, cap)
    coarse = memory_bound_under_cap(instance, True, Objective.MAKESPAN, cap, tuning=Tuning(bisections=0))
    assert coarse == pytest.approx(2.2667, abs=1e-4) and bisected == pytest.approx(3)
    assert lower_bound(instance.with_limit(bisected * (1 - 1e-6)), "makespan", True) > cap


def test_head_windows_pay_their_all_to_all() -> None:
    """Before a device's first B no forward can be paired: the bound counts their communication there,
    above the bound of the compute alone, and still below DualPipeV."""
    moe = moe_instance(4, 16, p2p_time=0.05)
    for objective in ("makespan", "span"):
        bound = lower_bound(moe, objective)
        assert bound > lower_bound(without_communication(moe), objective)
        assert bound <= compute_metrics(run_heuristic("dualpipe-v", moe)).objective(objective)
