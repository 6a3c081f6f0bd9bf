"""ZB-auto: keeps its memory limit, defaults to the 1F1B peak, and agrees with the simulator."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipesat.models import Instance
from pipesat.solver.evaluate.metrics import compute_metrics
from pipesat.solver.evaluate.simulator import simulate
from pipesat.solver.heuristics import NotApplicable, run_heuristic
from pipesat.solver.heuristics.zb_auto import POLICIES, ListScheduler
from tests.solver.heuristics.helpers import run_valid, uniform
from tests.strategies import PROPERTY_SETTINGS, instance_dicts


@given(
    data=instance_dicts(max_devices=6, max_microbatches=12, split=True, layouts=(("linear", 1),)),
    factor=st.sampled_from([0.3, 0.5, 1.0, 1.5, 2.0, 3.0]),
    memory=st.lists(st.integers(min_value=1, max_value=4), min_size=6, max_size=6),
)
@PROPERTY_SETTINGS
def test_keeps_any_memory_limit_it_accepts(data: dict, factor: float, memory: list[int]) -> None:
    p = data["num_devices"]
    memories = {"activation_memory": [2.0 * x for x in memory[:p]], "weight_memory": [float(x) for x in memory[:p]]}
    # The last device may hold twice what the others may: each device keeps its own limit.
    limits = [f"{factor}x"] * (p - 1) + [f"{2 * factor}x"]
    instance = Instance.from_dict({**data, **memories, "memory_limit": limits})
    if any(a > limit for a, limit in zip(instance.activation_memory, instance.memory_limit, strict=True)):
        with pytest.raises(NotApplicable, match="needs a memory limit of at least"):
            run_heuristic("zb-auto", instance)
        return
    _, metrics = run_valid("zb-auto", instance)  # the validator checks the limit
    assert instance.over_limit(metrics.peak_memory) == []


@pytest.mark.parametrize(("p", "m"), [(1, 3), (2, 5), (4, 4), (4, 12), (8, 24)])
def test_without_a_limit_it_keeps_the_1f1b_peak(p: int, m: int) -> None:
    instance = uniform(p, m, activation_memory=2, weight_memory=1)
    _, metrics = run_valid("zb-auto", instance)
    assert metrics.max_peak_memory <= instance.one_f_one_b_peak()
    # ZB-1p is never worse than ZB-H1, the handwritten schedule with the same peak.
    _, zb_h1 = run_valid("zb-h1", instance)
    assert metrics.max_span <= zb_h1.max_span


@pytest.mark.parametrize(("p", "m"), [(4, 12), (8, 24)])
def test_more_memory_buys_a_smaller_bubble(p: int, m: int) -> None:
    spans = [run_valid("zb-auto", uniform(p, m, memory_limit=f"{k}x"))[1].max_span for k in (1, 2)]
    assert spans[1] < spans[0]


@pytest.mark.parametrize(("p", "m", "comm"), [(2, 3, 0.0), (4, 9, 0.5), (5, 7, 0.25)])
def test_every_policy_times_its_orders_as_the_simulator_does(p: int, m: int, comm: float) -> None:
    instance = uniform(
        p,
        m,
        forward_times=[1.0 + 0.25 * s for s in range(p)],
        backward_times=[2.0 - 0.25 * s for s in range(p)],
        weight_times=[0.5 + 0.25 * (s % 2) for s in range(p)],
        p2p_time=comm,
        memory_limit="1.5x",
    )
    for policy in POLICIES:
        span, orders = ListScheduler(instance, policy).build()
        assert compute_metrics(simulate(instance, orders)).max_span == pytest.approx(span)


def test_refusals() -> None:
    with pytest.raises(NotApplicable, match="needs a split backward"):
        run_heuristic("zb-auto", uniform(4, 8, split=False))
    with pytest.raises(NotApplicable, match="needs one stage per device"):
        run_heuristic("zb-auto", uniform(4, 8, chunks=2, placement="interleaved"))
    with pytest.raises(NotApplicable, match="needs a memory limit of at least 2"):
        run_heuristic("zb-auto", uniform(4, 8, activation_memory=2, memory_limit=1.5))
