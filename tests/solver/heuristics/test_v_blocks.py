"""Controllable-memory V: the building-block search under a budget, never worse than the fixed blocks."""

from __future__ import annotations

import itertools

import pytest

from pipesat.solver.evaluate.metrics import compute_metrics
from pipesat.solver.evaluate.simulator import simulate
from pipesat.solver.heuristics.v_blocks import candidate_blocks, v_half_budget, v_min_budget
from pipesat.solver.heuristics.v_schedules import slot_orders, v_half_offsets, v_min_offsets
from tests.solver.heuristics.helpers import run_valid
from tests.solver.heuristics.vshape import vshape

# The paper's setting: per chunk F/B/W = 2/3/1, p2p 0.1, activation 1 and weight memory 0.5 a chunk.
PUBLISHED = {"forward_times": 4, "backward_times": 6, "weight_times": 2, "activation_memory": 2, "weight_memory": 1}


def test_v_half_reproduces_the_published_building_block_search() -> None:
    instance = vshape(4, 16, **PUBLISHED, p2p_time=0.1)
    _, metrics = run_valid("v-half", instance)
    assert metrics.max_span == pytest.approx(220.2)  # the fixed V-Half block: 233.2
    assert v_half_budget(instance) == (6.0,) * 4
    assert instance.with_limit(v_half_budget(instance)).over_limit(metrics.peak_memory) == []


@pytest.mark.parametrize(("p", "m"), [(4, 16), (8, 32)])
@pytest.mark.parametrize(
    ("name", "fixed", "budget"), [("v-min", v_min_offsets, v_min_budget), ("v-half", v_half_offsets, v_half_budget)]
)
def test_the_search_is_never_worse_than_the_fixed_block(p: int, m: int, name: str, fixed, budget) -> None:
    instance = vshape(p, m, **PUBLISHED, p2p_time=0.1)
    _, searched = run_valid(name, instance)
    fixed_metrics = compute_metrics(simulate(instance, slot_orders(instance, fixed)))
    assert instance.with_limit(budget(instance)).over_limit(searched.peak_memory) == []
    assert searched.max_span <= fixed_metrics.max_span


@pytest.mark.parametrize("limit", ["0.5x", "0.75x", "1x"])
def test_v_auto_keeps_within_the_instance_limit_and_gets_faster_with_more_memory(limit: str) -> None:
    tight = vshape(4, 16, **PUBLISHED, p2p_time=0.1, memory_limit=limit)
    _, metrics = run_valid("v-auto", tight)
    assert tight.over_limit(metrics.peak_memory) == []
    _, roomier = run_valid("v-auto", tight.with_limit([1.5 * limit for limit in tight.memory_limit]))
    assert roomier.max_span <= metrics.max_span


def test_v_auto_uses_each_devices_own_limit() -> None:
    base = vshape(4, 16, **PUBLISHED, p2p_time=0.1)
    roomy = (base.one_f_one_b_peak(),) * 4
    uneven = base.with_limit((roomy[0] * 0.5, *roomy[1:]))
    _, metrics = run_valid("v-auto", uneven)
    assert uneven.over_limit(metrics.peak_memory) == []
    _, everywhere = run_valid("v-auto", base.with_limit(roomy))
    assert everywhere.max_span <= metrics.max_span


def test_every_candidate_block_waits_for_its_inputs() -> None:
    # Along one microbatch's chain each op's slot comes after the op it waits for (so no order deadlocks).
    p = 5
    for block in candidate_blocks(p):
        chain = [block[d][0] for d in range(p)] + [block[d][1] for d in reversed(range(p))]
        chain += [block[d][2] for d in range(p)] + [block[d][3] for d in reversed(range(p))]
        assert all(a < b for a, b in itertools.pairwise(chain))
