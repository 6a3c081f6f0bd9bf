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

so a large gradient bucket runs at 80% of the link, a 4 MiB tensor-parallel activation at 40%. The
link is one GPU's share, one direction (NVLink within a node, the NIC across nodes); `latency` is
the link's per-step latency. Between nodes NCCL switches to trees for small messages; the ring's
latency term over-counts those, which matters only for messages of a few KiB.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

BUS_EFFICIENCY = 0.8
"""The part of a link's peak that NCCL's bus bandwidth reaches for large messages (nccl-tests on
NVLink and InfiniBand: 0.75-0.9)."""
HALF_SIZE = 4 * 2**20
"""The message size (bytes) at which the bus bandwidth is half its large-message value."""


class Collective(Enum):
    ALL_REDUCE = "all-reduce"
    REDUCE_SCATTER = "reduce-scatter"
    ALL_GATHER = "all-gather"
    ALL_TO_ALL = "all-to-all"


@dataclass(frozen=True)
class Link:
    """One GPU's share of a link, one direction: bandwidth in GB/s, latency in µs a step."""

    bandwidth: float
    latency: float


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
