"""Block-optimal: the V schedule of the best building block under the instance's memory limit.

`block_model.find_block` searches one block exactly (CP-SAT: the least repeat interval T, then the
shortest block, whose steady-state memory fits the limit). The full schedule unrolls it: microbatch
j's ops at j * T + their offsets, each device's ops sorted by that start into its order, and the one
simulator times the orders as soon as possible, so the warm-up and the cool-down pack themselves
from the order.

Timing an order as soon as possible cannot raise its peak: a device's held memory at each F's start
is the sum of what the ops before it in the order allocated and freed, whatever their times, and in
the unrolled block no more than ceil(lifespan / T) microbatches of a stage are alive at once, the
model's bound. The simulated peak is checked against the limit all the same.
"""

from __future__ import annotations

import functools

from pipesat.models import Instance, Kind, OpKey
from pipesat.models.units import memory_text
from pipesat.solver.evaluate.metrics import compute_metrics
from pipesat.solver.evaluate.simulator import simulate
from pipesat.solver.heuristics.block_model import DEFAULT_TIME_LIMIT, GOALS, Block, find_block
from pipesat.solver.heuristics.cool_down import pack_cool_down
from pipesat.solver.heuristics.heuristic import NotApplicable, Orders
from pipesat.solver.heuristics.priority_list import priority_orders
from pipesat.solver.heuristics.v_blocks import limit_budget
from pipesat.solver.heuristics.v_schedules import v_requirement

_KIND_RANK = {Kind.F: 0, Kind.B: 1, Kind.W: 2}
MOST_DEVICES = 4
"""Beyond this many devices the block search, in its fraction of a second, finds blocks far slower
than V-Min's (F/B/W 2/3/1 a chunk at V-Min's peak: p = 8, 809.8 against 341.8; p = 16, 5,313.8
against 742.2), so the family leaves them to the others."""


def block_optimal_requirement(instance: Instance) -> str | None:
    """A V placement with a split backward, on at most `MOST_DEVICES` devices."""
    unmet = v_requirement(instance)
    if unmet is None and instance.num_devices > MOST_DEVICES:
        return f"needs at most {MOST_DEVICES} devices (its block search finds slow blocks beyond)"
    return unmet


def unrolled_orders(instance: Instance, block: Block) -> Orders:
    """Per-device orders of `block` repeated for each microbatch, by start (ties by end, then kind and
    stage along the microbatch's chain: only zero-length ops tie)."""
    rows: list[list[tuple[int, int, int, int, OpKey]]] = [[] for _ in range(instance.num_devices)]
    stages = instance.num_stages
    for (kind, stage), tick in block.ticks.items():
        device = instance.placement[stage]
        along = stage if kind == Kind.F else stages - 1 - stage
        for j in range(instance.num_microbatches):
            start = j * block.period + tick
            rows[device].append((start, _KIND_RANK[kind], along, j, OpKey(kind, stage, j)))
    return [[row[-1] for row in sorted(device_rows)] for device_rows in rows]


@functools.lru_cache(maxsize=8)
def candidate_blocks(instance: Instance, time_limit: float, workers: int, seed: int) -> tuple[Block, ...]:
    """The blocks under the instance's limit (its 1F1B peak without one) with the least interval and with
    the earliest unrolled end for its microbatches, each searched for `time_limit` seconds. Cached:
    compare, the plan and the solver's starts may ask for the same instance's blocks more than once."""
    limits = limit_budget(instance)
    found = (find_block(instance, limits, time_limit, workers, seed, goal) for goal in GOALS)
    return tuple(block for block in found if block is not None)


def block_optimal_orders(
    instance: Instance, time_limit: float = DEFAULT_TIME_LIMIT, workers: int = 1, seed: int = 0
) -> Orders:
    """The orders of the best block under the instance's memory limit (see the module notes): of the
    candidate blocks, each unrolled as it is, with its cool-down packed (`cool_down`) and as the list
    schedule of its order (`priority_list`), the one whose timed schedule fits the limit and ends
    first (then has the least max span).

    Raises `NotApplicable` when no block fits the limit within `time_limit` seconds, or (a rounding
    guard) when no timed schedule's peak fits it.
    """
    limits = limit_budget(instance)
    unlimited, limited = instance.with_limit(None), instance.with_limit(list(limits))
    timed = []
    for block in candidate_blocks(instance, time_limit, workers, seed):
        unrolled = unrolled_orders(instance, block)
        for orders in (unrolled, pack_cool_down(unlimited, unrolled), priority_orders(unlimited, unrolled)):
            metrics = compute_metrics(simulate(unlimited, orders))
            timed.append((metrics.makespan, metrics.max_span, limited.over_limit(metrics.peak_memory), orders))
    if not timed:
        least = memory_text(max(limits), instance.memory_unit)
        raise NotApplicable(f"Block-optimal: no building block found within {least} a device in {time_limit:g} s")
    fitting = [row for row in timed if not row[2]]
    if not fitting:
        raise NotApplicable(f"Block-optimal: every unrolled block holds more than the limit on device {timed[0][2][0]}")
    return min(fitting, key=lambda row: row[:2])[3]
