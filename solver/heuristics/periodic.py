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
from collections.abc import Sequence

from pipesat.models import Instance, Kind, OpKey, Schedule, op_duration
from pipesat.models.ops import memory_change
from pipesat.solver.evaluate.device_bounds import chain_offsets, zero_bubble_bound
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


def periodic_schedule(instance: Instance, split: bool) -> Schedule:
    """The periodic schedule of least makespan among the periods tried that fits the memory limit.

    Every period of the grid is tried, so the schedule depends on the instance alone (never on the
    time a solve has). An order whose peak memory is over the limit is dropped before it is timed
    (`order_peaks`), so the grid costs little more than the orders that fit. When nothing fits (a
    limit below the smallest feasible one) the one-at-a-time schedule comes back, for the caller's
    validation to refuse.
    """
    best: Schedule | None = None
    longest: Schedule | None = None
    best_makespan = math.inf
    for step, period in enumerate(grid_periods(instance, split)):
        orders = periodic_orders(instance, split, period)
        fits = not instance.over_limit(order_peaks(instance, split, orders))
        if step > 0 and not fits:
            continue
        schedule = simulate(instance, orders, NAME)
        longest = longest or schedule
        makespan = max(op.end for op in schedule.ops) - min(op.start for op in schedule.ops)
        if fits and makespan < best_makespan:
            best, best_makespan = schedule, makespan
    result = best or longest
    assert result is not None  # GRID >= 1
    return result


def grid_periods(instance: Instance, split: bool) -> list[float]:
    """The periods tried, longest first: geometric from one microbatch's whole chain down to
    SHORTEST x the zero-bubble period, GRID of them."""
    offsets = chain_offsets(instance, split)
    chain = max(offset + op_duration(instance, kind, stage, split) for (kind, stage), offset in offsets.items())
    # Past the chain (a zero-length last W included), microbatch j + 1 sorts after all of j.
    chain = chain * (1 + 1e-6) + 1e-6
    shortest = SHORTEST * zero_bubble_bound(instance, split) / instance.num_microbatches
    return [chain * (shortest / chain) ** (step / (GRID - 1)) for step in range(GRID)]


def order_peaks(instance: Instance, split: bool, orders: Sequence[Sequence[OpKey]]) -> list[float]:
    """Each device's peak memory when it runs its ops in `orders`: one device runs one op at a time,
    so its memory over time follows its order alone (`models.ops.memory_change`; a free at an op's end
    comes before the next op's allocation)."""
    peaks = []
    for order in orders:
        held = peak = 0.0
        for key in order:
            held += memory_change(instance, key.kind, key.stage, split)
            peak = max(peak, held)
        peaks.append(peak)
    return peaks
