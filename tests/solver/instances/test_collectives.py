"""NCCL's ring algebra at a size-dependent bus bandwidth: what each collective moves, in how many
steps, how the bus bandwidth grows with the message, and that a group of one costs nothing; a
group's place in the cluster and the link it runs over there."""

from __future__ import annotations

import pytest

from pipesat.models.units import MIB
from pipesat.solver.instances.collectives import (
    BUS_EFFICIENCY,
    HALF_SIZE,
    NETWORK_EFFICIENCY,
    Collective,
    Fabric,
    GroupNodes,
    Link,
    bus_bandwidth,
    collective_ms,
    group_link,
    group_nodes,
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


# A DGX A100: NVLink 300 GB/s a GPU one direction at 2 µs a step; 8 x 200 Gb/s HDR, 25 GB/s a GPU, 10 µs.
DGX_A100 = Fabric(
    nvlink=300.0, nvlink_latency=2.0, network=25.0, network_latency=10.0, gpus_per_node=8, nics_per_node=8
)


@pytest.mark.parametrize(
    ("size", "stride", "per_node", "nodes"),
    [
        (8, 1, 8, 1),  # t8: a node
        (16, 1, 8, 2),  # t16: two nodes, 8 a node
        (4, 1, 4, 1),  # t4
        (64, 1, 8, 8),  # d64 at t1: 8 nodes of 8
        (32, 2, 4, 8),  # d32 at t2: 4 of the group a node, the other replica group beside it
        (32, 8, 1, 32),  # d32 at t8: one a node
        (4, 2, 4, 1),  # cp4 at t2: the 8 GPUs of one node
        (8, 4, 2, 4),  # ep8 at t4: 2 a node
        (1, 8, 1, 1),  # a group of one
    ],
)
def test_a_group_holds_as_many_gpus_a_node_as_its_stride_fits(
    size: int, stride: int, per_node: int, nodes: int
) -> None:
    placed = group_nodes(size, stride, 8)
    assert placed == GroupNodes(size, per_node)
    assert placed.nodes == nodes


def test_a_group_within_a_node_runs_over_nvlink() -> None:
    assert group_link(DGX_A100, group_nodes(8, 1, 8)) == Link(300.0, 2.0)
    assert group_link(DGX_A100, group_nodes(4, 2, 8), Collective.ALL_TO_ALL) == Link(300.0, 2.0)


def test_a_group_of_a_whole_node_each_runs_at_the_nodes_nics() -> None:
    # t1 d64 over 8 nodes of 8: the 8 GPUs of a node drive its 8 NICs, 200 GB/s at NCCL's NIC
    # efficiency, below NVLink's 240; 56 of the ring's steps a pass within a node, 8 across.
    link = group_link(DGX_A100, group_nodes(64, 1, 8))
    assert BUS_EFFICIENCY * link.bandwidth == pytest.approx(NETWORK_EFFICIENCY * 8 * 25)
    assert link.latency == pytest.approx((56 * 2 + 8 * 10) / 64)
    size = 1024 * MIB
    expected = (2 * 63 / 64 * size / (bus_bandwidth(size, link) * 1e9) + 126 * link.latency * 1e-6) * 1e3
    assert collective_ms(Collective.ALL_REDUCE, size, 64, link) == pytest.approx(expected)


def test_a_group_with_one_gpu_a_node_runs_at_one_gpus_share() -> None:
    # d32 at t8: one GPU of the group a node, its own NIC; every step crosses the network.
    link = group_link(DGX_A100, group_nodes(32, 8, 8))
    assert BUS_EFFICIENCY * link.bandwidth == pytest.approx(NETWORK_EFFICIENCY * 25)
    assert link.latency == pytest.approx(10.0)


def test_the_group_link_grows_with_its_gpus_a_node_up_to_nvlink() -> None:
    shares = [group_link(DGX_A100, group_nodes(64, stride, 8)).bandwidth for stride in (8, 4, 2, 1)]
    assert shares == sorted(shares)
    fast_network = Fabric(300.0, 2.0, 100.0, 10.0, 8, 8)  # 800 Gb/s a GPU: the ring is NVLink-bound
    assert group_link(fast_network, group_nodes(16, 1, 8)).bandwidth == 300.0


def test_fewer_nics_than_gpus_share_them_and_a_gpu_drives_one_nic() -> None:
    # 4 x 200 Gb/s for 8 GPUs: 12.5 GB/s a GPU; the whole node's group gets the 4 NICs, 100 GB/s.
    four = Fabric(300.0, 2.0, 12.5, 10.0, 8, 4)
    assert four.nic == 25.0
    assert group_link(four, group_nodes(16, 1, 8)).bandwidth * BUS_EFFICIENCY == pytest.approx(NETWORK_EFFICIENCY * 100)
    # 16 NICs of 25 GB/s for 8 GPUs: 50 GB/s a GPU's share, but a GPU drives one NIC at a time.
    sixteen = Fabric(300.0, 2.0, 50.0, 10.0, 8, 16)
    one_a_node = group_link(sixteen, group_nodes(4, 8, 8)).bandwidth * BUS_EFFICIENCY
    assert one_a_node == pytest.approx(NETWORK_EFFICIENCY * 25)


def test_an_all_to_all_across_nodes_runs_at_one_gpus_share_of_the_network() -> None:
    # NCCL's all-to-all sends each GPU's bytes over its own NIC: no aggregation over the node's NICs.
    whole = group_link(DGX_A100, group_nodes(16, 1, 8), Collective.ALL_TO_ALL)
    assert whole.bandwidth * BUS_EFFICIENCY == pytest.approx(NETWORK_EFFICIENCY * 25)
