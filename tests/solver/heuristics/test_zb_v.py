"""ZB-V: the greedy placement (the ZB paper's published values), the handwritten order of
docs/reference.md, the peak of p microbatches of 1F1B activation and zero bubble with equal times."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given

from pipesat.models import Instance
from pipesat.solver.evaluate.metrics import compute_metrics
from pipesat.solver.evaluate.retime import retime_for_span
from pipesat.solver.evaluate.simulator import simulate
from pipesat.solver.heuristics import NotApplicable, run_heuristic
from pipesat.solver.heuristics.zb_v import greedy_orders, handwritten_orders
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
def test_handwritten_order_follows_the_reference(p: int) -> None:
    m = 2 * p + 1
    schedule = assert_valid(simulate(vshape(p, m), handwritten_orders(vshape(p, m))))
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
    # The greedy keeps within the 1F1B peak; the handwritten order holds at most 2p chunk activations.
    p = instance.num_devices
    for device, peak in enumerate(metrics.peak_memory):
        most = 2 * p * max(instance.activation_memory[s] for s in instance.stages_of(device))
        assert peak <= max(most, instance.one_f_one_b_peak()) + 1e-9


@PROPERTY_SETTINGS
@given(instances(max_devices=4, max_microbatches=8))
def test_any_instance_validates_or_is_refused_with_a_reason(instance: Instance) -> None:
    try:
        schedule = run_heuristic("zb-v", instance)
    except NotApplicable as refusal:
        assert "needs" in str(refusal)
        return
    assert_valid(schedule)


# The ZB paper's ZB-V greedy on its published setting: per chunk F/B/W = 2/3/1, p2p 0.1, activation 1
# and weight memory 0.5 a chunk (a device's share 4/6/2, 2 and 1), span objective, memory limit 2p chunks.
PUBLISHED = {"forward_times": 4, "backward_times": 6, "weight_times": 2, "activation_memory": 2, "weight_memory": 1}


@pytest.mark.parametrize(("p", "m", "limit", "span"), [(4, 16, 8, 204.6), (8, 32, 16, 415.0), (4, 16, 10, 200.6)])
def test_the_greedy_reproduces_the_published_zb_v(p: int, m: int, limit: float, span: float) -> None:
    instance = vshape(p, m, **PUBLISHED, p2p_time=0.1, memory_limit=limit)
    schedule, metrics = run_valid("zb-v", instance)
    assert metrics.max_span == pytest.approx(span)
    assert compute_metrics(retime_for_span(schedule)).max_span == pytest.approx(span)
    assert metrics.max_peak_memory <= limit
    # The fixed handwritten order is a time unit worse here: real times and p2p are what the greedy uses.
    handwritten = compute_metrics(simulate(instance, handwritten_orders(instance))).max_span
    assert handwritten > span + 0.5


def test_the_greedy_and_the_handwritten_order_both_have_no_bubble_at_equal_times() -> None:
    instance = vshape(4, 16)
    for orders in (greedy_orders(instance), handwritten_orders(instance)):
        metrics = compute_metrics(assert_valid(simulate(instance, orders)))
        assert metrics.span_bubble_rate == 0.0 and metrics.max_peak_memory == instance.one_f_one_b_peak()
