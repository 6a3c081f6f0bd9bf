"""The memory-gated start: valid, within its limit, and where Megatron's (or 1F1B's) order does not
fit, as fast as it or faster than the periodic start."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipesat.models import Instance, OpKey
from pipesat.models.log import show_log
from pipesat.solver.evaluate.metrics import compute_metrics
from pipesat.solver.heuristics import run_heuristic
from pipesat.solver.heuristics.interleaved import interleaved_requirement
from pipesat.solver.heuristics.memory_gated import GATES, Gate, memory_gated_schedule, memory_gated_schedules
from pipesat.solver.heuristics.periodic import periodic_schedule
from pipesat.solver.solve import solve
from tests.conftest import make_instance
from tests.strategies import PROPERTY_SETTINGS, assert_valid, instances


def interleaved(p: int, v: int, m: int, p2p: float) -> Instance:
    times = {"forward_times": 1, "backward_times": 2, "weight_times": 1, "weight_memory": 0.5}
    return Instance.from_dict(
        {"num_devices": p, "num_microbatches": m, "chunks": v, "placement": "interleaved", "p2p_time": p2p} | times
    )


def linear(p: int, m: int, limit: str | None) -> Instance:
    return make_instance(p, m, backward_times=1, weight_times=1, memory_limit=limit)


def megatron_peak(instance: Instance) -> float:
    """The peak of the order whose sequences the gated start keeps: Megatron's, or 1F1B's with one chunk."""
    name = "1f1b" if instance.chunks == 1 else "interleaved"
    return max(compute_metrics(run_heuristic(name, instance.with_limit(None))).peak_memory)


@PROPERTY_SETTINGS
@given(instances(), st.sampled_from([None, 1.0, 0.8, 0.6, 0.4]), st.sampled_from(GATES))
def test_a_schedule_it_makes_is_valid_and_within_the_limit(
    instance: Instance, fraction: float | None, gate: Gate
) -> None:
    limited = instance.with_limit(None)
    served = instance.chunks == 1 or interleaved_requirement(instance) is None
    if fraction is not None and served and not instance.bidirectional:
        limited = instance.with_limit(fraction * megatron_peak(instance))
    schedule = memory_gated_schedule(limited, limited.split_backward, gate)
    if schedule is None:
        return
    assert_valid(schedule)
    assert not limited.over_limit(compute_metrics(schedule).peak_memory)


def test_deferring_w_reaches_the_proven_optimum_where_w_after_b_does_not() -> None:
    # p8 m16, F = B = W = 1, at half 1F1B's peak: 79 is the proven optimum (the manual's picture).
    instance = linear(8, 16, "0.5x")
    after_b = memory_gated_schedule(instance, True, Gate(defer_weights=False, extra_in_flight=None))
    deferred = memory_gated_schedule(instance, True, Gate(defer_weights=True, extra_in_flight=None))
    assert after_b is not None and deferred is not None
    assert_valid(after_b)
    assert_valid(deferred)
    assert compute_metrics(deferred).makespan == pytest.approx(79)
    assert compute_metrics(after_b).makespan > 79 + 5
    orders = deferred.orders()
    # Device 0 runs a W only where it could start nothing else as early, so some W waits past a later op.
    assert any(
        key.kind == "W" and orders[0].index(key) > orders[0].index(OpKey("B", key.stage, key.microbatch)) + 1
        for key in orders[0]
    )


def test_a_cap_keeps_each_rank_within_the_handwritten_in_flight_count_plus_the_extra() -> None:
    instance = linear(6, 12, None)  # no limit: the cap alone gates the forwards
    for extra in (0, 1):
        schedule = memory_gated_schedule(instance, True, Gate(defer_weights=True, extra_in_flight=extra))
        assert schedule is not None
        assert_valid(schedule)
        most = []
        for order in schedule.orders():
            in_flight = [0]
            for key in order:
                in_flight.append(in_flight[-1] + {"F": 1, "B": -1, "W": 0}[key.kind])
            most.append(max(in_flight))
        assert all(held <= 6 - rank + extra for rank, held in enumerate(most))  # 1F1B's p - r, plus the extra
        assert most[0] == 6 + extra  # the first rank, waiting longest for its backwards, reaches the cap


@pytest.mark.parametrize(("p", "v", "m"), [(2, 2, 4), (4, 2, 8), (3, 3, 6), (4, 4, 4)])
def test_without_a_limit_every_interleaved_instance_megatron_serves_gets_one(p: int, v: int, m: int) -> None:
    for split in (True, False):
        schedule = memory_gated_schedule(interleaved(p, v, m, 0.5), split)
        assert schedule is not None and schedule.split_backward == split
        assert_valid(schedule)


def test_only_a_linear_pipeline_or_an_interleaved_one_megatron_serves_gets_one() -> None:
    gated = memory_gated_schedule(make_instance(4, 6, weight_times=1), True)  # linear: any m
    assert gated is not None
    assert_valid(gated)
    assert memory_gated_schedule(interleaved(4, 2, 6, 0.0), True) is None  # m not a multiple of p
    shuffled = Instance.from_dict({"num_devices": 3, "num_microbatches": 3, "placement": [2, 0, 1]})
    assert memory_gated_schedule(shuffled, False) is None  # stages not in device order
    vshape = Instance.from_dict({"num_devices": 2, "num_microbatches": 4, "chunks": 2, "placement": "vshape"})
    assert memory_gated_schedule(vshape, False) is None


def test_below_the_1f1b_peak_of_a_linear_pipeline_it_beats_the_periodic_start() -> None:
    # p6 m12, F = B = W = 1, at half 1F1B's peak (3 microbatches a device): gated 64, periodic 68.
    instance = linear(6, 12, "0.5x")
    gated = memory_gated_schedule(instance, True)
    assert gated is not None
    assert_valid(gated)
    assert not instance.over_limit(compute_metrics(gated).peak_memory)
    assert compute_metrics(gated).makespan < compute_metrics(periodic_schedule(instance, True)).makespan - 2


def test_below_megatrons_peak_it_keeps_its_speed_where_the_periodic_start_loses_it() -> None:
    # p3 v3 m6 at 90% of the peak Megatron's order needs: the gated order matches Megatron's makespan
    # (35.67) within the limit, where the best periodic start fitting it takes 42.67.
    base = interleaved(3, 3, 6, 0.5)
    instance = base.with_limit(0.9 * megatron_peak(base))
    megatron = compute_metrics(run_heuristic("interleaved", base))
    assert instance.over_limit(megatron.peak_memory)
    gated = memory_gated_schedule(instance, True)
    assert gated is not None
    assert_valid(gated)
    periodic = compute_metrics(periodic_schedule(instance, True))
    assert compute_metrics(gated).makespan == pytest.approx(megatron.makespan)
    assert compute_metrics(gated).makespan < periodic.makespan - 5


def test_the_solver_starts_from_it_when_the_handwritten_schedules_leave_room(caplog: pytest.LogCaptureFixture) -> None:
    base = interleaved(3, 3, 6, 0.5)
    instance = base.with_limit(0.9 * megatron_peak(base))
    gated = memory_gated_schedule(instance, True)
    assert gated is not None
    with show_log():
        result = solve(instance, time_limit=2, workers=1, seed=0)
    assert_valid(result.schedule)
    assert result.value <= compute_metrics(gated).makespan + 1e-9
    assert any("memory-gated start" in record.getMessage() for record in caplog.records)


def test_without_w_ops_the_variants_that_differ_only_in_w_are_one() -> None:
    instance = linear(4, 8, "0.75x")
    fused = memory_gated_schedules(instance, False)
    split = memory_gated_schedules(instance, True)
    assert len(split) == len(GATES)
    assert len(fused) == len({gate.extra_in_flight for gate in GATES})
    for schedule in fused + split:
        assert_valid(schedule)
        assert not instance.over_limit(compute_metrics(schedule).peak_memory)
