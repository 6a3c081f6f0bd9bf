"""Periodic starting schedules: microbatch j's ops at their chain offsets plus j periods, per device in order.

Every op (kind, stage, j) gets a nominal time `j * period + offset(kind, stage)`, with the offsets of
one microbatch alone (`solver.evaluate.device_bounds.chain_offsets`, each W right after its B); each device runs its
ops in nominal order. Along a dependency the nominal time never decreases (ties go by position in
the microbatch's chain), so the orders never deadlock. A device's peak memory depends only on its
order; a period longer than one microbatch's whole chain gives the one-at-a-time order, which fits
every feasible limit, and shorter periods put more microbatches in flight. The steady state is a
repeating block; under limits below the 1F1B peak, where the greedy heuristics fall back to nearly
one microbatch at a time, the right period keeps as many in flight as fit (ZB paper 1.5B, p = 8,
m = 32 at 0.5x: max span 2908 against ZB-auto's 6139). On a bidirectional placement each way's
microbatches take their own route's offsets, fed in turn from the two ends (`j` counts both ways).
"""

from __future__ import annotations

import math
import time

from pipesat.models import Instance, Kind, OpKey, Schedule, op_duration
from pipesat.solver.evaluate.device_bounds import chain_offsets, zero_bubble_bound
from pipesat.solver.evaluate.metrics import compute_metrics
from pipesat.solver.evaluate.simulator import simulate

NAME = "periodic"
# Periods tried: geometric from SHORTEST x the zero-bubble period to one microbatch's whole chain.
GRID = 40
SHORTEST = 0.3


def periodic_orders(instance: Instance, split: bool, period: float) -> list[list[OpKey]]:
    """Per-device orders by nominal time `j * period + offset` (see the module notes)."""
    offsets = chain_offsets(instance, split)
    num_stages = instance.num_stages
    rank = {(Kind.F, s): s for s in range(num_stages)}
    rank |= {(Kind.B, s): 2 * num_stages - 1 - s for s in range(num_stages)}
    rank |= {(Kind.W, s): 2 * num_stages + s for s in range(num_stages)}
    keys = [OpKey(kind, stage, j) for (kind, stage) in offsets for j in instance.microbatches_at(stage)]

    half = instance.num_microbatches // 2

    def nominal(key: OpKey) -> tuple[float, int, int]:
        # A bidirectional placement is fed both ways in turn (microbatches 0, half, 1, half + 1, ...),
        # so the longest period still runs one microbatch at a time.
        j = key.microbatch
        i = (2 * j if j < half else 2 * (j - half) + 1) if instance.bidirectional else j
        return i * period + offsets[key.kind, key.stage], rank[key.kind, key.stage], j

    keys.sort(key=nominal)
    orders: list[list[OpKey]] = [[] for _ in range(instance.num_devices)]
    for key in keys:
        orders[instance.placement[key.stage]].append(key)
    return orders


def periodic_schedule(instance: Instance, split: bool, deadline: float | None = None) -> Schedule:
    """The periodic schedule of least makespan among the periods tried that fits the memory limit.

    Periods are tried from the longest (one at a time, which fits every feasible limit) down, until
    `deadline` (a `time.monotonic()`) passes. When nothing fits (a limit below the smallest feasible
    one) the one-at-a-time schedule comes back, for the caller's validation to refuse.
    """
    offsets = chain_offsets(instance, split)
    chain = max(offset + op_duration(instance, kind, stage, split) for (kind, stage), offset in offsets.items())
    # Past the chain (a zero-length last W included), microbatch j + 1 sorts after all of j.
    chain = chain * (1 + 1e-6) + 1e-6
    shortest = SHORTEST * zero_bubble_bound(instance, split) / instance.num_microbatches
    best: Schedule | None = None
    longest: Schedule | None = None
    best_makespan = math.inf
    for step in range(GRID):
        period = chain * (shortest / chain) ** (step / (GRID - 1))
        schedule = simulate(instance, periodic_orders(instance, split, period), NAME)
        if longest is None:
            longest = schedule
        metrics = compute_metrics(schedule)
        if not instance.over_limit(metrics.peak_memory) and metrics.makespan < best_makespan:
            best, best_makespan = schedule, metrics.makespan
        if deadline is not None and time.monotonic() >= deadline:
            break
    result = best if best is not None else longest
    assert result is not None  # GRID >= 1
    return result
