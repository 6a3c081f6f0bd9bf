"""Collective communication time: NCCL's ring algebra at an achievable, size-dependent bus bandwidth.

For a collective over `group` GPUs of a message of S bytes (the whole tensor, as nccl-tests counts
it), a ring moves on each GPU

    all-reduce        2(n-1)/n · S    in 2(n-1) steps
    reduce-scatter    (n-1)/n · S     in n-1 steps
    all-gather        (n-1)/n · S     in n-1 steps
    all-to-all        (n-1)/n · S     in n-1 steps

and takes  moved / bus_bandwidth(S) + steps · latency.  The bus bandwidth a link reaches grows with
the message and saturates below the link's peak (nccl-tests' busbw curves):

    bus_bandwidth(S) = BUS_EFFICIENCY · link bandwidth · S / (S + HALF_SIZE)

so a large gradient bucket runs at 80% of the link, a 4 MiB tensor-parallel activation at 40%.
`latency` is the link's per-step latency.

**A group's link** follows its place in the cluster (`group_nodes`, `group_link`; docs/cost-model.md,
"Collectives as NCCL runs them"). A group of n GPUs with g of them in each of its N = n/g nodes:

- in one node (N = 1) its ring runs over NVLink: the link is one GPU's NVLink, one direction;
- across nodes, NCCL runs one ring (channel) a NIC: every ring enters and leaves each node once, so
  what leaves a node is what one GPU sends, spread over the NICs the group's g GPUs drive. The
  G/g groups of a kind in a node exchange at once (every replica reduces its gradients together),
  so each has g GPUs' share of the node's NICs, and a GPU drives one NIC at a time:
  W = g · min(share, nic), share = k · nic / G (k NICs a node of G GPUs). The ring's bus bandwidth
  is min(NVLink, W) (a GPU still forwards the ring over NVLink), NCCL reaching NETWORK_EFFICIENCY
  of a NIC where BUS_EFFICIENCY of NVLink; the all-to-all cannot aggregate NICs (each GPU sends its
  own bytes over its own share): min(NVLink, share).
- the ring's per-step latency is NVLink's for its n - N steps within a node and the network's for
  the N steps that cross one, averaged over the ring's steps.

NCCL's double binary tree (all-reduce across nodes) moves about the same bytes a node as the ring
(by its algebra, 2S a node each way for three or more nodes) in 2·((g-1) + log2 N) steps instead of
2(n-1): it wins on latency alone, for messages whose ring latency outweighs their transfer. The
rule taken: the messages timed here (tensor-parallel activations of megabytes, gradient buckets of
40M parameters or more) are bandwidth-bound, where the two run at about the same bus bandwidth, so
the model times the ring. Not timed: NVLink SHARP within an H100 node, and a 2-node tree, whose
busbw exceeds the network's (benchmarks/bench_collectives.py shows both).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum
from typing import NamedTuple

BUS_EFFICIENCY = 0.8
"""The part of NVLink's peak that NCCL's bus bandwidth reaches for large messages: its protocol
overhead is about 20% (NCCL's maintainers, NVIDIA/nccl-tests#212: 370 of H100's 450 GB/s; 232 of
A100's 300 in nccl-tests#175)."""
NETWORK_EFFICIENCY = 0.95
"""The part of a NIC's line rate NCCL reaches: 24 GB/s of a 200 Gb/s HDR NIC (NVIDIA/nccl-tests#119),
46-48 of a 400 Gb/s NDR one (nccl-tests#290), as NCCL's maintainers put it."""
HALF_SIZE = 4 * 2**20
"""The message size (bytes) at which the bus bandwidth is half its large-message value."""


class Collective(Enum):
    ALL_REDUCE = "all-reduce"
    REDUCE_SCATTER = "reduce-scatter"
    ALL_GATHER = "all-gather"
    ALL_TO_ALL = "all-to-all"


@dataclass(frozen=True)
class Link:
    """The bus bandwidth a collective saturates below (GB/s; BUS_EFFICIENCY of it is reached: one GPU's
    NVLink, one direction, or a group's network in NVLink's terms, `group_link`), latency in µs a step."""

    bandwidth: float
    latency: float


class GroupNodes(NamedTuple):
    """Where a group's GPUs sit: `size` GPUs, `per_node` of them in each node they span."""

    size: int
    per_node: int

    @property
    def nodes(self) -> int:
        return math.ceil(self.size / self.per_node)


def group_nodes(size: int, stride: int, gpus_per_node: int) -> GroupNodes:
    """A group of `size` GPUs `stride` ranks apart in the cluster's rank order (Megatron's: tensor
    parallelism innermost, then context, then data (experts carved out of it), then pipeline), in
    nodes of `gpus_per_node` consecutive ranks: as many of its GPUs a node as fit, at least one."""
    return GroupNodes(size, max(1, min(size, gpus_per_node // stride)))


@dataclass(frozen=True)
class Fabric:
    """The cluster's links: one GPU's NVLink (GB/s, one direction) and its latency a ring step (µs),
    one GPU's share of its node's network (GB/s) and its latency (µs), GPUs and NICs a node."""

    nvlink: float
    nvlink_latency: float
    network: float
    network_latency: float
    gpus_per_node: int
    nics_per_node: int

    @property
    def nic(self) -> float:
        """One NIC's bandwidth (GB/s): the node's network over its NICs."""
        return self.network * self.gpus_per_node / self.nics_per_node


def network_bandwidth(fabric: Fabric, where: GroupNodes, collective: Collective) -> float:
    """What the group's GPUs of a node send over the network at once (GB/s, line rate): g GPUs'
    share of the node's NICs, a GPU driving one NIC at most; one GPU's share for an all-to-all."""
    share = min(fabric.network, fabric.nic)
    return share if collective is Collective.ALL_TO_ALL else where.per_node * share


def group_link(fabric: Fabric, where: GroupNodes, collective: Collective = Collective.ALL_REDUCE) -> Link:
    """The link a group's `collective` runs over (module notes): NVLink within a node; across nodes
    the slower of NVLink and the group's network, the network counted in NVLink's terms (what NCCL
    reaches of it over BUS_EFFICIENCY), at NVLink's latency for the ring's steps within a node and
    the network's for the N that cross one."""
    if where.nodes <= 1:
        return Link(fabric.nvlink, fabric.nvlink_latency)
    network = network_bandwidth(fabric, where, collective) * NETWORK_EFFICIENCY / BUS_EFFICIENCY
    within = where.size - where.nodes
    latency = (within * fabric.nvlink_latency + where.nodes * fabric.network_latency) / where.size
    return Link(min(fabric.nvlink, network), latency)


def moved_bytes(collective: Collective, size: float, group: int) -> float:
    """What each GPU sends in a ring collective of a `size`-byte message over `group` GPUs."""
    share = (group - 1) / group * size
    return 2 * share if collective is Collective.ALL_REDUCE else share


def steps(collective: Collective, group: int) -> int:
    return 2 * (group - 1) if collective is Collective.ALL_REDUCE else group - 1


def bus_bandwidth(size: float, link: Link) -> float:
    """The bus bandwidth (GB/s) a `size`-byte message reaches on `link`."""
    return BUS_EFFICIENCY * link.bandwidth * size / (size + HALF_SIZE)


def collective_ms(collective: Collective, size: float, group: int, link: Link) -> float:
    """The time of one collective, in ms (module notes); 0 for a group of one or an empty message."""
    if group <= 1 or size <= 0:
        return 0.0
    transfer = moved_bytes(collective, size, group) / (bus_bandwidth(size, link) * 1e9)
    return (transfer + steps(collective, group) * link.latency * 1e-6) * 1e3
