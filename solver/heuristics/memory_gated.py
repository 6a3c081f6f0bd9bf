"""A starting schedule for 1F1B and interleaved pipelines under a memory limit: their op sequences, gated by memory.

Megatron's interleaved 1F1B keeps `2(p - r - 1) + (v - 1)p` forwards in flight on rank r before its
first backward, whatever the memory; below that peak its fixed order cannot run, and fewer warm-up
forwards in the same order stall every steady-state step (measured on Llama 3 405B's layout:
benchmarks/experiments/2026-11-25_memory-gated-start). Here each rank keeps Megatron's sequence of
forwards and its sequence of backwards (on a linear pipeline, with one chunk, 1F1B's: microbatches
in order) but not their interleaving: a list
scheduler, in time order, lets each rank run its next backward as soon as it can, and otherwise its
next forward as soon as it can when its activations fit the limit. A rank whose next forward does
not fit waits for a backward (or a W) to free memory. When no rank can go on (a limit so tight that
a forward the next backward needs never fits) there is no such schedule. Its times follow the
simulator's as-soon-as-possible rule; the schedule that leaves it is timed by the simulator.

The variants (`Gate`, `GATES`) differ in when a W runs (right after its B, or deferred until its
rank has nothing else to start as early) and in a cap on the forwards a rank holds. Deferring W
keeps a weight's memory longer but lets the next forward or backward, which another rank may wait
on, go first; below the 1F1B peak that is usually the better trade (`GATES`' measurements).

On that 405B layout (`bench_cost_model`'s instance) it fits budgets below the peak Megatron's order
needs, and runs faster than the periodic start there
(benchmarks/experiments/2026-11-25_memory-gated-start). It is not better everywhere (it runs
backwards eagerly, which can delay a forward another rank waits on), so the solver takes it as one
more start.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

from pipesat.models import Instance, Kind, OpKey, Schedule, op_duration
from pipesat.models.ops import input_ready, memory_change
from pipesat.models.placement import placement_devices
from pipesat.models.tolerance import fits
from pipesat.solver.evaluate.simulator import simulate
from pipesat.solver.heuristics.interleaved import interleaved_requirement, megatron_sequences

NAME = "memory-gated"

# At equal start times on a rank: its next B first, then its next F; a W before both when it runs
# right after its B, after both when it is deferred.
_WEIGHT_FIRST, _BACKWARD, _FORWARD, _WEIGHT_LAST = range(4)


@dataclass(frozen=True)
class Gate:
    """One variant of the gated list scheduler.

    `defer_weights`: each W waits until its rank has nothing else to start as early (a forward that
    does not fit waits for it); otherwise it runs right after its B. `extra_in_flight`: each rank
    keeps at most the handwritten order's forwards in flight (1F1B's p - r, Megatron's warm-up + 1)
    plus this many; None: as many as fit.
    """

    defer_weights: bool
    extra_in_flight: int | None


GATES = (Gate(False, None), *(Gate(True, extra) for extra in (None, 0, 1, 2)))
"""The variants the solver starts from; the best of them counts, because no one variant is best
everywhere. Deferring W wins most often, and below the 1F1B peak a search moves slowly from its
start, so a better start is a better result (`benchmarks/bench_memory_gated.py`; the figures:
benchmarks/experiments/2026-11-25_memory-gated-start)."""


def memory_gated_schedule(instance: Instance, split: bool, gate: Gate = GATES[0]) -> Schedule | None:
    """The memory-gated schedule (module notes) of one variant, or None: neither a linear pipeline nor
    an interleaved one Megatron's order serves, or no rank can go on under the limit."""
    linear = instance.placement == placement_devices("linear", instance.num_devices, 1)
    if instance.bidirectional or (not linear and interleaved_requirement(instance) is not None):
        return None
    orders = _gated_orders(instance, split, gate)
    return None if orders is None else simulate(instance, orders, NAME)


def memory_gated_schedules(instance: Instance, split: bool) -> list[Schedule]:
    """The memory-gated schedule of each variant in `GATES` that has one (without W ops, those that
    differ only in when a W runs are one)."""
    gates = GATES if split else dict.fromkeys(Gate(False, gate.extra_in_flight) for gate in GATES)
    found = (memory_gated_schedule(instance, split, gate) for gate in gates)
    return [schedule for schedule in found if schedule is not None]


def _handwritten_in_flight(instance: Instance, rank: int) -> int:
    """The most forwards rank `rank` holds in 1F1B's order (one chunk) or Megatron's (its warm-up + 1)."""
    p, v = instance.num_devices, instance.chunks
    warmup = p - rank - 1 if v == 1 else 2 * (p - rank - 1) + (v - 1) * p
    return min(warmup + 1, instance.num_microbatches * v)


def _gated_orders(instance: Instance, split: bool, gate: Gate) -> list[list[OpKey]] | None:
    p = instance.num_devices
    limits = instance.memory_limit or (math.inf,) * p
    sequences = [megatron_sequences(instance, rank) for rank in range(p)]
    caps = [
        math.inf if gate.extra_in_flight is None else _handwritten_in_flight(instance, rank) + gate.extra_in_flight
        for rank in range(p)
    ]
    weight_priority = _WEIGHT_LAST if gate.defer_weights else _WEIGHT_FIRST
    done = [[0, 0] for _ in range(p)]  # forwards and backwards each rank has run
    weights: list[deque[OpKey]] = [deque() for _ in range(p)]  # each rank's W ops whose B has run
    held = [0.0] * p
    free_at = [0.0] * p
    end: dict[OpKey, float] = {}
    orders: list[list[OpKey]] = [[] for _ in range(p)]

    backwards_total = sum(len(backwards) for _, backwards in sequences)
    for _ in range(2 * backwards_total + (backwards_total if split else 0)):
        chosen: tuple[float, int, int, OpKey] | None = None  # start, priority, rank, op
        for rank, (forwards, backwards) in enumerate(sequences):
            ran_forwards, ran_backwards = done[rank]
            options = []
            if ran_backwards < len(backwards):
                options.append((_BACKWARD, backwards[ran_backwards]))
            if ran_forwards < len(forwards) and ran_forwards - ran_backwards < caps[rank]:
                forward = forwards[ran_forwards]
                if fits(held[rank] + instance.activation_memory[forward.stage], limits[rank]):
                    options.append((_FORWARD, forward))
            if weights[rank]:
                options.append((weight_priority, weights[rank][0]))
            for priority, key in options:
                at = input_ready(key, instance, end)
                if at is not None and (chosen is None or (max(free_at[rank], at), priority, rank) < chosen[:3]):
                    chosen = (max(free_at[rank], at), priority, rank, key)
        if chosen is None:
            return None
        start, _, rank, key = chosen
        end[key] = free_at[rank] = start + op_duration(instance, key.kind, key.stage, split)
        held[rank] += memory_change(instance, key.kind, key.stage, split)
        orders[rank].append(key)
        if key.kind == Kind.W:
            weights[rank].popleft()
        else:
            done[rank][key.kind == Kind.B] += 1
        if key.kind == Kind.B and split:
            weights[rank].append(OpKey(Kind.W, key.stage, key.microbatch))
    return orders
