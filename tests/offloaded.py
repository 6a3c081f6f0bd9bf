"""A small schedule that offloads (docs/offload.md), for the tests of every module that shows or
writes one: a V on 2 devices, one microbatch at a time, each device's first stage offloaded after its
F and reloaded once the inner stage's B is done; at half the 1F1B peak (one stage's activation) it
fits only with its offloads."""

from __future__ import annotations

from pipesat.models import Instance, OpKey, Schedule
from pipesat.models.ops import Kind
from pipesat.solver.evaluate.simulator import simulate

F, B, OFF, R = Kind.F, Kind.B, Kind.O, Kind.R
INSTANCE = Instance.from_dict(
    {"num_devices": 2, "num_microbatches": 2, "chunks": 2, "placement": "vshape", "host_link_bandwidth": 4}
)
"""Device 0 runs stages 0 and 3, device 1 stages 1 and 2; a transfer takes 0.5 / 4 = 0.125."""


def one_at_a_time() -> list[list[OpKey]]:
    """Each device's order, one microbatch at a time."""
    return [
        [OpKey(kind, s, j) for j in range(2) for kind, s in ((F, 0), (F, 3), (B, 3), (B, 0))],
        [OpKey(kind, s, j) for j in range(2) for kind, s in ((F, 1), (F, 2), (B, 2), (B, 1))],
    ]


def offloaded() -> Schedule:
    """The example, under the limit 0.5 (see the module notes)."""
    links = [[OpKey(kind, s, j) for j in range(2) for kind in (OFF, R)] for s in (0, 1)]
    waits = {}
    for first, inner in ((0, 3), (1, 2)):
        for j in range(2):
            waits[OpKey(F, inner, j)] = [OpKey(OFF, first, j)]
            waits[OpKey(R, first, j)] = [OpKey(B, inner, j)]
    return simulate(INSTANCE.with_limit(0.5), one_at_a_time(), links=links, waits=waits)
