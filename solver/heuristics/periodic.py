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

from collections.abc import Sequence

from pipesat.models import Instance, Kind, OpKey, Schedule, op_duration
from pipesat.models.ops import memory_change
from pipesat.solver.evaluate.device_bounds import chain_offsets, zero_bubble_bound
from pipesat.solver.evaluate.metrics import makespan
from pipesat.solver.evaluate.simulator import simulate

NAME = "periodic"
# Periods tried: geometric from SHORTEST x the zero-bubble period to one microbatch's whole chain.
GRID = 40
SHORTEST = 0.3
# Periods tried between the best grid period's two neighbours.
REFINE = 20


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

    Every period of the grid is tried, then REFINE more between the best one's two neighbours (the
    makespan is far from smooth in the period: on the 14B interleaved instance at 0.5x, 9,692 ms on
    the grid and 9,568 ms between its points, instances/tight). The periods depend on the instance
    alone, so the start is the same whatever the time a solve has. An order whose peak memory is
    over the limit is dropped before it is timed (`order_peaks`), so the periods cost little more
    than the orders that fit. When nothing fits (a limit below the smallest feasible one) the
    one-at-a-time schedule (the longest period's) comes back, for the caller's validation to refuse.
    """
    grid = grid_periods(instance, split)
    found = _best_period(instance, split, grid)
    if found is None:
        return simulate(instance, periodic_orders(instance, split, grid[0]), NAME)
    step, schedule, length = found
    longer, shorter = grid[max(step - 1, 0)], grid[min(step + 1, GRID - 1)]
    between = [longer * (shorter / longer) ** ((k + 1) / (REFINE + 1)) for k in range(REFINE)]
    refined = _best_period(instance, split, between)
    if refined is not None and refined[2] < length:
        schedule = refined[1]
    return schedule


def _best_period(instance: Instance, split: bool, periods: Sequence[float]) -> tuple[int, Schedule, float] | None:
    """Of the `periods` whose orders fit the memory limit, the one of least makespan: its index, its
    schedule and its makespan (the first of equal ones); None when none fits."""
    best: tuple[int, Schedule, float] | None = None
    for step, period in enumerate(periods):
        orders = periodic_orders(instance, split, period)
        if instance.over_limit(order_peaks(instance, split, orders)):
            continue
        schedule = simulate(instance, orders, NAME)
        length = makespan(schedule)
        if best is None or length < best[2]:
            best = (step, schedule, length)
    return best


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
