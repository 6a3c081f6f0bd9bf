"""Block-optimal: the searched building block unrolled, against V-Min at its own peak memory."""

from __future__ import annotations

import re

import pytest

from pipesat.solver.evaluate.metrics import compute_metrics
from pipesat.solver.evaluate.simulator import simulate
from pipesat.solver.heuristics import NotApplicable, run_heuristic
from pipesat.solver.heuristics.block_model import find_block
from pipesat.solver.heuristics.block_optimal import unrolled_orders
from pipesat.solver.heuristics.cool_down import pack_cool_down
from pipesat.solver.heuristics.priority_list import priority_orders
from tests.solver.heuristics.helpers import run_valid
from tests.solver.heuristics.test_v_blocks import PUBLISHED
from tests.solver.heuristics.vshape import vshape
from tests.strategies import assert_valid


@pytest.mark.parametrize(
    ("p", "m", "extra"), [(4, 8, {}), (4, 8, {**PUBLISHED, "p2p_time": 0.1}), (4, 16, {**PUBLISHED, "p2p_time": 0.1})]
)
def test_at_v_mins_own_peak_block_optimal_fits_and_is_no_slower(p: int, m: int, extra: dict) -> None:
    base = vshape(p, m, **extra)
    _, v_min = run_valid("v-min", base)
    instance = base.with_limit(v_min.max_peak_memory)  # one limit for every device, as a limit is given
    _, block = run_valid("block-optimal", instance)
    assert instance.over_limit(block.peak_memory) == []
    assert block.makespan <= v_min.makespan + 1e-9


def test_the_polished_orders_keep_the_unrolled_peak() -> None:
    instance = vshape(4, 8, **PUBLISHED, p2p_time=0.1)
    block = find_block(instance, [4.0] * 4, time_limit=2.0)
    assert block is not None
    unrolled = unrolled_orders(instance, block)
    peaks = compute_metrics(assert_valid(simulate(instance, unrolled))).peak_memory
    assert instance.with_limit(4.0).over_limit(peaks) == []
    for polished in (pack_cool_down(instance, unrolled), priority_orders(instance, unrolled)):
        metrics = compute_metrics(assert_valid(simulate(instance, polished)))
        assert all(new <= old + 1e-9 for new, old in zip(metrics.peak_memory, peaks, strict=True))


def test_a_limit_below_one_microbatch_is_refused_with_the_reason() -> None:
    with pytest.raises(NotApplicable, match=re.escape("Block-optimal: no building block found within 0.9 a device")):
        run_heuristic("block-optimal", vshape(2, 4).with_limit(0.9))


def test_beyond_four_devices_it_leaves_the_instance_to_the_others_with_the_reason() -> None:
    with pytest.raises(NotApplicable, match=re.escape("needs at most 4 devices")):
        run_heuristic("block-optimal", vshape(8, 16))
