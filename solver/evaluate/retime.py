"""Re-time fixed per-device orders for the minimum max span (not as soon as possible).

The simulator's as-soon-as-possible timing minimises the makespan of an order, but its max span can
be far worse than the order allows: a device may start early and then wait. For a fixed order the
timing constraints are difference constraints (`start[b] >= start[a] + w` along dependencies and
device orders, `end[last_d] - start[first_d] <= T` per device), so the smallest feasible T is the
maximum cycle mean of a p x p matrix: C[d][e] = the longest path from the start of device d's first
op to the end of device e's last op, and a cycle d1 -> d2 -> ... -> d1 needs k spans of at least its
total weight. Karp's algorithm finds it from sums of the instance's float times (no rounding to ticks);
the least timing under that span follows from at most p + 1 longest-path passes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from pipesat.models import Instance, Objective, Schedule, Step, step_keys
from pipesat.models.ops import dependency
from pipesat.solver.evaluate.simulator import simulate


def timed_for(
    objective: Objective,
    instance: Instance,
    orders: Sequence[Sequence[Step]],
    name: str = "",
    source: dict[str, Any] | None = None,
) -> Schedule:
    """`orders` timed as `objective` measures them: as soon as possible for the makespan (the
    simulator), for the least max span for the span. Raises `ScheduleError` as `simulate` does."""
    if objective == Objective.SPAN:
        return min_span_schedule(instance, orders, name, source)
    return simulate(instance, orders, name, source)


def retimed_for(objective: Objective, schedule: Schedule) -> Schedule:
    """An as-soon-as-possible schedule as `objective` measures it: re-timed for the least max span
    for the span, itself for the makespan."""
    return retime_for_span(schedule) if objective == Objective.SPAN else schedule


def retime_for_span(schedule: Schedule) -> Schedule:
    """The schedule's per-device orders re-timed for the minimum max span (same name and source)."""
    return min_span_schedule(schedule.instance, schedule.orders(), schedule.name, schedule.source)


def min_span_schedule(
    instance: Instance,
    orders: Sequence[Sequence[Step]],
    name: str = "",
    source: dict[str, Any] | None = None,
    span: float | None = None,
) -> Schedule:
    """Time `orders` so that every device's span is at most `span` (default: the smallest possible).

    Among such timings it returns the earliest one, shifted so that the first op starts at 0. A `span`
    below the smallest possible is raised to it. Raises `ScheduleError` as `simulate` does.
    """
    asap = simulate(instance, orders, name, source)
    graph = _TimingGraph(asap)
    smallest = graph.min_max_span()
    target = smallest if span is None else max(span, smallest)
    starts = graph.least_starts(target)
    shift = min(starts)
    ops = tuple(
        op._replace(start=start - shift, end=start - shift + (op.end - op.start))
        for op, start in zip(asap.ops, starts, strict=True)
    )
    return Schedule(instance, ops, asap.name, asap.source)


class _TimingGraph:
    """Difference constraints of a fixed order: ops in topological order (the simulator's emission
    order), each with its predecessors (index, minimum distance between their starts). The ops of an
    overlapped pair start with its F: the F carries the pair's constraints, the others follow it."""

    def __init__(self, asap: Schedule) -> None:
        instance = asap.instance
        self.ops = asap.ops
        self.starts = [op.start for op in asap.ops]
        self.durations = [op.end - op.start for op in asap.ops]
        index = {op.key: i for i, op in enumerate(asap.ops)}
        self.predecessors: list[list[tuple[int, float]]] = [[] for _ in asap.ops]
        orders = [[step_keys(step) for step in order] for order in asap.orders()]
        position = {
            key: (device, k) for device, order in enumerate(orders) for k, keys in enumerate(order) for key in keys
        }
        for i, op in enumerate(asap.ops):
            device, k = position[op.key]
            keys = orders[device][k]
            if op.key != keys[0]:
                self.predecessors[i].append((index[keys[0]], 0.0))
                continue
            if k > 0:
                j = index[orders[device][k - 1][0]]
                self.predecessors[i].append((j, self.durations[j]))
            for key in keys:
                dep = dependency(key, instance)
                if dep is not None and dep not in keys:
                    j = index[dep]
                    latency = instance.p2p_time if instance.placement[dep.stage] != op.device else 0.0
                    self.predecessors[i].append((j, self.durations[j] + latency))
        self.first = [index[order[0][0]] for order in orders]
        self.last = [index[order[-1][0]] for order in orders]

    def _longest_from(self, source: int) -> list[float]:
        distance = [-math.inf] * len(self.ops)
        distance[source] = 0.0
        for i in range(source + 1, len(self.ops)):
            best = -math.inf
            for j, weight in self.predecessors[i]:
                if distance[j] + weight > best:
                    best = distance[j] + weight
            distance[i] = best
        return distance

    def min_max_span(self) -> float:
        """The maximum cycle mean of the device-to-device span matrix (Karp's algorithm)."""
        p = len(self.first)
        matrix = []
        for d in range(p):
            distance = self._longest_from(self.first[d])
            matrix.append([distance[self.last[e]] + self.durations[self.last[e]] for e in range(p)])
        walks = [[0.0] * p]
        for _ in range(p):
            before = walks[-1]
            walks.append([max(before[u] + matrix[u][v] for u in range(p)) for v in range(p)])
        best = -math.inf
        for v in range(p):
            if walks[p][v] == -math.inf:
                continue
            worst = min((walks[p][v] - walks[k][v]) / (p - k) for k in range(p) if walks[k][v] > -math.inf)
            best = max(best, worst)
        return best

    def least_starts(self, span: float) -> list[float]:
        """The earliest starts with every device's span at most `span` (which must be feasible).

        Each pass pulls every device's first op late enough for its last op, then pushes the order
        forward; a longest path uses each device's span constraint at most once, so p + 1 passes
        reach the fixed point (the cap only guards against rounding in the last bit).
        """
        starts = list(self.starts)
        for _ in range(len(self.first) + 1):
            moved = False
            for first, last in zip(self.first, self.last, strict=True):
                needed = starts[last] + self.durations[last] - span
                if needed > starts[first]:
                    starts[first] = needed
                    moved = True
            if not moved:
                break
            for i in range(len(self.ops)):
                for j, weight in self.predecessors[i]:
                    if starts[j] + weight > starts[i]:
                        starts[i] = starts[j] + weight
        return starts
