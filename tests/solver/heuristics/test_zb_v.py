"""ZB-V: the order of docs/reference.md, its peak of p microbatches of 1F1B activation, zero bubble with equal times."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given

from models import Instance
from solver.heuristics import NotApplicable, run_heuristic
from tests.solver.heuristics.helpers import run_valid
from tests.solver.heuristics.vshape import V_REFUSALS, vshape, vshape_instances
from tests.strategies import PROPERTY_SETTINGS, assert_valid, instances


@pytest.mark.parametrize("p", [4, 8, 16])
@pytest.mark.parametrize("m_per_p", [2, 3])
@pytest.mark.parametrize("weight_share", [0.5, 1.0])
def test_peak_is_the_1f1b_peak_and_span_has_no_bubble(p: int, m_per_p: int, weight_share: float) -> None:
    m = m_per_p * p
    instance = vshape(p, m, weight_memory=weight_share)  # a device's share; a chunk's activation is 0.5
    _, metrics = run_valid("zb-v", instance)
    unit = instance.one_f_one_b_peak() / p  # one microbatch of 1F1B activation
    assert unit == 1.0
    assert metrics.max_peak_memory == p * unit
    # Every device is busy from its first op to its last: 2 chunks x (F + B + W) per microbatch.
    assert metrics.max_span == 2 * 3 * m
    assert metrics.span_bubble_rate == 0.0


@pytest.mark.parametrize("p", [1, 2, 4, 5])
def test_order_follows_the_reference(p: int) -> None:
    m = 2 * p + 1
    schedule, _ = run_valid("zb-v", vshape(p, m))
    for rank, order in enumerate(schedule.orders()):
        chunk0, chunk1 = rank, 2 * p - 1 - rank
        warmup = 2 * (p - rank) - 1
        assert order[:warmup] == [("F", chunk0, j) for j in range(warmup)]
        alternating = [op for j in range(rank) for op in (("F", chunk1, j), ("F", chunk0, warmup + j))]
        assert order[warmup : warmup + 2 * rank] == alternating
        first_triple = order[warmup + 2 * rank : warmup + 2 * rank + 3]
        assert first_triple == [("F", chunk1, rank), ("B", chunk1, 0), ("W", chunk1, 0)]
        # The cool-down ends with the deferred Ws: r of chunk 1, then r of chunk 0.
        tail = order[len(order) - 2 * rank :]
        assert tail == [("W", chunk1, j) for j in range(m - rank, m)] + [("W", chunk0, j) for j in range(m - rank, m)]


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        *V_REFUSALS,
        (
            {"num_devices": 4, "num_microbatches": 6, "chunks": 2, "placement": "vshape", "weight_times": 1},
            "needs at least 2p-1 = 7 microbatches, got 6",
        ),
    ],
)
def test_refuses_what_it_cannot_serve(data: dict[str, Any], reason: str) -> None:
    with pytest.raises(NotApplicable, match=reason):
        run_heuristic("zb-v", Instance.from_dict(data))


@PROPERTY_SETTINGS
@given(vshape_instances())
def test_heterogeneous_instances_validate_or_are_refused_for_too_few_microbatches(instance: Instance) -> None:
    if instance.num_microbatches < 2 * instance.num_devices - 1:
        with pytest.raises(NotApplicable, match="needs at least 2p-1"):
            run_heuristic("zb-v", instance)
        return
    _, metrics = run_valid("zb-v", instance)
    # A device never holds more than 2p chunk activations (device 0 after its warm-up).
    p = instance.num_devices
    for device, peak in enumerate(metrics.peak_memory):
        assert peak <= 2 * p * max(instance.activation_memory[s] for s in instance.stages_of(device))


@PROPERTY_SETTINGS
@given(instances(max_devices=4, max_microbatches=8))
def test_any_instance_validates_or_is_refused_with_a_reason(instance: Instance) -> None:
    try:
        schedule = run_heuristic("zb-v", instance)
    except NotApplicable as refusal:
        assert "needs" in str(refusal)
        return
    assert_valid(schedule)
