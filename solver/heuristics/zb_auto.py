"""ZB-auto: the Zero Bubble paper's greedy list scheduler under a memory limit (ZB-1p, ZB-2p).

The builder places ops one at a time, stage by stage, and keeps the time each op would end (the
simulator's as-soon-as-possible rule) because its choices depend on it:

- microbatch 0: each stage runs forwards while memory allows and (one policy) the first backward has
  not yet come back, or (the other) the forward still ends before it comes back; a stage never runs
  more warm-up forwards than the stage before it (fewer, unless that one already runs them all);
- each later microbatch: one forward per stage (stage s only if stage s+1 also takes one), then the
  backward on every stage from the last; before either, pending weight backwards W run when memory
  would overflow, when they fit into the wait for the op's input, and when leaving that wait idle
  would make this device's idle time the largest;
- the remaining Ws close.

Three yes/no policies (bubble before the first B; hold back a forward that is far ahead of the next
stage; fill an affordable wait with a W anyway) give eight schedules; the one with the smallest max
span (the paper's objective) wins. The limit is `instance.memory_limit`, or the 1F1B peak when the
instance has none (that is ZB-1p; twice the 1F1B peak gives ZB-2p).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from pipesat.models import KINDS, Instance, Kind, OpKey, memory_change
from pipesat.models.units import memory_text
from pipesat.solver.heuristics.heuristic import Orders
from pipesat.solver.heuristics.requirements import first_unmet, needs_linear, needs_split_backward


def memory_limits(instance: Instance) -> tuple[float, ...]:
    """The per-device limits ZB-auto keeps to: the instance's, else the 1F1B peak (ZB-1p) on every device."""
    if instance.memory_limit is not None:
        return instance.memory_limit
    return (instance.one_f_one_b_peak(),) * instance.num_devices


def needs_room_for_one_microbatch(instance: Instance) -> str | None:
    for device, limit in enumerate(memory_limits(instance)):
        activation = instance.activation_memory[device]
        if limit < activation:
            least = memory_text(activation, instance.memory_unit)
            return f"needs a memory limit of at least {least} on device {device} (one microbatch's activations)"
    return None


@dataclass(frozen=True)
class Policy:
    """The greedy's three choices (see the module docstring); ZB-auto tries all eight."""

    bubble_before_first_b: bool
    hold_back_forwards: bool
    fill_affordable_waits: bool


POLICIES = tuple(Policy(*flags) for flags in itertools.product((True, False), repeat=3))


class ListScheduler:
    """Per-device orders under construction, with each placed op's end time and each device's state.

    Its times follow the simulator's as-soon-as-possible rule (a test checks that they agree); it
    needs them to decide, but the schedule that leaves ZB-auto is timed by the simulator.
    """

    def __init__(self, instance: Instance, policy: Policy) -> None:
        stages = instance.num_stages
        self.policy = policy
        self.m, self.stages, self.comm = instance.num_microbatches, stages, instance.p2p_time
        self.limit = memory_limits(instance)
        weights = instance.weight_times
        assert weights is not None, "ZB-auto needs a split backward (zb_auto_requirement)"
        self.time = {Kind.F: instance.forward_times, Kind.B: instance.backward_times, Kind.W: weights}
        self.memory = {
            kind: [memory_change(instance, kind, s, split_backward=True) for s in range(stages)] for kind in KINDS
        }
        self.done = {kind: [0] * stages for kind in KINDS}
        self.end = {kind: [[0.0] * self.m for _ in range(stages)] for kind in (Kind.F, Kind.B)}
        self.free_at = [0.0] * stages
        self.first_start = [0.0] * stages
        self.held = [0.0] * stages
        self.idle = [0.0] * stages
        self.max_idle = 0.0
        self.orders: Orders = [[] for _ in range(stages)]

    def input_ready(self, kind: Kind, stage: int, microbatch: int) -> float:
        """When the op's input from the neighbouring stage arrives (0 when it comes from this device)."""
        if kind == Kind.F and stage > 0:
            return self.end[Kind.F][stage - 1][microbatch] + self.comm
        if kind == Kind.B and stage < self.stages - 1:
            return self.end[Kind.B][stage + 1][microbatch] + self.comm
        return 0.0

    def put(self, kind: Kind, stage: int) -> None:
        done = self.done[kind]
        microbatch = done[stage]
        free = self.free_at[stage]
        start = free if kind == Kind.W else max(free, self.input_ready(kind, stage, microbatch))
        if self.done[Kind.F][stage] == 0:
            self.first_start[stage] = start
        elif start > free:
            self.idle[stage] += start - free
            self.max_idle = max(self.max_idle, self.idle[stage])
        end = start + self.time[kind][stage]
        if kind != Kind.W:
            self.end[kind][stage][microbatch] = end
        self.free_at[stage] = end
        self.held[stage] += self.memory[kind][stage]
        done[stage] = microbatch + 1
        self.orders[stage].append(OpKey(kind, stage, microbatch))

    def pending_w(self, stage: int) -> int:
        return self.done[Kind.B][stage] - self.done[Kind.W][stage]

    def make_room(self, stage: int) -> None:
        """Run pending Ws until a forward fits in memory (the requirement guarantees that it then does)."""
        while self.held[stage] + self.memory[Kind.F][stage] > self.limit[stage] and self.pending_w(stage):
            self.put(Kind.W, stage)

    def fill_wait(self, kind: Kind, stage: int) -> None:
        """Run pending Ws in the wait for the op's input: those that fit, then maybe one that overruns it."""
        ready = self.input_ready(kind, stage, self.done[kind][stage])
        w_time = self.time[Kind.W][stage]
        while self.pending_w(stage) and self.free_at[stage] + w_time <= ready:
            self.put(Kind.W, stage)
        if self.pending_w(stage) and self.free_at[stage] < ready:
            affordable = ready - self.free_at[stage] <= self.max_idle - self.idle[stage]
            if not affordable or self.policy.fill_affordable_waits:
                self.put(Kind.W, stage)

    def warmup(self) -> None:
        """Microbatch 0 down and back, with as many extra forwards per stage as the policy allows."""
        last = self.stages - 1
        for stage in range(self.stages):
            self.put(Kind.F, stage)
        extra = [0] * self.stages
        back = self.end[Kind.F][last][0] + self.time[Kind.B][last]  # when B(stage + 1, 0) ends
        for stage in range(last - 1, -1, -1):
            held, busy_until, forward = self.held[stage], self.free_at[stage], self.time[Kind.F][stage]
            arrives = back + self.comm
            while 1 + extra[stage] < self.m and held + self.memory[Kind.F][stage] <= self.limit[stage]:
                ends_late = (
                    busy_until + forward > arrives if self.policy.bubble_before_first_b else busy_until >= arrives
                )
                if ends_late:
                    break
                held += self.memory[Kind.F][stage]
                busy_until += forward
                extra[stage] += 1
            back = max(busy_until, arrives) + self.time[Kind.B][stage]
        for stage in range(1, self.stages):
            before_covers_all = 1 + extra[stage - 1] == self.m
            extra[stage] = min(extra[stage], extra[stage - 1] if before_covers_all else max(extra[stage - 1] - 1, 0))
        for stage in range(self.stages):
            for _ in range(extra[stage]):
                self.put(Kind.F, stage)
        for stage in range(last, -1, -1):
            self.put(Kind.B, stage)

    def wants_forward(self, stage: int) -> bool:
        if self.done[Kind.F][stage] >= self.m:
            return False
        following = stage + 1
        if not (self.policy.hold_back_forwards and following < self.stages):
            return True
        if self.done[Kind.F][stage] < self.done[Kind.F][following] + 2:
            return True
        # Far ahead of the next stage: run the forward only if it ends before that stage's next B can be back.
        back = self.free_at[following] + self.time[Kind.F][following] + self.time[Kind.B][following] + self.comm
        if self.free_at[stage] >= back:
            return False
        room_time, held, pending = 0.0, self.held[stage] + self.memory[Kind.F][stage], self.pending_w(stage)
        while held > self.limit[stage] and pending:
            room_time += self.time[Kind.W][stage]
            held += self.memory[Kind.W][stage]
            pending -= 1
        if self.free_at[stage] + self.time[Kind.F][stage] + room_time <= back:
            return True
        return back - self.free_at[stage] > self.max_idle - self.idle[stage]

    def steady(self) -> None:
        """One more microbatch: forwards where wanted, then every stage's next backward."""
        wants = [self.wants_forward(stage) for stage in range(self.stages)]
        for stage in range(self.stages - 2, -1, -1):
            wants[stage] = wants[stage] and wants[stage + 1]
        for stage in range(self.stages):
            if wants[stage]:
                self.make_room(stage)
                self.fill_wait(Kind.F, stage)
                self.put(Kind.F, stage)
        for stage in range(self.stages - 1, -1, -1):
            self.fill_wait(Kind.B, stage)
            if stage == 0 and self.done[Kind.F][0] == self.m:
                while self.pending_w(0):
                    self.put(Kind.W, 0)
            self.put(Kind.B, stage)

    def build(self) -> tuple[float, Orders]:
        """The orders and their max span."""
        self.warmup()
        for _ in range(1, self.m):
            self.steady()
        for stage in range(self.stages):
            while self.pending_w(stage):
                self.put(Kind.W, stage)
        span = max(end - start for start, end in zip(self.first_start, self.free_at, strict=True))
        return span, self.orders


def zb_auto_orders(instance: Instance) -> Orders:
    """The best of the eight policies' orders by max span (one stage per device, so stage = device)."""
    return min((ListScheduler(instance, policy).build() for policy in POLICIES), key=lambda built: built[0])[1]


def zb_auto_requirement(instance: Instance) -> str | None:
    return first_unmet(instance, needs_linear, needs_split_backward, needs_room_for_one_microbatch)
