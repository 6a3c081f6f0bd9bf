"""Offload everything (solver/heuristics/offloaded.py): valid, and at the bound on the smallest
memory limit with offload, which it meets: the bound is exact."""

from __future__ import annotations

import pytest

from pipesat.models import Instance
from pipesat.solver.evaluate.bounds import least_offload_limits, minimum_memory_limits
from pipesat.solver.evaluate.metrics import compute_metrics
from pipesat.solver.evaluate.validator import validate
from pipesat.solver.heuristics.offloaded import offloaded_one_at_a_time

SHAPES = {
    "linear-split": {"num_devices": 3, "num_microbatches": 3, "weight_times": 1},
    "vshape-fused": {"num_devices": 2, "num_microbatches": 3, "chunks": 2, "placement": "vshape"},
    "vshape-split": {"num_devices": 3, "num_microbatches": 2, "chunks": 2, "placement": "vshape", "weight_times": 1},
    "interleaved-uneven": {
        "num_devices": 2,
        "num_microbatches": 2,
        "chunks": 3,
        "activation_memory": [1, 2, 3, 1, 0.5, 2],
        "p2p_time": 0.25,
    },
    "bidirectional": {"num_devices": 2, "num_microbatches": 4, "chunks": 2, "placement": "bidirectional"},
}


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("fraction", [1.0, 0.5])
def test_offloading_everything_fits_the_bound_on_the_smallest_limit(shape: str, fraction: float) -> None:
    instance = Instance.from_dict({**SHAPES[shape], "host_link_bandwidth": 3, "offload_fraction": fraction})
    bound = least_offload_limits(instance)
    schedule = offloaded_one_at_a_time(instance.with_limit(bound), instance.split_backward)
    assert validate(schedule) == []
    assert compute_metrics(schedule).peak_memory == pytest.approx(bound)  # the bound is met: it is exact
    assert all(b <= least for b, least in zip(bound, minimum_memory_limits(instance), strict=True))
    assert len(schedule.transfers) == 2 * sum(len(instance.microbatches_at(s)) for s in range(instance.num_stages))
