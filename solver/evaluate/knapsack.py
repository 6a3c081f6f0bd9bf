"""Knapsacks over the ops a device may run or hold at once within its memory limit, free of any Instance.

The bounds of `bounds` and `device_bounds` ask how much work fits in a device's memory: the most time
of ops chosen with at most a count of each kind (`max_total_time`, a bounded knapsack solved by branch
and bound, or its fractional bound), the most ops (`max_count`), the most time of microbatches that
each run a prefix of a device's stages (`microbatch_work`), and the tail term over the sets of held
work (`least_tail`, docs/bounds.md, "Up to a device's last B"). Every answer is an upper bound on what
fits (exact where the search is small), which is all a lower bound needs. How far the searches go
before they fall back to their weaker bounds is the tuning's (`Tuning.knapsack_nodes`,
`Tuning.exact_tail_nodes`): the node limit keeps a plan's bounds fast
(benchmarks/experiments/2026-11-29_spaced-forwards), and the enumerated tail raises the bounds of
devices with several stages (benchmarks/experiments/2026-11-29_per-microbatch-bounds).
"""

from __future__ import annotations

import functools
import itertools
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from pipesat.models.tuning import Tuning

Item = tuple[float, float]
"""A kind of op in a knapsack: (its time, its memory weight)."""
HeldItem = tuple[float, float, float]
"""What a microbatch of a stage held by a device has left to run: (its time, the W time in it, the memory held)."""


def max_count(weights: Sequence[float], count: int, capacity: float | None) -> int:
    """The most items (at most `count` of each weight) whose weights fit in `capacity` together."""
    if capacity is None:
        return count * len(weights)
    total = 0
    for weight in sorted(weights):
        fits = count if weight <= 0 else min(count, floor_fit(capacity, weight))
        total += fits
        capacity -= fits * weight
    return total


def max_total_time(
    items: Sequence[Item], count: int, capacity: float | None, exact: bool = True, *, tuning: Tuning
) -> float:
    """An upper bound (exact when the search is small) on the total time of ops chosen with at most
    `count` of each item and total memory weight at most `capacity` (None: no limit); with `exact`
    False, the fractional bound (the linear relaxation) without a search."""
    if capacity is None:
        return count * sum(time for time, _ in items)
    free = count * sum(time for time, weight in items if weight <= 0)
    # Equal items (the equal stages of an interleaved pipeline) are one item of their summed count:
    # the same optimum, searched over far fewer nodes.
    copies = Counter(item for item in items if item[1] > 0 and item[0] > 0)
    weighted = sorted(
        ((time, weight, count * number) for (time, weight), number in copies.items()),
        key=lambda item: item[0] / item[1],
        reverse=True,
    )
    return free + (_knapsack(weighted, capacity, tuning.knapsack_nodes) if exact else _fractional(weighted, capacity))


def _fractional(items: Sequence[tuple[float, float, int]], room: float) -> float:
    """The fractional knapsack of (time, weight, count) items sorted by time per weight: an upper bound
    on the bounded knapsack."""
    total = 0.0
    for time, weight, count in items:
        take = max(0.0, min(count, room / weight))
        total += take * time
        room -= take * weight
        if room <= 0:
            break
    return total


def _knapsack(items: list[tuple[float, float, int]], capacity: float, most_nodes: int) -> float:
    """Bounded knapsack by branch and bound over (time, weight, count) items sorted by time per weight.

    Returns the optimum, or the fractional bound when the search exceeds `most_nodes` (both are
    upper bounds on what the ops can fill, which is all the lower bounds need).
    """
    best = 0.0
    nodes = 0

    def visit(i: int, room: float, value: float) -> None:
        nonlocal best, nodes
        nodes += 1
        if i == len(items):
            best = max(best, value)
            return
        if nodes > most_nodes or value + _fractional(items[i:], room) <= best:
            return
        time, weight, count = items[i]
        for n in range(min(count, floor_fit(room, weight)), -1, -1):
            visit(i + 1, room - n * weight, value + n * time)

    visit(0, capacity, 0.0)
    return best if nodes <= most_nodes else _fractional(items, capacity)


def floor_fit(capacity: float, weight: float) -> int:
    """How many items of `weight` fit in `capacity`, rounding a hair up (sound for upper bounds)."""
    return max(0, math.floor(capacity / weight * (1 + 1e-12) + 1e-12))


def microbatch_work(prefixes: list[Item], count: int, capacity: float | None, *, tuning: Tuning) -> float:
    """The most time of at most `count` microbatches that each run one of the `prefixes` (time, memory
    of a device's first stages on the route) and fit in `capacity` together: exact by enumeration, or
    past `Tuning.knapsack_nodes` the knapsack that allows `count` of each prefix (an upper bound too)."""
    longest = max(time for time, _ in prefixes)
    if capacity is None or all(memory <= 0 for _, memory in prefixes):
        return count * longest
    # Longest first, so that good totals come early; a branch is cut where even `left` of the longest,
    # or its room filled at the best time per memory of what is left, cannot beat the best.
    items = sorted(prefixes, reverse=True)
    densest = [max(time / memory if memory > 0 else math.inf for time, memory in items[i:]) for i in range(len(items))]
    best, nodes, most_nodes = 0.0, 0, tuning.knapsack_nodes

    def visit(i: int, left: int, room: float, value: float) -> None:
        nonlocal best, nodes
        nodes += 1
        best = max(best, value)
        if i == len(items) or left == 0 or nodes > most_nodes:
            return
        if value + min(left * longest, room * densest[i]) <= best:
            return
        time, memory = items[i]
        most = left if memory <= 0 else min(left, floor_fit(room, memory))
        for n in range(most, -1, -1):
            visit(i + 1, left - n, room - n * memory, value + n * time)

    visit(0, count, capacity, 0.0)
    return best if nodes <= most_nodes else max_total_time(prefixes, count, capacity, tuning=tuning)


@dataclass(frozen=True, kw_only=True)
class HeldSets:
    """The sets H of items a device may hold at once: all of `forced` and at most `count` of each of
    `items`, within `capacity` (None: no limit). The tail term (`least_tail`) is a least over them, and
    `held_work` the most they can hold."""

    items: list[HeldItem]
    forced: list[HeldItem]
    count: int
    capacity: float | None


def least_tail(held: HeldSets, window: float, *, tuning: Tuning) -> float:
    """A lower bound on the least, over the `held` sets H, of max(window - work(H), -W time(H))
    (`until_last_backward`).

    For every weight l in [0, 1] the maximum is at least l·(window - work) - (1 - l)·W time, whose least
    over H is at least l·window less the knapsack of l·work + (1 - l)·W time: a bound for each l. With
    the fractional knapsack it is linear in l wherever the items keep their order of value per
    memory, so its best l is 0, 1 or an l where two items swap places; the exact knapsack there (and
    at both ends) can only raise it. Where the items holding a B have at most `Tuning.exact_tail_nodes`
    combinations within the capacity, the least itself (`enumerated_least_tail`).
    """

    least = enumerated_least_tail(held, window, tuning=tuning)
    if least is not None:
        return least

    def at(weight: float, exact: bool) -> float:
        return weight * window - held_work(held, weight, exact, tuning=tuning)

    swaps = {0.0, 1.0}
    for (work, deferred, memory), (other_work, other_deferred, other_memory) in itertools.combinations(
        sorted(set(held.items)), 2
    ):
        if memory > 0 and other_memory > 0:
            # (deferred + l·(work - deferred)) / memory equals the same of the other item.
            slope = (work - deferred) / memory - (other_work - other_deferred) / other_memory
            if slope != 0:
                weight = (other_deferred / other_memory - deferred / memory) / slope
                if 0 < weight < 1:
                    swaps.add(weight)
    best = max(sorted(swaps), key=lambda weight: at(weight, exact=False))
    return max(at(weight, exact=True) for weight in {0.0, best, 1.0})


def enumerated_least_tail(held: HeldSets, window: float, *, tuning: Tuning) -> float | None:
    """The least over the `held` sets H of max(window - work(H), -W time(H)) (`least_tail`) exactly, by
    enumerating how many of each item holding a B H takes: the rest of the room goes to the items that
    are a W alone, whose work is their W time, so the more of their time the lower both terms (their
    knapsack). None without a limit, when the forced items do not fit, or past `Tuning.exact_tail_nodes`."""
    if held.capacity is None:
        return None
    items, forced, count = held.items, held.forced, held.count
    room = held.capacity - sum(memory for _, _, memory in forced)
    backwards = sorted(Counter(item for item in items if item[0] > item[1]).items())
    weights = [(work, memory) for work, deferred, memory in items if work == deferred]
    # Of an item holding no memory H takes all: it adds to both its work and its W time; so of every
    # item when all of them fit.
    everything = sum(count * copies * memory for (_, _, memory), copies in backwards)
    fits_all = everything + count * sum(memory for _, memory in weights) <= room
    numbers = [
        [count * copies] if memory <= 0 or fits_all else range(min(count * copies, floor_fit(room, memory)) + 1)
        for (_, _, memory), copies in backwards
    ]
    if room < 0 or math.prod(len(choices) for choices in numbers) > tuning.exact_tail_nodes:
        return None
    base_work, base_deferred = sum(item[0] for item in forced), sum(item[1] for item in forced)
    filled = functools.cache(lambda left: max_total_time(weights, count, left, tuning=tuning))  # few distinct rooms
    least = math.inf
    for chosen in itertools.product(*numbers):
        work, deferred, left = base_work, base_deferred, room
        for n, ((item_work, item_deferred, memory), _) in zip(chosen, backwards, strict=True):
            work, deferred, left = work + n * item_work, deferred + n * item_deferred, left - n * memory
        if left >= 0:
            least = min(least, max(window - work - filled(left), -(deferred + filled(left))))
    return least


def held_work(held: HeldSets, weight: float, exact: bool = True, *, tuning: Tuning) -> float:
    """The most blended time (weight·work + (1 - weight)·W time) of any of the `held` sets (an upper
    bound; `max_total_time`)."""

    def blended(item: HeldItem) -> float:
        work, deferred, _ = item
        return weight * work + (1 - weight) * deferred

    room = None if held.capacity is None else held.capacity - sum(memory for _, _, memory in held.forced)
    chosen = [(blended(item), item[2]) for item in held.items]
    return sum(blended(item) for item in held.forced) + max_total_time(chosen, held.count, room, exact, tuning=tuning)
