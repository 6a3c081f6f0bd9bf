"""CP-SAT deciding offloads (solver/cpsat/offload.py): a limit the order alone cannot meet, met with
offload, and, with a link fast enough to hide every transfer, at the unlimited-memory optimum."""

from __future__ import annotations

import pytest

from pipesat.models import Instance, OpKey, OptionError, Status
from pipesat.models.ops import Kind
from pipesat.solver.cpsat.data import model_data
from pipesat.solver.evaluate.bounds import least_offload_limits
from pipesat.solver.evaluate.metrics import compute_metrics, host_peaks
from pipesat.solver.evaluate.validator import validate
from pipesat.solver.heuristics import all_heuristics, run_heuristic
from pipesat.solver.heuristics.offload_gated import NAME as OFFLOAD_GATED
from pipesat.solver.solve import solve
from tests.strategies import assert_valid

# p = 2, four interleaved chunks of a quarter each: 0.25x is two chunks' activations, half of what one
# microbatch holds on a device, so no order fits; a transfer of a chunk takes 1/256 of a time unit.
FAST = {"num_devices": 2, "num_microbatches": 2, "chunks": 4, "placement": "interleaved", "host_link_bandwidth": 64}


def test_fast_link_meets_the_unlimited_optimum_at_a_quarter_of_the_1f1b_peak() -> None:
    limited = Instance.from_dict({**FAST, "memory_limit": "0.25x"})
    unlimited = solve(limited.with_limit(None), time_limit=20)
    assert unlimited.status == Status.OPTIMAL
    assert solve(limited, time_limit=20).status == Status.INFEASIBLE
    result = solve(limited, time_limit=60, offload=True)
    assert result.status == Status.OPTIMAL and result.schedule is not None
    assert validate(result.schedule) == []
    assert result.value == pytest.approx(unlimited.value, rel=1e-12)
    assert result.schedule.transfers, "the limit is met only by offloading"
    assert compute_metrics(result.schedule).max_peak_memory <= limited.memory_limit[0] * (1 + 1e-9)


def test_a_slow_link_costs_time_and_every_transfer_keeps_its_rules() -> None:
    slow = Instance.from_dict({**FAST, "host_link_bandwidth": 0.25, "memory_limit": "0.25x"})
    fast = solve(Instance.from_dict({**FAST, "memory_limit": "0.25x"}), time_limit=60, offload=True)
    result = solve(slow, time_limit=60, offload=True)
    assert result.schedule is not None and validate(result.schedule) == []
    assert result.value > fast.value
    by_key = {op.key: op for op in (*result.schedule.ops, *result.schedule.transfers)}
    for op in result.schedule.transfers:
        if op.kind == Kind.R:
            assert by_key[(Kind.B, op.stage, op.microbatch)].start >= op.end - 1e-9
            assert by_key[(Kind.O, op.stage, op.microbatch)].end <= op.start + 1e-9


def test_offload_without_a_link_or_for_the_span_is_refused() -> None:
    no_link = Instance.from_dict({"num_devices": 2, "num_microbatches": 2})
    with pytest.raises(OptionError, match="host_link_bandwidth"):
        solve(no_link, offload=True)
    with pytest.raises(OptionError, match="makespan only"):
        solve(Instance.from_dict(FAST), objective="span", offload=True)


def test_without_offload_a_link_changes_nothing() -> None:
    plain = Instance.from_dict({"num_devices": 2, "num_microbatches": 4, "memory_limit": "0.75x"})
    linked = Instance.from_dict({**plain.to_dict(), "host_link_bandwidth": 1})
    a, b = solve(plain, time_limit=10), solve(linked, time_limit=10)
    assert (a.status, a.value) == (b.status, b.value)
    assert b.schedule is not None and not b.schedule.transfers


def test_the_value_grid_counts_the_transfers_times() -> None:
    # F 1, B 2, a transfer 1/4: in quarter ticks the ops are multiples of 4 but a path through a
    # transfer is not, so a bound of 5 ticks may not be rounded up to 8.
    instance = Instance.from_dict({"num_devices": 2, "num_microbatches": 2, "host_link_bandwidth": 4})
    data = model_data(instance, offload=True)
    assert data.durations[OpKey(Kind.F, 0, 0)] == 4 and data.offload_ticks == {0: 1, 1: 1}
    assert data.least_value_from(5) == 5
    assert model_data(instance).offload_ticks == {}


def test_at_the_smallest_limit_with_offload_a_schedule_is_found_and_below_it_none() -> None:
    # A V on 3 devices with W apart: one stage's activation (half a device's share) is the least.
    shape = {"num_devices": 3, "num_microbatches": 3, "chunks": 2, "placement": "vshape", "weight_times": 1}
    instance = Instance.from_dict({**shape, "host_link_bandwidth": 1})
    least = max(least_offload_limits(instance))
    assert least == 0.5
    result = solve(instance.with_limit(least), time_limit=5, offload=True)
    assert result.schedule is not None and validate(result.schedule) == []
    below = solve(instance.with_limit(least * 0.99), time_limit=5, offload=True)
    assert below.status == Status.INFEASIBLE and below.schedule is None
    assert solve(instance.with_limit(least), time_limit=5).status == Status.INFEASIBLE


# A V of 2 devices with W apart and a fast link: at 1.5 no handwritten order holds less than V-auto's
# 13.5 (the order alone's optimum is 13), while PipeOffload full offload keeps V-Half's 12.5.
OFFLOAD_FAMILIES = {heuristic.name for heuristic in all_heuristics() if heuristic.offloads}
V_LINKED = {"num_devices": 2, "num_microbatches": 4, "chunks": 2, "placement": "vshape", "weight_times": 1}


@pytest.mark.parametrize("devices", [2, 4])
def test_a_solve_that_may_offload_starts_from_pipeoffloads_schedules(devices: int) -> None:
    shape = {**V_LINKED, "num_devices": devices, "num_microbatches": 2 * devices}
    instance = Instance.from_dict({**shape, "host_link_bandwidth": 64, "memory_limit": 1.5})
    alone = solve(instance, time_limit=3, workers=1)
    assert alone.best_heuristic is None or alone.best_heuristic.name not in OFFLOAD_FAMILIES
    result = solve(instance, time_limit=3, workers=1, offload=True)
    assert result.schedule is not None and result.best_heuristic is not None
    assert_valid(result.schedule)
    assert result.best_heuristic.name == "pipeoffload-full-v"
    # Where PipeOffload's leaves room to the bound, the offload-gated start may be better (at 4
    # devices: 25.5 against PipeOffload full's 26.5).
    assert result.starting_point is None or result.starting_point.name in OFFLOAD_FAMILIES | {OFFLOAD_GATED}
    assert result.value is not None and result.value <= result.best_heuristic.value + 1e-9
    assert alone.value is not None and result.value < alone.value


def test_host_memory_binds_the_offloads_in_flight_and_costs_no_validity() -> None:
    # At 1.5 PipeOffload full (V) holds three stages' offloads on a host at once; a host of two, or of
    # one, leaves fewer to offload, and every schedule keeps within it.
    shape = {**V_LINKED, "host_link_bandwidth": 64, "memory_limit": 1.5}
    free = solve(Instance.from_dict(shape), time_limit=3, workers=1, offload=True)
    assert free.value is not None and free.schedule is not None
    for host in (1.0, 0.5):
        instance = Instance.from_dict({**shape, "host_memory": host})
        family = assert_valid(run_heuristic("pipeoffload-full-v", instance.with_limit(None)))
        assert all(peak.held <= host + 1e-9 for peak in host_peaks(family).values())
        result = solve(instance, time_limit=3, workers=1, offload=True)
        assert result.schedule is not None and result.value is not None
        assert_valid(result.schedule)
        assert all(peak.held <= host + 1e-9 for peak in host_peaks(result.schedule).values())
        assert free.value - 1e-9 <= result.value < 13.5  # CP-SAT's own, under V-auto's (the best start)
        assert len(result.schedule.transfers) < len(free.schedule.transfers)
