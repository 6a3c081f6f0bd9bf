"""Exhaustive optima of tiny instances: every per-device order, timed by the simulator (or re-timed for
the least max span), checked by the validator. The reference the solver and the bounds are tested against.

On an instance whose ops carry communication the orders also hold every overlapped pair there can be:
an F and a B of different microbatches (with the B's W inside or not, when the backward is split),
each ready by the order so far."""

from __future__ import annotations

import functools
import itertools

from pipesat.models import Instance, OpKey, Pair, ScheduleError, Step, dependency, expected_op_keys, step_keys
from pipesat.solver.evaluate.metrics import Metrics, compute_metrics
from pipesat.solver.evaluate.retime import timed_for
from pipesat.solver.evaluate.validator import validate


def two_chunk_instance(placement: str) -> Instance:
    """The two-chunk instance (2 devices, 2 microbatches, uneven times, a tight limit) that brute force
    settles in a second, for `placement` "interleaved" or "vshape"."""
    return Instance.from_dict(
        {
            "num_devices": 2,
            "num_microbatches": 2,
            "chunks": 2,
            "placement": placement,
            "forward_times": [1, 2, 1, 1],
            "backward_times": [2, 1, 2, 3],
            "p2p_time": 1,
            "memory_limit": 1.5,
        }
    )


def _waits_for(key: OpKey, instance: Instance) -> set[OpKey]:
    """Every op `key` waits for, directly or through others, by the one dependency rule."""
    found: set[OpKey] = set()
    while (before := dependency(key, instance)) is not None:
        found.add(before)
        key = before
    return found


def device_orders(instance: Instance, device: int, split: bool) -> list[list[Step]]:
    """Every order of the device's ops (and pairs, with communication) consistent with the dependencies among them."""
    keys = [key for key in expected_op_keys(instance, split) if instance.placement[key[1]] == device]
    waits = {b: _waits_for(b, instance) for b in keys}
    before = {b: [a for a in keys if a in waits[b]] for b in keys}
    steps: list[Step] = list(keys)
    if instance.has_communication:
        for f, b in itertools.product(keys, keys):
            if f.kind == "F" and b.kind == "B" and f.microbatch != b.microbatch:
                steps += [Pair(f, b)] + ([Pair(f, b, with_weight=True)] if split else [])
    results: list[list[Step]] = []

    def ready(step: Step, placed: set[OpKey]) -> bool:
        inside = step_keys(step)
        return all(key not in placed for key in inside) and all(
            a in placed or a in inside for key in inside for a in before[key]
        )

    def extend(order: list[Step], placed: set[OpKey]) -> None:
        if len(placed) == len(keys):
            results.append(list(order))
            return
        for step in steps:
            if ready(step, placed):
                order.append(step)
                placed.update(step_keys(step))
                extend(order, placed)
                order.pop()
                placed.difference_update(step_keys(step))

    extend([], set())
    return results


@functools.lru_cache(maxsize=4)
def _all_metrics(instance: Instance, split: bool, timing: str) -> tuple[Metrics, ...]:
    """The metrics of every valid schedule (memory limit included), timed as soon as possible, or for the
    least max span when `timing` is "span". Cached: the makespan and the memory optimum share one pass."""
    per_device = [device_orders(instance, d, split) for d in range(instance.num_devices)]
    found = []
    for orders in itertools.product(*per_device):
        try:
            schedule = timed_for(timing, instance, orders)
        except ScheduleError:
            continue  # the orders deadlock
        if not validate(schedule):
            found.append(compute_metrics(schedule))
    return tuple(found)


def brute_force_optimum(instance: Instance, split: bool, objective: str = "makespan") -> float:
    """The least makespan / max span / peak memory ("memory") over every valid schedule."""
    if objective == "memory":
        return min(metrics.max_peak_memory for metrics in _all_metrics(instance, split, "makespan"))
    return min(metrics.objective(objective) for metrics in _all_metrics(instance, split, objective))


def brute_force_values(instance: Instance, split: bool, objective: str) -> set[float]:
    """The makespan or max span of every valid schedule, each order timed for it."""
    return {metrics.objective(objective) for metrics in _all_metrics(instance, split, objective)}


def brute_force_frontier(instance: Instance, split: bool, objective: str = "makespan") -> list[tuple[float, float]]:
    """Every breakpoint (least peak memory, least time at that memory) of the time/memory trade-off, by
    increasing memory, over every valid schedule (the instance's memory limit dropped)."""
    unlimited = instance.with_changes(memory_limit=None)
    pairs = sorted({(m.max_peak_memory, m.objective(objective)) for m in _all_metrics(unlimited, split, objective)})
    frontier: list[tuple[float, float]] = []
    for peak, value in pairs:
        if not frontier or value < frontier[-1][1]:
            frontier.append((peak, value))
    return frontier


def brute_force_least_memory(instance: Instance, split: bool, objective: str, cap: float) -> float | None:
    """The least peak memory over every valid schedule whose time objective is at most `cap` (the
    instance's memory limit dropped), or None when none is that fast."""
    unlimited = instance.with_changes(memory_limit=None)
    peaks = [m.max_peak_memory for m in _all_metrics(unlimited, split, objective) if m.objective(objective) <= cap]
    return min(peaks, default=None)
