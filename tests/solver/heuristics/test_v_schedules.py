"""V-Min, V-Half and V-ZB: peaks and bubble order (docs/reference.md), the building blocks, refusals."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given

from pipesat.models import Instance
from pipesat.solver.heuristics import NotApplicable, run_heuristic
from pipesat.solver.heuristics.v_schedules import CYCLE, Offsets, v_half_offsets, v_min_offsets, v_zb_offsets
from tests.solver.heuristics.helpers import run_valid
from tests.solver.heuristics.vshape import V_REFUSALS, vshape, vshape_instances
from tests.strategies import PROPERTY_SETTINGS, assert_valid, instances

OFFSETS = {"v-min": v_min_offsets, "v-half": v_half_offsets, "v-zb": v_zb_offsets}
PEAK = {"v-min": lambda p: (p + 4) // 3, "v-half": lambda p: (p + 2) // 2, "v-zb": lambda p: p}


@pytest.mark.parametrize("offsets", OFFSETS.values())
@pytest.mark.parametrize("p", range(1, 17))
def test_building_block_repeats_without_collision_and_respects_dependencies(
    offsets: Callable[[int, int], Offsets], p: int
) -> None:
    blocks = [offsets(p, i) for i in range(p)]
    for block in blocks:
        assert len({slot % CYCLE for slot in block}) == 4  # F, f, B, b of any microbatches never share a slot
    forward, forward_back, backward, backward_back = (list(column) for column in zip(*blocks, strict=True))
    # The V: F down the devices, f back up, B (chunk 1's backward) down again, b back up.
    assert all(a < b for a, b in itertools.pairwise(forward))
    assert forward[-1] < forward_back[-1]
    assert all(a > b for a, b in itertools.pairwise(forward_back))
    assert forward_back[0] < backward[0]
    assert all(a < b for a, b in itertools.pairwise(backward))
    assert backward[-1] < backward_back[-1]
    assert all(a > b for a, b in itertools.pairwise(backward_back))


@pytest.mark.parametrize("name", ["v-min", "v-half", "v-zb"])
@pytest.mark.parametrize("p", [4, 8, 16])
@pytest.mark.parametrize("m_per_p", [2, 3])
def test_peak_in_microbatches_of_1f1b_activation(name: str, p: int, m_per_p: int) -> None:
    # The paper counts an activation as held until its W (weight_memory = activation_memory): exact peaks.
    instance = vshape(p, m_per_p * p, weight_memory=1.0)  # a device share: 0.5 per chunk
    unit = instance.one_f_one_b_peak() / p
    _, metrics = run_valid(name, instance)
    assert metrics.max_peak_memory == PEAK[name](p) * unit
    # With B freeing part of it (M_W = M_B / 2, the default) the peak is no higher.
    _, metrics = run_valid(name, vshape(p, m_per_p * p))
    assert metrics.max_peak_memory <= PEAK[name](p) * unit


@pytest.mark.parametrize("p", [4, 8, 16])
@pytest.mark.parametrize("m_per_p", [2, 3])
def test_bubble_order_with_equal_times(p: int, m_per_p: int) -> None:
    m = m_per_p * p
    bubble = {name: run_valid(name, vshape(p, m))[1].span_bubble_rate for name in OFFSETS}
    # 1F1B on the same devices: one stage per device doing both chunks' work, the backward fused.
    linear = Instance.from_dict({"num_devices": p, "num_microbatches": m, "forward_times": 2, "backward_times": 4})
    one_f_one_b = run_valid("1f1b", linear)[1].span_bubble_rate
    assert bubble["v-zb"] == 0.0
    assert bubble["v-zb"] < bubble["v-half"] < bubble["v-min"] < one_f_one_b
    # The approximate bubbles of docs/reference.md, closed forms: V-Half ~p/(2m), V-Min ~2p/(3m).
    assert bubble["v-half"] <= p / (2 * m)
    assert bubble["v-min"] <= 2 * p / (3 * m)


def test_v_zb_matches_zb_v_peak_and_bubble() -> None:
    p, m = 6, 15
    _, v_zb = run_valid("v-zb", vshape(p, m))
    _, zb_v = run_valid("zb-v", vshape(p, m))
    assert v_zb.max_peak_memory == zb_v.max_peak_memory == p
    assert v_zb.max_span == zb_v.max_span == 2 * 3 * m


@pytest.mark.parametrize("name", ["v-min", "v-half", "v-zb"])
@pytest.mark.parametrize(
    ("data", "reason"),
    V_REFUSALS,
)
def test_refuses_what_it_cannot_serve(name: str, data: dict[str, Any], reason: str) -> None:
    with pytest.raises(NotApplicable, match=reason):
        run_heuristic(name, Instance.from_dict(data))


@PROPERTY_SETTINGS
@given(vshape_instances())
def test_heterogeneous_instances_validate(instance: Instance) -> None:
    """Any times, p2p and memory, and any m (no minimum): every V schedule validates."""
    for name in OFFSETS:
        run_valid(name, instance)


@PROPERTY_SETTINGS
@given(instances(max_devices=4, max_microbatches=8))
def test_any_instance_validates_or_is_refused_with_a_reason(instance: Instance) -> None:
    for name in OFFSETS:
        try:
            schedule = run_heuristic(name, instance)
        except NotApplicable as refusal:
            assert "needs" in str(refusal)
            continue
        assert_valid(schedule)
