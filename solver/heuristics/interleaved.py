"""Interleaved 1F1B (Megatron-LM): v chunks per device, stage s on device s mod p, whole backward as one op.

Forwards on a device walk microbatches in groups of p: microbatches 0..p-1 of chunk 0, then of chunk 1,
..., then the next group; backwards mirror that from the last chunk. Rank r runs
`2(p-r-1) + (v-1)p` warm-up forwards (capped at all m·v of them), then one forward and one backward
in turn, then the remaining backwards. The order needs m divisible by p.

The overlapped variant runs the steady state in overlapped pairs (`solver.heuristics.phases`), as
Megatron-Core does with the MoE all-to-all overlapped.
"""

from __future__ import annotations

from pipesat.models import Instance, Kind, OpKey
from pipesat.solver.heuristics.heuristic import Orders, StepOrders
from pipesat.solver.heuristics.phases import Phases
from pipesat.solver.heuristics.requirements import (
    first_unmet,
    needs_interleaved,
    needs_microbatches_divisible_by_devices,
)


def _chunk_and_microbatch(k: int, p: int, v: int) -> tuple[int, int]:
    """The (chunk, microbatch) of a device's k-th forward in Megatron's group-of-p order."""
    group, within = divmod(k, p * v)
    chunk, offset = divmod(within, p)
    return chunk, group * p + offset


def interleaved_orders(instance: Instance) -> Orders:
    return [phases.ops() for phases in _phases(instance)]


def interleaved_overlap_orders(instance: Instance) -> StepOrders:
    return [phases.overlapped() for phases in _phases(instance)]


def megatron_sequences(instance: Instance, rank: int) -> tuple[list[OpKey], list[OpKey]]:
    """Rank `rank`'s forwards and its backwards, each in Megatron's group-of-p order."""
    p, v = instance.num_devices, instance.chunks
    forwards: list[OpKey] = []
    backwards: list[OpKey] = []
    for k in range(instance.num_microbatches * v):
        chunk, microbatch = _chunk_and_microbatch(k, p, v)
        forwards.append(OpKey(Kind.F, chunk * p + rank, microbatch))
        backwards.append(OpKey(Kind.B, (v - 1 - chunk) * p + rank, microbatch))
    return forwards, backwards


def _phases(instance: Instance) -> list[Phases]:
    p, v = instance.num_devices, instance.chunks
    total = instance.num_microbatches * v
    phases = []
    for rank in range(p):
        forwards, backwards = megatron_sequences(instance, rank)
        warmup = min(2 * (p - rank - 1) + (v - 1) * p, total)
        steady = [(forwards[warmup + k], backwards[k]) for k in range(total - warmup)]
        phases.append(Phases(forwards[:warmup], steady, backwards[total - warmup :]))
    return phases


def interleaved_requirement(instance: Instance) -> str | None:
    return first_unmet(instance, needs_interleaved, needs_microbatches_divisible_by_devices)
