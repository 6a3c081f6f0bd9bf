"""NCCL's ring algebra at a size-dependent bus bandwidth: what each collective moves, in how many
steps, how the bus bandwidth grows with the message, and that a group of one costs nothing."""

from __future__ import annotations

import pytest

from pipesat.models.units import MIB
from pipesat.solver.instances.collectives import (
    BUS_EFFICIENCY,
    HALF_SIZE,
    Collective,
    Link,
    bus_bandwidth,
    collective_ms,
    moved_bytes,
    steps,
)

NVLINK = Link(bandwidth=450.0, latency=2.0)


@pytest.mark.parametrize("group", [2, 4, 8])
def test_an_all_reduce_is_a_reduce_scatter_and_an_all_gather(group: int) -> None:
    size = 64 * MIB
    assert moved_bytes(Collective.REDUCE_SCATTER, size, group) == (group - 1) / group * size
    assert moved_bytes(Collective.ALL_REDUCE, size, group) == 2 * moved_bytes(Collective.ALL_GATHER, size, group)
    assert steps(Collective.ALL_REDUCE, group) == 2 * steps(Collective.REDUCE_SCATTER, group) == 2 * (group - 1)
    halves = collective_ms(Collective.REDUCE_SCATTER, size, group, NVLINK)
    halves += collective_ms(Collective.ALL_GATHER, size, group, NVLINK)
    assert collective_ms(Collective.ALL_REDUCE, size, group, NVLINK) == pytest.approx(halves)


def test_the_time_is_the_bytes_moved_at_the_bus_bandwidth_plus_a_latency_a_step() -> None:
    size = 64 * MIB
    bus = BUS_EFFICIENCY * 450e9 * size / (size + HALF_SIZE)
    expected = (2 * 7 / 8 * size / bus + 14 * 2e-6) * 1e3
    assert collective_ms(Collective.ALL_REDUCE, size, 8, NVLINK) == pytest.approx(expected)


def test_the_bus_bandwidth_grows_with_the_message_and_stays_below_the_links() -> None:
    sizes = [2**k for k in range(10, 34, 2)]
    bandwidths = [bus_bandwidth(size, NVLINK) for size in sizes]
    assert bandwidths == sorted(bandwidths)
    assert bus_bandwidth(HALF_SIZE, NVLINK) == pytest.approx(BUS_EFFICIENCY * 450 / 2)
    assert bandwidths[-1] < BUS_EFFICIENCY * 450 and bandwidths[-1] > 0.99 * BUS_EFFICIENCY * 450
    # So a small message takes longer a byte: 1 MiB costs more than a 64th of 64 MiB.
    small = collective_ms(Collective.ALL_REDUCE, MIB, 8, NVLINK)
    assert small > 2 * collective_ms(Collective.ALL_REDUCE, 64 * MIB, 8, NVLINK) / 64


def test_a_tiny_message_costs_the_same_whatever_its_size() -> None:
    # Below a few KiB the bus bandwidth grows as fast as the message: the time is latency.
    tiny = collective_ms(Collective.ALL_REDUCE, 8, 8, NVLINK)
    assert tiny == pytest.approx(collective_ms(Collective.ALL_REDUCE, 1024, 8, NVLINK), rel=1e-3)
    assert tiny > 14 * 2e-3  # at least a latency a step


def test_a_larger_group_moves_more_of_the_message() -> None:
    times = [collective_ms(Collective.ALL_REDUCE, 1024 * MIB, group, NVLINK) for group in (2, 4, 8)]
    assert times == sorted(times)
    # The bytes a GPU moves approach twice the message: 1 -> 1.5 -> 1.75 times it (latency aside).
    assert times[2] / times[0] == pytest.approx(1.75, rel=0.02)


@pytest.mark.parametrize("collective", list(Collective))
def test_a_group_of_one_or_an_empty_message_costs_nothing(collective: Collective) -> None:
    assert collective_ms(collective, 64 * MIB, 1, NVLINK) == 0
    assert collective_ms(collective, 0, 8, NVLINK) == 0
