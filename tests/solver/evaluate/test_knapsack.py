"""The knapsacks: each is an upper bound on what fits (exact where the search is small), checked by
enumeration."""

from __future__ import annotations

import itertools
import math
import random

import pytest

from pipesat.models import Tuning
from pipesat.solver.evaluate.knapsack import HeldSets, least_tail, max_count, max_total_time

DEFAULT = Tuning()


@pytest.mark.parametrize("enumerated", [True, False])
def test_least_tail_never_exceeds_the_least_over_every_held_set(enumerated: bool) -> None:
    """The tail term is a lower bound on min over H of max(window - work(H), -W(H)), by enumeration of
    every H: the forced items and at most `count` of each item, within the capacity. Where its held
    backwards are few enough to enumerate it is that least; beyond, the Lagrangian bound (forced here
    by allowing no enumeration) stays below it."""
    tuning = DEFAULT if enumerated else Tuning(exact_tail_nodes=0)
    rng = random.Random(5)
    for _ in range(300):
        items, forced = [], []
        for _ in range(rng.randint(1, 2)):
            backward, weight = rng.randint(1, 4) / 2, rng.randint(0, 2) / 2
            activation = rng.randint(1, 4) / 2
            items += [
                (backward + weight, weight, activation),
                (weight, weight, activation * rng.choice([0, 0.25, 0.5])),
            ]
            forced += [items[-2]] if rng.random() < 0.5 else []
        count, capacity, window = rng.randint(1, 3), rng.randint(1, 8) / 2, rng.randint(0, 20) / 2
        least = math.inf
        for numbers in itertools.product(range(count + 1), repeat=len(items)):
            chosen = forced + [item for n, item in zip(numbers, items, strict=True) for _ in range(n)]
            if sum(memory for _, _, memory in chosen) <= capacity:
                work, deferred = sum(item[0] for item in chosen), sum(item[1] for item in chosen)
                least = min(least, max(window - work, -deferred))
        if math.isfinite(least):
            tail = least_tail(
                HeldSets(items=items, forced=forced, count=count, capacity=capacity), window, tuning=tuning
            )
            assert tail == pytest.approx(least) if enumerated else tail <= least + 1e-9


def test_equal_items_are_one_item_of_their_summed_count() -> None:
    # The 8 equal chunks of an interleaved device, 32 microbatches each: searched as 8 items, the ways
    # to share 11 copies among them pass the node budget, and the search falls back to the fractional
    # bound (22.67); as one item of 256 copies the optimum is exact: 11 copies of weight 3 fit in 34.
    items = [(2.0, 3.0)] * 8
    assert max_total_time(items, 32, 34.0, tuning=DEFAULT) == pytest.approx(22.0)
    assert max_total_time([*items, (1.0, 1.0)], 32, 34.0, tuning=DEFAULT) == pytest.approx(33.0)
    # With no node to search (the tuning's `knapsack_nodes`), the fractional bound at once.
    assert max_total_time(items, 32, 34.0, tuning=Tuning(knapsack_nodes=0)) == pytest.approx(68 / 3)


def test_knapsack_helpers_match_enumeration() -> None:
    rng = random.Random(3)
    for _ in range(200):
        items = [(rng.randint(0, 5) / 2, rng.randint(0, 4) / 2) for _ in range(rng.randint(1, 3))]
        count, capacity = rng.randint(0, 3), rng.randint(0, 12) / 2
        best_time, best_count = 0.0, 0
        for numbers in itertools.product(range(count + 1), repeat=len(items)):
            if sum(n * w for n, (_, w) in zip(numbers, items, strict=True)) <= capacity:
                best_time = max(best_time, sum(n * t for n, (t, _) in zip(numbers, items, strict=True)))
                best_count = max(best_count, sum(numbers))
        assert max_total_time(items, count, capacity, tuning=DEFAULT) == pytest.approx(best_time)
        assert max_count([w for _, w in items], count, capacity) == best_count
        assert max_total_time(items, count, None, tuning=DEFAULT) == count * sum(t for t, _ in items)
