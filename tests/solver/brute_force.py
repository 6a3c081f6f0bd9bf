"""Exhaustive optima of tiny instances: every per-device order, timed by the simulator (or re-timed for
the least max span), checked by the validator. The reference the solver and the bounds are tested against."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

from models import Instance, OpKey, ScheduleError, expected_op_keys
from solver.evaluate.metrics import compute_metrics
from solver.evaluate.retime import min_span_schedule
from solver.evaluate.simulator import simulate
from solver.evaluate.validator import validate


def _chain_position(key: OpKey, num_stages: int) -> float:
    """Position of an op in its microbatch's dependency chain (a W sits just after its B)."""
    kind, stage, _ = key
    if kind == "F":
        return stage
    if kind == "B":
        return 2 * num_stages - 1 - stage
    return 2 * num_stages - 1 - stage + 0.5


def _must_precede(a: OpKey, b: OpKey, num_stages: int, fifo: bool) -> bool:
    """Whether `a` comes before `b` in every valid order of one device."""
    if fifo and a[0] == b[0] and a[1] == b[1]:
        return a[2] < b[2]
    if a[2] != b[2] or a[0] == "W":
        return False
    if b[0] == "W":
        return a[0] != "W" and _chain_position(a, num_stages) <= _chain_position(("B", b[1], b[2]), num_stages)
    return _chain_position(a, num_stages) < _chain_position(b, num_stages)


def device_orders(instance: Instance, device: int, split: bool, fifo: bool = False) -> list[list[OpKey]]:
    """Every order of the device's ops consistent with the dependencies among them."""
    keys = [key for key in expected_op_keys(instance, split) if instance.placement[key[1]] == device]
    num_stages = instance.num_stages
    before = {b: [a for a in keys if _must_precede(a, b, num_stages, fifo)] for b in keys}
    results: list[list[OpKey]] = []

    def extend(order: list[OpKey], placed: set[OpKey]) -> None:
        if len(order) == len(keys):
            results.append(list(order))
            return
        for key in keys:
            if key not in placed and all(a in placed for a in before[key]):
                order.append(key)
                placed.add(key)
                extend(order, placed)
                order.pop()
                placed.remove(key)

    extend([], set())
    return results


def all_schedules(instance: Instance, split: bool, objective: str, fifo: bool = False) -> Iterator:
    """Every valid schedule (as-soon-as-possible, or least max span for "span"), memory limit included."""
    per_device = [device_orders(instance, d, split, fifo) for d in range(instance.num_devices)]
    for orders in itertools.product(*per_device):
        try:
            timing = min_span_schedule if objective == "span" else simulate
            schedule = timing(instance, orders)
        except ScheduleError:
            continue  # the orders deadlock
        if not validate(schedule):
            yield schedule


def brute_force_optimum(instance: Instance, split: bool, objective: str = "makespan", fifo: bool = False) -> float:
    """The least makespan / max span / peak memory ("memory") over every valid schedule."""
    if objective == "memory":
        return min(compute_metrics(s).max_peak_memory for s in all_schedules(instance, split, "makespan", fifo))
    return min(compute_metrics(s).objective(objective) for s in all_schedules(instance, split, objective, fifo))
