"""The CP-SAT formulation of an instance.

One fixed-size interval per op; precedence with `p2p_time` between stages on different devices; one
no-overlap per device; the memory limit as one cumulative per device (F allocates at its start, B
frees `activation - weight` and W frees `weight` at their ends, so the intervals are [start F, end B)
with demand M_B - M_W and [start F, end W) with demand M_W; fused: [start F, end B) with demand M_B);
and the objective: makespan, max span, or the memory capacity shared by every device's cumulative.

**Resolution.** CP-SAT works with integers, so times and memory are scaled to integer ticks
(`TickScale`). When every time is a fraction with a small denominator (decimals such as 18.522 or
p2p 0.601, thirds, quarters), the scale is the least common multiple of the denominators and the
model is exact. Otherwise times are floored at 1/10_000 of the smallest positive time (memory at
1/1_000_000 of the largest): flooring makes the model a relaxation, so its proven bounds stay valid.
For the max span objective the time scale is further multiplied by lcm(1..p) (while the scale stays
at most 10**7 ticks per unit, so up to p = 8 with millisecond decimals): the smallest max span of an
order is a cycle mean over at most p devices, so only then is it a whole number of ticks. Beyond
that a proven span bound is one tick below the model's. Either way the solver re-times the model's per-device order at the instance's exact
float times, so schedules users get are exact.

**Symmetry breaking.** Microbatches are interchangeable: any schedule stays valid (same times, same
memory) when, per (stage, kind), the ops are relabelled in start order, so a first-in-first-out
microbatch order per (stage, kind) loses nothing. It is on by default and can be switched off. With
it and a memory limit, F(s, j + K) cannot start before B(s, j) ends when K + 1 microbatches of stage s
exceed the limit (a redundant precedence that helps propagation).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from fractions import Fraction

from ortools.sat.python import cp_model

from models.errors import InstanceError
from models.instance import Instance
from models.ops import OpKey, dependency, expected_op_keys, op_duration

MAX_EXACT_MULTIPLIER = 10**6
TIME_RESOLUTION = 10_000
MEMORY_RESOLUTION = 1_000_000
MAX_SPAN_SCALE = 10**7
OBJECTIVES = ("makespan", "span")


@dataclass(frozen=True)
class TickScale:
    """How the model's integers relate to the instance's floats: `ticks = value * per_unit`."""

    time: int
    memory: int
    exact_time: bool
    exact_memory: bool
    # True when the min max span of an order is a whole number of ticks (see the module notes).
    exact_span: bool


def choose_scale(instance: Instance, objective: str) -> TickScale:
    """The tick resolution for `instance` (see the module notes)."""
    times = [
        *instance.forward_times,
        *instance.backward_times,
        *(instance.weight_times or ()),
        instance.p2p_time,
    ]
    time_multiplier = _exact_multiplier(times)
    exact_time = time_multiplier is not None
    if time_multiplier is None:
        time_multiplier = _rounded_multiplier(min(t for t in times if t > 0), TIME_RESOLUTION)
    span_multiplier = math.lcm(*range(1, instance.num_devices + 1))
    exact_span = exact_time and time_multiplier * span_multiplier <= MAX_SPAN_SCALE
    if objective == "span" and exact_span:
        time_multiplier *= span_multiplier

    memories = [*instance.activation_memory, *instance.weight_memory]
    if instance.memory_limit is not None:
        memories.append(instance.memory_limit)
    memory_multiplier = _exact_multiplier(memories)
    exact_memory = memory_multiplier is not None
    if memory_multiplier is None:
        memory_multiplier = _rounded_multiplier(max(memories), MEMORY_RESOLUTION)
    return TickScale(time_multiplier, memory_multiplier, exact_time, exact_memory, exact_span)


def to_ticks(value: float, per_unit: int) -> int:
    """`value * per_unit` as an integer: rounded when within 1e-6 of one, else floored."""
    scaled = value * per_unit
    nearest = round(scaled)
    return nearest if abs(scaled - nearest) <= 1e-6 * max(1.0, abs(scaled)) else math.floor(scaled)


def scaled_instance(instance: Instance, scale: TickScale) -> Instance:
    """The instance in ticks: every time and memory amount a whole number (as a float)."""

    def times(values: Iterable[float]) -> tuple[float, ...]:
        return tuple(float(to_ticks(v, scale.time)) for v in values)

    def memory(values: Iterable[float]) -> tuple[float, ...]:
        return tuple(float(to_ticks(v, scale.memory)) for v in values)

    return dataclasses.replace(
        instance,
        forward_times=times(instance.forward_times),
        backward_times=times(instance.backward_times),
        weight_times=None if instance.weight_times is None else times(instance.weight_times),
        p2p_time=float(to_ticks(instance.p2p_time, scale.time)),
        activation_memory=memory(instance.activation_memory),
        weight_memory=memory(instance.weight_memory),
        memory_limit=None if instance.memory_limit is None else float(to_ticks(instance.memory_limit, scale.memory)),
    )


class PipelineModel:
    """The CP-SAT model of an instance.

    `objective` is the time objective ("makespan" or "span"); with `minimize_memory` the model
    minimises the memory capacity instead, with the time objective capped at `time_cap` (instance
    units) when given. Variables: `starts[key]` per op, `time` (the time objective), `first`/`last`
    per device (span), `capacity` (minimise memory).
    """

    def __init__(
        self,
        instance: Instance,
        objective: str = "makespan",
        split_backward: bool = False,
        symmetry_breaking: bool = True,
        minimize_memory: bool = False,
        time_cap: float | None = None,
    ) -> None:
        if objective not in OBJECTIVES:
            raise InstanceError(f"unknown objective {objective!r}; use makespan or span")
        self.instance = instance
        self.objective = objective
        self.split = split_backward
        self.symmetry_breaking = symmetry_breaking
        self.minimize_memory = minimize_memory
        self.scale = choose_scale(instance, objective)
        self.ticks = scaled_instance(instance, self.scale)
        self.model = cp_model.CpModel()
        self.keys = expected_op_keys(instance, split_backward)
        self.duration = {key: int(op_duration(self.ticks, key[0], key[1], split_backward)) for key in self.keys}
        self.horizon = self._horizon()

        self.starts = {key: self.model.new_int_var(0, self.horizon, _name(key)) for key in self.keys}
        self._add_precedences()
        self._add_no_overlaps()
        self._memory_sizes: list[tuple[cp_model.IntVar, OpKey, OpKey]] = []
        self.capacity: cp_model.IntVar | None = None
        self._add_memory()
        self.first: list[cp_model.IntVar] = []
        self.last: list[cp_model.IntVar] = []
        self.time = self._add_time_objective()
        if time_cap is not None:
            self.model.add(self.time <= to_ticks(time_cap, self.scale.time))
        if minimize_memory:
            self.model.minimize(self.capacity)
        else:
            self.model.minimize(self.time)

    def end(self, key: OpKey) -> cp_model.LinearExpr:
        return self.starts[key] + self.duration[key]

    def restrict_objective(self, lower: int, upper: int | None) -> None:
        """Put proven bounds (in ticks) on the minimised variable's domain."""
        target = self.capacity if self.minimize_memory else self.time
        self.model.add(target >= lower)
        if upper is not None:
            self.model.add(target <= upper)

    def add_hint(self, starts: Mapping[OpKey, int], capacity: int | None = None) -> int:
        """Hint every variable from op starts in ticks (and the capacity when minimising memory).

        Returns the hinted value of the minimised variable. With symmetry breaking the starts are
        first relabelled first-in-first-out per (stage, kind), which keeps the schedule valid.
        """
        if self.symmetry_breaking:
            starts = _first_in_first_out(starts)
        self.model.clear_hints()
        for key, var in self.starts.items():
            self.model.add_hint(var, starts[key])
        for size, first, last in self._memory_sizes:
            self.model.add_hint(size, starts[last] + self.duration[last] - starts[first])
        ends = {key: starts[key] + self.duration[key] for key in self.keys}
        if self.objective == "span":
            spans = []
            for d, (first, last) in enumerate(zip(self.first, self.last, strict=True)):
                on_device = [key for key in self.keys if self.instance.placement[key[1]] == d]
                low, high = min(starts[k] for k in on_device), max(ends[k] for k in on_device)
                self.model.add_hint(first, low)
                self.model.add_hint(last, high)
                spans.append(high - low)
            time_value = max(spans)
        else:
            time_value = max(ends.values())
        self.model.add_hint(self.time, time_value)
        if self.capacity is not None:
            if capacity is None:
                raise ValueError("a hint for a memory-minimising model needs the capacity")
            self.model.add_hint(self.capacity, capacity)
            return capacity
        return time_value

    def orders(self, value: Callable[[cp_model.IntVar], int]) -> list[list[OpKey]]:
        """Per-device op orders of a solution (`value` reads a variable, e.g. `solver.value`)."""
        starts = {key: value(var) for key, var in self.starts.items()}
        return orders_from_starts(self.instance, starts, self.duration)

    def _horizon(self) -> int:
        """Ticks within which an optimal schedule fits.

        As soon as possible, some op runs or some p2p transfer is under way at every moment, so any
        order's makespan is at most the total op time plus one p2p per dependency. A min-span timing
        can be packed with no moment where every device is idle, so it fits in p such makespans.
        """
        p2p = int(self.ticks.p2p_time)
        total = sum(self.duration.values()) + p2p * len(self.keys)
        return total * (self.instance.num_devices + 1 if self.objective == "span" else 1)

    def _add_precedences(self) -> None:
        placement = self.instance.placement
        p2p = int(self.ticks.p2p_time)
        for key in self.keys:
            dep = dependency(key, self.instance.num_stages)
            if dep is not None:
                latency = p2p if placement[dep[1]] != placement[key[1]] else 0
                self.model.add(self.starts[key] >= self.end(dep) + latency)
        if self.symmetry_breaking:
            # F(0, 0) comes before every op; shifting the whole schedule puts it at 0.
            self.model.add(self.starts[("F", 0, 0)] == 0)
            m = self.instance.num_microbatches
            for kind, stage, j in self.keys:
                if j + 1 < m:
                    self.model.add(self.starts[(kind, stage, j + 1)] >= self.end((kind, stage, j)))

    def _add_no_overlaps(self) -> None:
        for d in range(self.instance.num_devices):
            intervals = [
                self.model.new_fixed_size_interval_var(self.starts[key], self.duration[key], f"run {_name(key)}")
                for key in self.keys
                if self.instance.placement[key[1]] == d
            ]
            self.model.add_no_overlap(intervals)

    def _add_memory(self) -> None:
        ticks = self.ticks
        if self.minimize_memory:
            upper = int(sum(ticks.activation_memory)) * self.instance.num_microbatches
            self.capacity = self.model.new_int_var(0, upper, "capacity")
            capacity: cp_model.IntVar | int = self.capacity
        elif ticks.memory_limit is not None:
            capacity = int(ticks.memory_limit)
        else:
            return
        m = self.instance.num_microbatches
        for d in range(self.instance.num_devices):
            intervals, demands = [], []
            for s in self.instance.stages_of(d):
                activation = int(ticks.activation_memory[s])
                if self.split:
                    weight = int(ticks.weight_memory[s])
                    holds = [(activation - weight, "B"), (weight, "W")]
                else:
                    holds = [(activation, "B")]
                for j in range(m):
                    for demand, kind in holds:
                        if demand > 0:
                            intervals.append(self._held_interval(("F", s, j), (kind, s, j)))
                            demands.append(demand)
            if intervals:
                self.model.add_cumulative(intervals, demands, capacity)
        if self.symmetry_breaking and not self.minimize_memory:
            self._add_memory_precedences(int(capacity))

    def _held_interval(self, first: OpKey, last: OpKey) -> cp_model.IntervalVar:
        """[start of `first`, end of `last`): while a microbatch holds memory."""
        size = self.model.new_int_var(0, self.horizon, f"held {_name(first)}..{_name(last)}")
        self._memory_sizes.append((size, first, last))
        return self.model.new_interval_var(self.starts[first], size, self.end(last), f"holds {_name(first)}")

    def _add_memory_precedences(self, capacity: int) -> None:
        """F(s, j + K) after B(s, j) ends, where K + 1 microbatches of stage s exceed the capacity."""
        m = self.instance.num_microbatches
        for s, activation in enumerate(self.ticks.activation_memory):
            if activation <= 0:
                continue
            k = capacity // int(activation)
            for j in range(max(0, m - k)):
                self.model.add(self.starts[("F", s, j + k)] >= self.end(("B", s, j)))

    def _add_time_objective(self) -> cp_model.IntVar:
        keys, m = self.keys, self.instance.num_microbatches
        last_only = self.symmetry_breaking
        time = self.model.new_int_var(0, self.horizon, self.objective)
        if self.objective == "makespan":
            sink_kind = "W" if self.split else "B"
            for key in keys:
                kind, stage, j = key
                if kind == sink_kind and (self.split or stage == 0) and (not last_only or j == m - 1):
                    self.model.add(time >= self.end(key))
            return time
        closing_kind = "W" if self.split else "B"
        for d in range(self.instance.num_devices):
            first_stage = self.instance.stages_of(d)[0]
            on_device = [key for key in keys if self.instance.placement[key[1]] == d]
            # The first op on d is a forward of its first stage, the last a W (or a fused B).
            openers = [
                self.starts[k] for k in on_device if k[:2] == ("F", first_stage) and (not last_only or k[2] == 0)
            ]
            closers = [self.end(k) for k in on_device if k[0] == closing_kind and (not last_only or k[2] == m - 1)]
            first = self.model.new_int_var(0, self.horizon, f"first on device {d}")
            last = self.model.new_int_var(0, self.horizon, f"last on device {d}")
            self.model.add_min_equality(first, openers)
            self.model.add_max_equality(last, closers)
            self.model.add(time >= last - first)
            self.first.append(first)
            self.last.append(last)
        return time


def orders_from_starts(
    instance: Instance, starts: Mapping[OpKey, int | float], duration: Mapping[OpKey, int | float]
) -> list[list[OpKey]]:
    """Per-device orders by start, then end (a zero-length W goes before an op starting with it)."""
    orders: list[list[OpKey]] = [[] for _ in range(instance.num_devices)]
    for key in sorted(starts, key=lambda k: (starts[k], starts[k] + duration[k])):
        orders[instance.placement[key[1]]].append(key)
    return orders


def _first_in_first_out(starts: Mapping[OpKey, int]) -> dict[OpKey, int]:
    """The same op times with microbatches renumbered in start order per (kind, stage)."""
    groups: dict[tuple[str, int], list[int]] = {}
    for (kind, stage, _), start in starts.items():
        groups.setdefault((kind, stage), []).append(start)
    return {(kind, stage, j): start for (kind, stage), times in groups.items() for j, start in enumerate(sorted(times))}


def _exact_multiplier(values: Iterable[float]) -> int | None:
    """The least common multiple of the values' denominators, if all are small fractions."""
    multiplier = 1
    for value in values:
        fraction = Fraction(value).limit_denominator(MAX_EXACT_MULTIPLIER)
        if abs(float(fraction) - value) > 1e-9 * max(1.0, abs(value)):
            return None
        multiplier = math.lcm(multiplier, fraction.denominator)
        if multiplier > MAX_EXACT_MULTIPLIER:
            return None
    return multiplier


def _rounded_multiplier(reference: float, resolution: int) -> int:
    """A power of ten that makes `reference` at least `resolution` ticks."""
    return 10 ** max(0, math.ceil(math.log10(resolution / reference)))


def _name(key: OpKey) -> str:
    kind, stage, microbatch = key
    return f"{kind}{stage}.{microbatch}"
