"""Pareto sweeps: limit parsing, a frontier that never rises, heuristics placed beside it."""

from __future__ import annotations

import dataclasses
import time

import pytest

from pipesat.models import Instance, InstanceError, Minimize
from pipesat.solver.evaluate.bounds import minimum_memory_limit
from pipesat.solver.evaluate.metrics import compute_metrics
from pipesat.solver.solve import solve
from pipesat.solver.studies import pareto
from pipesat.solver.studies.pareto import (
    OUT_OF_TIME,
    _on_the_frontier,
    device_budget,
    pareto_frontier,
    pareto_sweep,
    parse_limits,
)
from tests.solver.brute_force import brute_force_frontier
from tests.strategies import assert_valid

# 1F1B peak: 3 microbatches of 2 units on device 0 = 6.
INSTANCE = Instance.from_dict(
    {
        "num_devices": 3,
        "num_microbatches": 4,
        "forward_times": 1,
        "backward_times": 1,
        "weight_times": 1,
        "p2p_time": 0.5,
        "activation_memory": 2,
    }
)


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("1.5,2,3", [1.5, 2.0, 3.0]),
        ("0.5x, 1x", [3.0, 6.0]),
        ("0.5x:1x:0.25x", [3.0, 4.5, 6.0]),
        ("2:3:0.5", [2.0, 2.5, 3.0]),
        ("1x:2x:1x", [6.0, 12.0]),
    ],
)
def test_parse_limits(spec: str, expected: list[float]) -> None:
    assert parse_limits(spec, INSTANCE) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("spec", "match"),
    [
        ("", "no memory limits"),
        ("1:2", "start:stop:step"),
        ("3:1:1", "ends before it starts"),
        ("0.001:100:0.001", "at most"),
        ("abc", "must be a number"),
        ("1,-2", "positive"),
    ],
)
def test_bad_limits_say_what_is_wrong(spec: str, match: str) -> None:
    with pytest.raises(InstanceError, match=match):
        parse_limits(spec, INSTANCE)


def test_sweep_frontier_never_rises_and_lists_heuristics() -> None:
    limits = parse_limits("1.5,0.5x:1.5x:0.25x", INSTANCE)
    result = pareto_sweep(INSTANCE, limits, time_limit_per_point=2.0, workers=1, seed=0)
    assert [limit for limit, _ in result.points] == sorted(limits)
    first = result.points[0][1]
    assert first.status == "infeasible" and first.smallest_feasible_limit == 2
    values = []
    for limit, point in result.points[1:]:
        assert point.status in ("optimal", "feasible")
        schedule = assert_valid(point.schedule)
        assert schedule.instance.memory_limit == (limit,) * INSTANCE.num_devices
        values.append(point.value)
    assert values == sorted(values, reverse=True)
    assert values[0] > values[-1]
    names = {name for name, _, _ in result.heuristics}
    assert {"gpipe", "1f1b"} <= names
    for name, peak, value in result.heuristics:
        fitting = [point.value for limit, point in result.points if point.value is not None and limit >= peak]
        assert all(v <= value for v in fitting), name


@pytest.mark.parametrize("objective", ["makespan", "span"])
def test_the_frontier_has_every_breakpoint_of_the_brute_force(objective: str) -> None:
    instance = Instance.from_dict(
        {"num_devices": 2, "num_microbatches": 2, "forward_times": [1, 1.5], "backward_times": [2, 1], "p2p_time": 0.5}
    )
    frontier = pareto_frontier(instance, objective, time_limit_per_solve=5, workers=1)
    expected = brute_force_frontier(instance, split=False, objective=objective)
    found = [(memory, result.value) for memory, result in frontier.points]
    assert [pair for point in found for pair in point] == pytest.approx([pair for point in expected for pair in point])
    for (_, result), leanest in zip(frontier.points, frontier.memory, strict=True):
        assert result.status == "optimal" and leanest.status == "optimal"
        schedule = assert_valid(result.schedule)
        assert compute_metrics(schedule).max_peak_memory == pytest.approx(leanest.value)


def test_a_frontier_point_is_the_fastest_at_its_memory_and_the_leanest_at_its_time() -> None:
    frontier = pareto_frontier(INSTANCE, "makespan", time_limit_per_solve=5, workers=1)
    memories = [memory for memory, _ in frontier.points]
    values = [result.value for _, result in frontier.points]
    assert memories == sorted(memories) and values == sorted(values, reverse=True)
    assert len(set(values)) == len(values)  # each breakpoint is strictly faster than the one below
    for memory, result in frontier.points:
        at_limit = pareto_sweep(INSTANCE, [memory], "makespan", time_limit_per_point=5, workers=1).points[0][1]
        assert at_limit.value == pytest.approx(result.value)


def _recording(monkeypatch: pytest.MonkeyPatch) -> list[dict]:
    """Every solve the study runs, with its options, in order."""
    calls: list[dict] = []

    def recorded(instance: Instance, **options: object) -> object:
        calls.append({"limit": instance.memory_limit, **options})
        return solve(instance, **options)

    monkeypatch.setattr(pareto, "solve", recorded)
    return calls


def test_the_frontier_starts_at_the_tight_end(monkeypatch: pytest.MonkeyPatch) -> None:
    """The least memory first, then the fastest there: a budget that runs out keeps the lean end."""
    calls = _recording(monkeypatch)
    frontier = pareto_frontier(INSTANCE, "makespan", time_limit_per_solve=5, workers=1)
    first, second = calls[0], calls[1]
    assert first["minimize"] == Minimize.MEMORY and first["makespan_cap"] is None
    assert second.get("minimize") is None and second["limit"] == (frontier.points[0][0],) * INSTANCE.num_devices
    assert frontier.points[0][0] == pytest.approx(minimum_memory_limit(INSTANCE)) and frontier.ended == ""


def test_a_total_time_budget_caps_every_solve_and_says_it_ran_out(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _recording(monkeypatch)
    started = time.monotonic()
    frontier = pareto_frontier(INSTANCE, "makespan", time_limit_per_solve=5, time_budget=0.5, workers=1)
    assert time.monotonic() - started < 0.5 + 3  # a solve stops within its limit; the rest is set-up
    assert calls and all(call["time_limit"] <= 0.5 for call in calls)
    if frontier.ended:  # the 0.5 s ran out before the frontier was complete
        assert frontier.ended == OUT_OF_TIME
    nothing = pareto_frontier(INSTANCE, "makespan", time_budget=1e-9, workers=1)
    assert nothing.points == [] and nothing.ended == OUT_OF_TIME
    sweep = pareto_sweep(INSTANCE, [3, 4, 6], "makespan", time_budget=1e-9, workers=1)
    assert sweep.points == [] and sweep.ended == OUT_OF_TIME


def _knows_its_gpu(instance: Instance, budget: float) -> Instance:
    """`instance` as from-model writes it with a GPU memory: the budget as its limit, the GPU in its metadata."""
    metadata = {"hardware": {"gpu_memory": 80 * 2**30}}
    return dataclasses.replace(instance.with_limit(budget), metadata=metadata)


def test_an_instance_that_knows_its_gpu_bounds_the_frontier_and_the_sweep_by_its_budget() -> None:
    """No limit above what the GPU holds: the frontier is the unbounded one's points within the budget."""
    unbounded = pareto_frontier(INSTANCE, "makespan", time_limit_per_solve=5, workers=1)
    memories = [memory for memory, _ in unbounded.points]
    budget = (memories[-2] + memories[-1]) / 2  # between the last two breakpoints
    bounded = pareto_frontier(_knows_its_gpu(INSTANCE, budget), "makespan", time_limit_per_solve=5, workers=1)
    assert bounded.ceiling == budget and [memory for memory, _ in bounded.points] == memories[:-1]
    assert [r.value for _, r in bounded.points] == [r.value for _, r in unbounded.points[:-1]]
    for _, result in bounded.points:
        assert_valid(result.schedule)
    sweep = pareto_sweep(_knows_its_gpu(INSTANCE, 5), [3, 4, 6, 12], "makespan", time_limit_per_point=5, workers=1)
    assert [limit for limit, _ in sweep.points] == [3, 4] and sweep.left_out == [6, 12]
    assert device_budget(INSTANCE.with_limit(5)) is None  # an instance's own limit does not bound a study


def test_rows_no_faster_than_a_leaner_one_are_left_out() -> None:
    """A solve stopped by its time limit can leave a breakpoint no faster than a leaner one: equal
    times appear once, at the least memory."""
    result = pareto_sweep(INSTANCE, [6], "makespan", time_limit_per_point=5, workers=1).points[0][1]

    def point(memory: float, value: float) -> tuple:
        return (memory, dataclasses.replace(result, value=value), result)

    points = [point(6, 10), point(4, 12), point(5, 12), point(7, 10), point(8, 9), point(3, 11.5)]
    kept = _on_the_frontier(points)
    assert [(memory, fastest.value) for memory, fastest, _ in kept] == [(3, 11.5), (6, 10), (8, 9)]
