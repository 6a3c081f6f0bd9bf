"""Controllable-memory V schedules: the best building block under a memory budget.

The Controllable Memory paper builds V schedules from a building block: where, in a cycle of six
slots, each device runs microbatch k's F (chunk 0), f (chunk 1), B (chunk 1's backward) and b
(chunk 0's backward). Device 0's block puts F in slot 0 and f, B, b in three other slots; device d+1's
is device d's shifted by [k, -1, k, -1] slots (F, f, B, b), with one shift k for the first devices and
another, no larger, for the rest. How far apart the slots are decides how long a microbatch's
activations stay on a device, so each block has its peak memory, and the search keeps the fastest
block whose peak fits the budget. V-Min and V-Half are the searches at the paper's budgets of
⌊(p+4)/3⌋ and ⌊(p+2)/2⌋ microbatches of a device's activations; `v-auto` searches at the instance's
memory limit (1x without one).

Each block is made into per-device orders by the slot construction of `solver.heuristics.v_schedules`
(absolute slots: each op in the first slot of its residue after the op it waits for; Ws first in,
first out into free slots; the squeeze; the cool-down pass) and timed by the one simulator with the
instance's real times and p2p. Blocks are ranked on the instance cut to p microbatches (the warm-up
and cool-down, where blocks differ, are all there), and the best few are timed again on all m.
V-Min's and V-Half's fixed blocks (`v_min_offsets`, `v_half_offsets`) are always among the
candidates, so the search is never worse than them.

Shifts of a second phase are tried after a quarter, half and three quarters of the devices (and
after the first and before the last), not after every device: that keeps the search to a few
hundred blocks at p = 16. With the paper's setting (F/B/W = 2/3/1 a chunk, p2p 0.1) it gives
V-Half 220.2 at p = 4, m = 16, the published value.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Iterator, Sequence

from pipesat.models import Instance
from pipesat.models.tolerance import fits
from pipesat.solver.evaluate.bounds import minimum_memory_limit
from pipesat.solver.evaluate.metrics import compute_metrics
from pipesat.solver.evaluate.simulator import simulate
from pipesat.solver.heuristics.heuristic import Orders
from pipesat.solver.heuristics.v_schedules import CYCLE, Offsets, slot_orders, v_half_offsets, v_min_offsets

# Blocks timed again on all microbatches after the ranking on p of them.
FINALISTS = 5
Block = tuple[Offsets, ...]
"""Microbatch 0's absolute slots (F, f, B, b) on each device."""


def v_min_budget(instance: Instance) -> tuple[float, ...]:
    """⌊(p+4)/3⌋ microbatches of a device's activations (the heaviest device's), on every device."""
    return ((instance.num_devices + 4) // 3 * minimum_memory_limit(instance),) * instance.num_devices


def v_half_budget(instance: Instance) -> tuple[float, ...]:
    """⌊(p+2)/2⌋ microbatches of a device's activations (the heaviest device's), on every device."""
    return ((instance.num_devices + 2) // 2 * minimum_memory_limit(instance),) * instance.num_devices


def limit_budget(instance: Instance) -> tuple[float, ...]:
    """The instance's memory limits, or the 1F1B peak on every device without them."""
    return instance.memory_limit or (instance.one_f_one_b_peak(),) * instance.num_devices


def block_orders(instance: Instance, budget: Sequence[float]) -> Orders:
    """The per-device orders of the fastest block whose peak memory fits `budget` (one per device; see the
    module notes); when none does, of the block with the least peak."""
    unlimited = instance.with_limit(None)
    best: tuple[float, Orders] | None = None
    finalists = 0
    for _, peaks, block in _ranked_blocks(unlimited):
        if not _within(peaks, budget):
            continue
        orders = _orders(unlimited, block)
        metrics = compute_metrics(simulate(unlimited, orders))
        if not _within(metrics.peak_memory, budget):
            continue
        if best is None or metrics.max_span < best[0]:
            best = (metrics.max_span, orders)
        finalists += 1
        if finalists == FINALISTS:
            break
    if best is None:  # no block fits: the one that holds the least (the caller judges it against its limit)
        _, _, block = min(_ranked_blocks(unlimited), key=lambda row: (max(row[1]), row[0]))
        return _orders(unlimited, block)
    return best[1]


def _within(peaks: Sequence[float], budget: Sequence[float]) -> bool:
    return all(fits(peak, limit) for peak, limit in zip(peaks, budget, strict=True))


def v_min_orders(instance: Instance) -> Orders:
    return block_orders(instance, v_min_budget(instance))


def v_half_orders(instance: Instance) -> Orders:
    return block_orders(instance, v_half_budget(instance))


def v_auto_orders(instance: Instance) -> Orders:
    return block_orders(instance, limit_budget(instance))


@functools.lru_cache(maxsize=8)
def _ranked_blocks(instance: Instance) -> tuple[tuple[float, tuple[float, ...], Block], ...]:
    """(max span, per-device peak memory, block) of every candidate block on the instance cut to p microbatches,
    by span (then the order of `candidate_blocks`). Cached: V-Min, V-Half and v-auto share it."""
    p = instance.num_devices
    cut = instance.with_changes(num_microbatches=min(p, instance.num_microbatches))
    rows = []
    for index, block in enumerate(candidate_blocks(p)):
        metrics = compute_metrics(simulate(cut, _orders(cut, block)))
        rows.append((metrics.max_span, index, metrics.peak_memory, block))
    rows.sort()
    return tuple((span, peak, block) for span, _, peak, block in rows)


def _orders(instance: Instance, block: Block) -> Orders:
    return slot_orders(instance, lambda p, device: block[device])


def candidate_blocks(p: int) -> list[Block]:
    """The distinct blocks of the family (see the module notes), V-Min's and V-Half's first."""
    fixed = [tuple(v_min_offsets(p, d) for d in range(p)), tuple(v_half_offsets(p, d) for d in range(p))]
    seen = dict.fromkeys(fixed)
    for residues in _residue_blocks(p):
        seen.setdefault(_absolute(residues))
    return list(seen)


def _residue_blocks(p: int) -> Iterator[list[Offsets]]:
    """Each device's slots modulo the cycle, for every device-0 pattern and pair of shifts."""
    switches = sorted({1, max(1, p // 4), max(1, p // 2), max(1, 3 * p // 4), max(1, p - 1)})
    for f, b_first, b_second in itertools.combinations(range(1, CYCLE), 3):
        for first in range(1, CYCLE):
            for second in range(1, first + 1):
                for switch in switches if second < first else [p - 1]:
                    rows = [(0, f, b_first, b_second)]
                    for device in range(p - 1):
                        shift = first if device < switch else second
                        f0, f1, b1, b0 = rows[-1]
                        rows.append(((f0 + shift) % CYCLE, (f1 - 1) % CYCLE, (b1 + shift) % CYCLE, (b0 - 1) % CYCLE))
                    if all(len(set(row)) == 4 for row in rows):
                        yield rows


def _absolute(residues: list[Offsets]) -> Block:
    """Absolute slots: along one microbatch's chain (F down the devices, f up, B down, b up), each op in
    the first slot of its residue after the op it waits for."""
    p = len(residues)
    chain = [(0, d) for d in range(p)] + [(1, d) for d in reversed(range(p))]
    chain += [(2, d) for d in range(p)] + [(3, d) for d in reversed(range(p))]
    slots = [[0] * 4 for _ in range(p)]
    previous = -1
    for kind, device in chain:
        slot = previous + 1 + (residues[device][kind] - previous - 1) % CYCLE
        slots[device][kind] = previous = slot
    return tuple((f0, f1, b1, b0) for f0, f1, b1, b0 in slots)
