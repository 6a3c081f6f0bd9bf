"""One microbatch at a time: the schedule that holds the least memory, exactly the bound's minimum."""

from __future__ import annotations

import pytest

from pipesat.solver.evaluate.bounds import minimum_memory_limit
from pipesat.solver.evaluate.metrics import compute_metrics
from pipesat.solver.evaluate.simulator import simulate
from pipesat.solver.heuristics.one_at_a_time import one_at_a_time_orders
from tests.conftest import make_instance
from tests.strategies import LAYOUTS, assert_valid


@pytest.mark.parametrize(("placement", "chunks"), LAYOUTS)
def test_one_at_a_time_meets_the_minimum_memory_limit(placement: str, chunks: int) -> None:
    layout = {"chunks": chunks, "placement": placement}
    model_stages = 3 if placement == "bidirectional" else 3 * chunks  # a bidirectional one holds 3 twice
    instance = make_instance(3, 4, **layout, weight_times=1, activation_memory=list(range(1, model_stages + 1)))
    for split in (True, False):
        schedule = assert_valid(simulate(instance, one_at_a_time_orders(instance, split)))
        assert compute_metrics(schedule).max_peak_memory == minimum_memory_limit(instance)
