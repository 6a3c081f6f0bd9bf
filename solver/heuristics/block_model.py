"""The building block of a repeated V schedule, searched exactly: a CP-SAT model of one block.

The Controllable Memory paper (Qi et al.) builds every V schedule from one building block: one
microbatch's F, B and W on every stage, each at an offset from the block's start, repeated every
interval T, so that each device starts one microbatch per T. This model searches that space on a V
placement (2 stages a device) with the instance's own times and p2p:

- an integer offset x(kind, stage) per op, on a time grid fine enough for the instance's times
  (`_grid`); F(0) at 0;
- the dependencies of one microbatch: F(s) -> F(s+1), F(last) -> B(last), B(s) -> B(s-1) (each with
  p2p between devices) and B(s) -> W(s);
- the repeated schedule conflict-free: with x = q*T + r (0 <= r < T), each device's ops, taken
  modulo T, do not overlap on a circle of length T (for each pair one goes first and the other ends
  by the first's next repeat);
- the memory: stage s's activation lives from its F's start to its B's end (all but the weight
  memory) and to its W's end (the weight memory); at steady state a device holds ceil(lifespan / T)
  copies of each, linearised as an integer `copies` with copies*T >= lifespan, and the sum over the
  device's stages of copies times memory must fit its limit. Summing each stage's maximum is an
  upper bound on the device's true steady-state peak, so every block the model accepts fits;
- minimise T, then the block's length (the end of its last op); or one of the other `GOALS`.

Durations are rounded up and memory amounts up (the limit down) onto the grid, so a block that fits
the model fits the instance.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pipesat.models import Instance, Kind
from pipesat.models.ops import op_duration

if TYPE_CHECKING:
    from ortools.sat.python import cp_model

DEFAULT_TIME_LIMIT = 0.25
"""CP-SAT's deterministic seconds one block search may run by default (it proves V p = 4 optimal within
them on the tests' instances); wall time is capped at ten times that."""

GOALS = ("interval", "fill")
"""What `find_block` may minimise (see there)."""

_DIGITS = 3
"""At most 10**_DIGITS grid steps a unit of time or memory (finer values are rounded conservatively)."""

OpSlot = tuple[Kind, int]
"""An op of the block: (kind, stage)."""


@dataclass(frozen=True)
class Block:
    """A building block found by the model, on its time grid of `scale` steps a unit of time.

    `ticks[op]` is each op's start from the block's start (F of stage 0 at 0) and `period` the
    interval T, in grid steps: microbatch j's op starts at j * period + ticks[op]. `copies[stage]` is
    how many microbatches of the stage's activation a device holds at steady state (by its W's end).
    `optimal` says whether CP-SAT proved the interval (and then the length) optimal within its time limit.
    """

    period: int
    ticks: dict[OpSlot, int]
    length: float
    scale: int
    copies: tuple[int, ...]
    optimal: bool

    @property
    def interval(self) -> float:
        """T in the instance's time unit."""
        return self.period / self.scale

    @property
    def offsets(self) -> dict[OpSlot, float]:
        """Each op's offset in the instance's time unit."""
        return {slot: tick / self.scale for slot, tick in self.ticks.items()}

    def text(self) -> str:
        """One line: T, the length and each device's offsets (F, B, W of its two stages)."""
        stages = len(self.copies)
        parts = []
        for stage in range(stages):
            f, b, w = (self.offsets[kind, stage] for kind in (Kind.F, Kind.B, Kind.W))
            parts.append(f"s{stage} {f:g}/{b:g}/{w:g}")
        return f"T {self.interval:g}, length {self.length:g}, F/B/W offsets " + ", ".join(parts)


def _grid(values: Sequence[float]) -> int:
    """The fewest steps a unit (1, 10, 100, ...) that make every value whole, at most 10**_DIGITS."""
    for digits in range(_DIGITS + 1):
        scale = 10**digits
        if all(abs(value * scale - round(value * scale)) < 1e-6 for value in values):
            return scale
    return 10**_DIGITS


def _up(value: float, scale: int) -> int:
    return math.ceil(value * scale - 1e-6)


def find_block(
    instance: Instance,
    limits: Sequence[float],
    time_limit: float = DEFAULT_TIME_LIMIT,
    workers: int = 1,
    seed: int = 0,
    goal: str = "interval",
) -> Block | None:
    """The best block by `goal` whose steady-state memory fits `limits` (one per device), on a
    V-placed, split-backward `instance`; None when CP-SAT finds none within `time_limit` (its
    deterministic seconds, so that one worker finds the same block on a loaded machine) or none exists.

    The goals (`GOALS`): `interval`, the least T, then the shortest block; `fill`, the least T, then
    the most copies held within the limit, then the shortest block. A
    block that holds more microbatches in flight runs more forwards in the warm-up before its first
    backward, which the as-soon-as-possible timing packs: with the limit to spare, it often ends first.
    """
    from ortools.sat.python import cp_model  # here: the command line's help and refusals start without it

    stages = instance.num_stages
    slots: list[OpSlot] = [(kind, stage) for kind in (Kind.F, Kind.B, Kind.W) for stage in range(stages)]
    seconds = {slot: op_duration(instance, slot[0], slot[1], split_backward=True) for slot in slots}
    scale = _grid([*seconds.values(), instance.p2p_time])
    duration = {slot: _up(seconds[slot], scale) for slot in slots}
    p2p = _up(instance.p2p_time, scale)
    placement = instance.placement
    devices = range(instance.num_devices)
    on_device = {device: [slot for slot in slots if placement[slot[1]] == device] for device in devices}
    busy = max(sum(duration[slot] for slot in on_device[device]) for device in devices)
    # One microbatch alone, every op right after the one it waits for, repeated once it is done, is a
    # block: T need not be longer. Each op waits less than T past its dependency for its place on the circle.
    alone = sum(duration.values()) + 2 * stages * p2p + 1
    horizon = alone * (len(slots) + 1)

    model = cp_model.CpModel()
    interval = model.new_int_var(max(busy, 1), alone, "T")
    start = {slot: model.new_int_var(0, horizon, f"x_{slot[0]}{slot[1]}") for slot in slots}
    end = {slot: start[slot] + duration[slot] for slot in slots}
    model.add(start[Kind.F, 0] == 0)
    for stage in range(stages - 1):
        gap = p2p if placement[stage] != placement[stage + 1] else 0
        model.add(start[Kind.F, stage + 1] >= end[Kind.F, stage] + gap)
        model.add(start[Kind.B, stage] >= end[Kind.B, stage + 1] + gap)
    model.add(start[Kind.B, stages - 1] >= end[Kind.F, stages - 1])
    for stage in range(stages):
        model.add(start[Kind.W, stage] >= end[Kind.B, stage])

    repeats = horizon // max(busy, 1) + 1
    residue = {}
    for slot in slots:
        q = model.new_int_var(0, repeats, "")
        whole = model.new_int_var(0, horizon, "")
        model.add_multiplication_equality(whole, [q, interval])
        residue[slot] = model.new_int_var(0, horizon, "")
        model.add(residue[slot] < interval)
        model.add(start[slot] == whole + residue[slot])
    for device in devices:
        ops = on_device[device]
        for i, a in enumerate(ops):
            for b in ops[i + 1 :]:
                first = model.new_bool_var("")
                ra, rb, da, db = residue[a], residue[b], duration[a], duration[b]
                model.add(ra + da <= rb).only_enforce_if(first)
                model.add(rb + db <= ra + interval).only_enforce_if(first)
                model.add(rb + db <= ra).only_enforce_if(~first)
                model.add(ra + da <= rb + interval).only_enforce_if(~first)

    memory_scale = _grid([*instance.activation_memory, *instance.weight_memory, *limits])
    copies = {}
    for device in devices:
        held = []
        budget = math.floor(limits[device] * memory_scale + 1e-6)
        for stage in instance.stages_of(device):
            weight = _up(instance.weight_memory[stage], memory_scale)
            rest = _up(instance.activation_memory[stage] - instance.weight_memory[stage], memory_scale)
            for kind, amount in ((Kind.B, rest), (Kind.W, weight)):
                most = repeats + 1 if amount == 0 else max(1, min(repeats + 1, budget // amount))
                count = model.new_int_var(1, most, "")
                covered = model.new_int_var(0, horizon * (repeats + 2), "")
                model.add_multiplication_equality(covered, [count, interval])
                lifespan = end[kind, stage] - start[Kind.F, stage]
                model.add(covered >= lifespan)
                if goal == "fill":  # count is ceil(lifespan / T), not more (slower to solve: only here)
                    model.add(covered < lifespan + interval)
                held.append(amount * count)
                copies[kind, stage] = count
        model.add(sum(held) <= budget)

    longest = horizon + alone  # no op starts after `horizon` or lasts `alone`
    length = model.new_int_var(0, longest, "length")
    for stage in range(stages):
        model.add(length >= end[Kind.W, stage])
    # Objective parts, each weighted to dominate the next: the length is at most `longest`, the copies
    # fewer than `held_most`.
    held_most = len(copies) * (repeats + 1) + 1
    if goal == "fill":  # the least interval, then the most copies held, then the shortest block
        model.minimize((interval * held_most - sum(copies.values())) * (longest + 1) + length)
    else:
        model.minimize(interval * (longest + 1) + length)

    _hint_alone(model, interval, start, duration, placement, p2p, alone)
    solver = cp_model.CpSolver()
    # Deterministic time: with one worker the same block whatever the machine's load (wall time only guards).
    solver.parameters.max_deterministic_time = time_limit
    solver.parameters.max_time_in_seconds = 10 * time_limit
    solver.parameters.num_workers = workers
    solver.parameters.random_seed = seed
    # CP-SAT catches SIGINT by default and leaves it at the default (ending the process) afterwards;
    # this search runs in the caller's process (compare, a solve's starts), where Ctrl-C must stay Python's.
    solver.parameters.catch_sigint_signal = False
    status = solver.solve(model)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return None
    return Block(
        period=solver.value(interval),
        ticks={slot: solver.value(start[slot]) for slot in slots},
        length=solver.value(length) / scale,
        scale=scale,
        copies=tuple(solver.value(copies[Kind.W, stage]) for stage in range(stages)),
        optimal=status == cp_model.OPTIMAL,
    )


def _hint_alone(
    model: cp_model.CpModel,
    interval: cp_model.IntVar,
    start: dict[OpSlot, cp_model.IntVar],
    duration: dict[OpSlot, int],
    placement: Sequence[int],
    p2p: int,
    alone: int,
) -> None:
    """Hint the block that is always there when one microbatch's activations fit: one microbatch alone,
    each F and B right after the op it waits for, then the Ws one after another, T the whole of it
    (CP-SAT completes the other variables)."""
    stages = len(placement)
    chain = [(Kind.F, s) for s in range(stages)] + [(Kind.B, s) for s in reversed(range(stages))]
    chain += [(Kind.W, s) for s in reversed(range(stages))]
    at = 0
    for i, slot in enumerate(chain):
        if i > 0 and placement[chain[i - 1][1]] != placement[slot[1]] and slot[0] != Kind.W:
            at += p2p
        model.add_hint(start[slot], at)
        at += duration[slot]
    model.add_hint(interval, alone)
