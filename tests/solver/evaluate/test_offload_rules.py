"""The simulator, the validator and the metrics with host-link transfers (docs/offload.md)."""

from __future__ import annotations

import dataclasses

import pytest

from pipesat.models import OpKey, Schedule, ScheduleError
from pipesat.solver.evaluate.bounds import least_offload_limits, minimum_memory_limits
from pipesat.solver.evaluate.metrics import compute_metrics, host_peaks, link_busy
from pipesat.solver.evaluate.simulator import simulate, transfer_plan_of
from pipesat.solver.evaluate.validator import Rule, validate
from tests.offloaded import INSTANCE, OFF, B, F, R, offloaded, one_at_a_time


def test_offload_halves_the_peak_of_one_microbatch_at_a_time() -> None:
    plain = simulate(INSTANCE.with_limit(0.5), one_at_a_time())
    assert {v.rule for v in validate(plain)} == {Rule.MEMORY}
    schedule = offloaded()
    assert validate(schedule) == []
    assert compute_metrics(schedule).max_peak_memory == pytest.approx(0.5)
    assert len(schedule.transfers) == 8
    # A transfer lasts the activation (0.5) over the bandwidth (4).
    assert all(op.end - op.start == pytest.approx(0.125) for op in schedule.transfers)


def _moved(schedule: Schedule, key: OpKey, by: float) -> Schedule:
    transfers = tuple(
        op._replace(start=op.start + by, end=op.end + by) if op.key == key else op for op in schedule.transfers
    )
    return dataclasses.replace(schedule, transfers=transfers)


def test_each_transfer_rule_is_checked() -> None:
    schedule = offloaded()
    at = {op.key: op for op in (*schedule.ops, *schedule.transfers)}
    reload = OpKey(R, 0, 0)
    late = at[OpKey(B, 0, 0)].start - at[reload].start  # the reload now ends after its B starts
    assert Rule.RELOAD in {v.rule for v in validate(_moved(schedule, reload, late))}
    early = at[OpKey(F, 0, 0)].end - at[OpKey(OFF, 0, 0)].start - 0.1
    assert Rule.OFFLOAD in {v.rule for v in validate(_moved(schedule, OpKey(OFF, 0, 0), early))}
    second = OpKey(OFF, 0, 1)
    onto = at[OpKey(OFF, 0, 0)].start - at[second].start
    rules = {v.rule for v in validate(_moved(schedule, second, onto))}
    assert Rule.LINK in rules
    dropped = dataclasses.replace(schedule, transfers=schedule.transfers[1:])
    assert Rule.TRANSFER in {v.rule for v in validate(dropped)}
    no_link = dataclasses.replace(schedule, instance=dataclasses.replace(schedule.instance, host_link_bandwidth=None))
    assert [v.rule for v in validate(no_link)] == [Rule.TRANSFER]


def test_memory_is_charged_while_a_transfer_is_in_flight() -> None:
    schedule = offloaded()
    # The inner F starts after the offload that makes room for it ends: one ending later overlaps it.
    inner = next(op for op in schedule.ops if op.key == OpKey(F, 3, 0))
    offload = next(op for op in schedule.transfers if op.key == OpKey(OFF, 0, 0))
    assert inner.start >= offload.end
    later = inner.start - offload.end + 0.05
    assert [v.rule for v in validate(_moved(schedule, offload.key, later))] == [Rule.MEMORY]


def test_the_simulator_refuses_bad_links() -> None:
    with pytest.raises(ScheduleError, match="without its reload"):
        simulate(INSTANCE, one_at_a_time(), links=[[OpKey(OFF, 0, 0)], []])
    with pytest.raises(ScheduleError, match="no host link"):
        simulate(dataclasses.replace(INSTANCE, host_link_bandwidth=None), one_at_a_time(), links=[[], []])


def test_the_offload_bound_on_the_limit_is_below_the_exact_one_without_offload() -> None:
    assert least_offload_limits(INSTANCE) == [0.5, 0.5]
    assert minimum_memory_limits(INSTANCE) == [1.0, 1.0]
    half = dataclasses.replace(INSTANCE, offload_fraction=0.5)
    assert least_offload_limits(half) == [0.75, 0.75]
    # The bound is met: the schedule above holds exactly that.
    assert compute_metrics(offloaded()).peak_memory == (0.5, 0.5)


def test_the_schedule_file_carries_the_transfers() -> None:
    schedule = offloaded()
    again = Schedule.from_dict(schedule.to_dict())
    assert again.transfers == schedule.transfers and again.ops == schedule.ops
    assert "transfers" not in simulate(INSTANCE, one_at_a_time()).to_dict()


def test_link_busy_adds_both_directions_per_device() -> None:
    # Each device moves 2 offloads and 2 reloads of 0.125.
    assert link_busy(offloaded()) == pytest.approx((0.5, 0.5))
    assert link_busy(simulate(INSTANCE, one_at_a_time())) == (0.0, 0.0)


def test_the_host_holds_its_offloads_within_host_memory() -> None:
    schedule = offloaded()  # one microbatch at a time: each host holds one stage's 0.5 at once
    peaks = host_peaks(schedule)
    assert {device: peak.held for device, peak in peaks.items()} == {0: 0.5, 1: 0.5}
    assert peaks[0].holding == {(0, 0)}

    def with_host(memory: float) -> Schedule:
        return dataclasses.replace(schedule, instance=dataclasses.replace(schedule.instance, host_memory=memory))

    assert validate(with_host(0.5)) == []
    assert [v.rule for v in validate(with_host(0.4))] == [Rule.HOST, Rule.HOST]
    assert "its host holds 0.5 of offloaded activations" in str(validate(with_host(0.4))[0])


def test_with_host_memory_the_retiming_keeps_each_offload_after_the_reloads_before_it() -> None:
    schedule = offloaded()
    hosted = dataclasses.replace(schedule, instance=dataclasses.replace(schedule.instance, host_memory=0.5))
    assert OpKey(OFF, 0, 1) not in transfer_plan_of(schedule).waits
    assert transfer_plan_of(hosted).waits[OpKey(OFF, 0, 1)] == [OpKey(R, 0, 0)]
