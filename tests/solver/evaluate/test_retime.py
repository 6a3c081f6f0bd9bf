"""Re-timing a fixed order for the least max span, and timing an order as an objective measures it."""

from __future__ import annotations

import itertools
import math

from hypothesis import given

from pipesat.models import Instance, Objective, Schedule
from pipesat.models.ops import dependency
from pipesat.solver.evaluate.metrics import compute_metrics
from pipesat.solver.evaluate.retime import min_span_schedule, retime_for_span, retimed_for, timed_for
from pipesat.solver.evaluate.simulator import simulate
from pipesat.solver.heuristics import run_heuristic
from tests.conftest import moe_instance
from tests.strategies import PROPERTY_SETTINGS, assert_valid, instances_with_orders

# An order whose as-soon-as-possible timing has max span 16, but 15 is possible: device 1 starts
# its first forward too early and then waits.
ORDER_INSTANCE = Instance.from_dict(
    {
        "num_devices": 2,
        "num_microbatches": 3,
        "forward_times": [2, 1],
        "backward_times": 1,
        "weight_times": [2, 3],
    }
)
ORDERS = [
    [
        ("F", 0, 0),
        ("F", 0, 2),
        ("F", 0, 1),
        ("B", 0, 0),
        ("W", 0, 0),
        ("B", 0, 2),
        ("B", 0, 1),
        ("W", 0, 2),
        ("W", 0, 1),
    ],
    [
        ("F", 1, 0),
        ("F", 1, 2),
        ("B", 1, 0),
        ("B", 1, 2),
        ("F", 1, 1),
        ("B", 1, 1),
        ("W", 1, 2),
        ("W", 1, 1),
        ("W", 1, 0),
    ],
]


def _feasible_span(schedule: Schedule, span: float) -> bool:
    """Whether the schedule's orders can be timed with every device's span <= span, by plain
    Bellman-Ford relaxation over all constraints (a different algorithm from retime's)."""
    instance = schedule.instance
    orders = schedule.orders()
    duration = {op.key: op.end - op.start for op in schedule.ops}
    edges = []  # start[b] >= start[a] + w
    for device, order in enumerate(orders):
        edges += [(a, b, duration[a]) for a, b in itertools.pairwise(order)]
        edges.append((order[-1], order[0], duration[order[-1]] - span))
        for key in order:
            dep = dependency(key, instance)
            if dep is not None:
                latency = instance.p2p_time if instance.placement[dep[1]] != device else 0.0
                edges.append((dep, key, duration[dep] + latency))
    start = dict.fromkeys(duration, 0.0)
    for _ in range(len(start) + 1):
        changed = False
        for a, b, w in edges:
            if start[a] + w > start[b] + 1e-9:
                start[b] = start[a] + w
                changed = True
        if not changed:
            return True
    return False


def test_retime_beats_as_soon_as_possible_when_the_order_allows() -> None:
    asap = simulate(ORDER_INSTANCE, ORDERS)
    retimed = assert_valid(min_span_schedule(ORDER_INSTANCE, ORDERS))
    assert compute_metrics(asap).max_span == 16
    assert compute_metrics(retimed).max_span == 15
    assert retimed.orders() == asap.orders()
    assert min(op.start for op in retimed.ops) == 0


def test_retime_keeps_name_source_and_order() -> None:
    schedule = run_heuristic(
        "zb-h2", Instance.from_dict({"num_devices": 4, "num_microbatches": 8, "weight_times": 1, "p2p_time": 0.5})
    )
    retimed = assert_valid(retime_for_span(schedule))
    assert retimed.name == schedule.name and retimed.source == schedule.source
    assert retimed.orders() == schedule.orders()
    assert compute_metrics(retimed).max_span <= compute_metrics(schedule).max_span


def test_a_larger_span_target_gives_spans_within_it() -> None:
    retimed = assert_valid(min_span_schedule(ORDER_INSTANCE, ORDERS, span=17.5))
    assert max(compute_metrics(retimed).spans) <= 17.5
    assert compute_metrics(min_span_schedule(ORDER_INSTANCE, ORDERS, span=3)).max_span == 15


@PROPERTY_SETTINGS
@given(instances_with_orders(max_devices=3, max_microbatches=3))
def test_retimed_span_is_the_least_the_order_allows(case: tuple[Instance, list]) -> None:
    instance, orders = case
    retimed = assert_valid(min_span_schedule(instance, orders))
    asap = simulate(instance, orders)
    assert retimed.orders() == asap.orders()
    span = compute_metrics(retimed).max_span
    assert span <= compute_metrics(asap).max_span + 1e-9
    assert _feasible_span(retimed, span + 1e-7)
    assert not _feasible_span(retimed, span - 1e-3 * max(1.0, span))


def test_an_unbounded_target_is_as_soon_as_possible() -> None:
    retimed = min_span_schedule(ORDER_INSTANCE, ORDERS, span=math.inf)
    assert retimed.ops == simulate(ORDER_INSTANCE, ORDERS).ops


def test_each_objective_times_an_order_its_own_way() -> None:
    asap = simulate(ORDER_INSTANCE, ORDERS, "order")
    assert timed_for(Objective.MAKESPAN, ORDER_INSTANCE, ORDERS, "order") == asap
    assert retimed_for(Objective.MAKESPAN, asap) is asap
    least_span = min_span_schedule(ORDER_INSTANCE, ORDERS, "order")
    assert timed_for(Objective.SPAN, ORDER_INSTANCE, ORDERS, "order") == least_span
    assert retimed_for("span", asap) == least_span


def test_retiming_keeps_overlapped_pairs_together() -> None:
    instance = moe_instance(3, 6)
    schedule = run_heuristic("dualpipe-v", instance)
    retimed = assert_valid(retime_for_span(schedule))
    assert retimed.orders() == schedule.orders() and retimed.has_pairs
    assert compute_metrics(retimed).max_span <= compute_metrics(schedule).max_span
