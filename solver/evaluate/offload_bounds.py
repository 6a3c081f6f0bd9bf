"""A lower bound on the makespan under a memory limit when activations may be offloaded over the host
link (docs/offload.md): the memory energy of `device_bounds`, less what offloads can save of it within
what the link can carry.

Per device d and makespan T: at no moment does d hold more than its limit, so the area of its held
memory over time is at most limit x T. Each (stage s, microbatch) of d holds, over time (F's start
to its B's end lasting L, at least the chain's round trip `until_b`):

- not offloaded: M_B for L, then M_W until its W ends: at least M_B·until_b + M_W·W (the energy of
  `device_bounds.memory_energy`);
- offloaded, moving f·M_B (`offload_fraction`) in a transfer of X each way: M_B from F's start to the
  offload's end (at least F + X: the offload starts after F ends), (1 - f)·M_B from then to the
  reload's start, and M_B again from the reload's start to B's end (at least X + B); so
  M_B·L - f·M_B·(L - F - 2X - B) + M_W·W, at least M_B·c + (1 - f)·M_B·(until_b - c) + M_W·W with
  c = F + 2X + B once L ≥ c (the order forces it).

So an offload saves at most f·M_B·(until_b - c) of the energy, and only when that is positive. Its
offloads run one at a time on the link's device-to-host direction, all within d's span S (nothing
is held before d's first op, which starts no earlier than its chain offset r), so the offloaded
(stage, microbatch)s' X add up to at most S: the most energy offloads can save within S is at most a
fractional knapsack's (saving per unit of link time, at most m per stage), which grows with S. The
bound is r plus the least S with limit x S + that saving ≥ the energy without offload, found by
bisection (the left side only grows with S). The same holds with amounts counted in quanta
(`memory_quanta`: floor(a / q) of each amount a, floor(limit / q) of the limit), where two
microbatches at a time under a limit of 2.67 are two, not 2.67; the bound is the largest over the
candidate quanta and the fluid count.

It assumes nothing else about the order, so it holds beside the instance's bounds without a memory
limit (an offloading schedule's compute ops form a schedule without one), and the solve takes the
larger (`portfolio.Problem.lower_bound`).

A second bound holds with offload too, because what a W keeps (M_W) is never offloaded and a B needs
its activations on the device (`last_backward_bound`): after a device's last B ends (at t), the
device runs only W ops, and only those whose microbatches hold M_W then. During that B the device
held its M_B and every such M_W, so the W time left after t is at most that B's own W and the
knapsack of W times whose M_W fit beside its M_B in the limit, A(s) for a last B of stage s. Before
t the device ran everything else, from its first op's earliest start r on: t ≥ r + busy - A(s). From
t the microbatch of that B still runs its chain back to the route's first stage (the Bs down, that
stage's W), `tail(s)` long. So the makespan is at least r + busy + max(0, tail(s) - A(s)), the
least over the device's stages s. It binds where the limit leaves room for few M_W beside an M_B: the
zero-bubble schedules' cool-down defers Ws to fill the chain's wait, and a device that cannot hold
them idles. On OptPipe's instance at 1/4 of the 1F1B peak (benchmarks/bench_offload.py), the last
device holds one microbatch at a time (3,212 + 3,210 MiB against 4,352), so A = one W (25.7 ms)
against a chain of 151 ms: the bound rises from the no-limit optimum, 1,430.0, to 1,550.1.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass

from pipesat.models import Instance, Kind, op_duration
from pipesat.models.ops import offload_amount, transfer_time
from pipesat.models.tuning import DEFAULT_TUNING, Tuning
from pipesat.solver.evaluate.device_bounds import busy_time, capacity_of, chain_offsets, held_memory
from pipesat.solver.evaluate.knapsack import max_total_time
from pipesat.solver.evaluate.memory_quanta import memory_slots, quanta, quanta_of

BISECTIONS = 60
"""Halvings of the bracket on T: 2^-60 of the energy bound, far below the validator's tolerance."""


def offload_energy_bound(instance: Instance, split: bool) -> float:
    """The largest, over devices, of the earliest start of their first op and the least span whose
    memory area under the limit, with the most the host link can save by offloading, covers the
    device's energy, fluid or counted in quanta (`memory_quanta`); 0 without a limit."""
    offsets = chain_offsets(instance, split)
    return max((_device_bound(instance, split, d, offsets) for d in range(instance.num_devices)), default=0.0)


def _device_bound(instance: Instance, split: bool, device: int, offsets: dict[tuple[Kind, int], float]) -> float:
    capacity = capacity_of(instance, device)
    stages = instance.stages_of(device)
    if capacity is None or capacity <= 0 or not stages:
        return 0.0
    held = held_memory(instance, split, device, offsets)
    offloads = _offloads(instance, split, device, offsets)
    amounts = [amount for amount, _ in held] + [offload.kept for offload in offloads]
    measures: list[tuple[Callable[[float], float], float]] = [(lambda amount: amount, capacity)]
    measures += [
        (functools.partial(_quanta_of, quantum=q), memory_slots(capacity, q)) for q in quanta(amounts, capacity)
    ]
    span = max(_least_span(held, offloads, measure, room, instance.stage_microbatches) for measure, room in measures)
    return min(offsets[(Kind.F, s)] for s in stages) + span


def _quanta_of(amount: float, quantum: float) -> float:
    return float(quanta_of(amount, quantum))


def _least_span(
    held: list[tuple[float, float]],
    offloads: list[Offload],
    measure: Callable[[float], float],
    room: float,
    per_stage: int,
) -> float:
    """The least span with `room` x span, plus the most that offloads within span of link time save,
    at least the energy of `held`, both in `measure` (an amount's bytes, or its quanta)."""
    energy = sum(measure(amount) * duration for amount, duration in held)
    savings = sorted(
        ((saved, offload.link) for offload in offloads if (saved := offload.saving(measure)) > 0),
        key=lambda item: item[0] / item[1] if item[1] > 0 else math.inf,
        reverse=True,
    )

    def covered(span: float) -> bool:
        return room * span + _most_saved(savings, span, per_stage) >= energy

    low, high = 0.0, energy / room
    for _ in range(BISECTIONS):
        middle = (low + high) / 2
        low, high = (low, middle) if covered(middle) else (middle, high)
    return low


@dataclass(frozen=True)
class Offload:
    """What one offload of a stage's microbatch can change of its held memory: it holds all of M_B
    (`held`) for at least `least_held` (F, the transfer each way, B) and what the offload leaves
    (`kept`) for the rest of its round trip, `until_b` at least; its transfer takes `link` each way."""

    held: float
    kept: float
    until_b: float
    least_held: float
    link: float

    def saving(self, measure: Callable[[float], float]) -> float:
        """The most energy, in `measure`, that the offload saves: none unless the round trip is longer."""
        return (measure(self.held) - measure(self.kept)) * max(0.0, self.until_b - self.least_held)


def _offloads(instance: Instance, split: bool, device: int, offsets: dict[tuple[Kind, int], float]) -> list[Offload]:
    """One `Offload` for each of `device`'s stages (none without a host link)."""
    if instance.host_link_bandwidth is None:
        return []
    found = []
    for s in instance.stages_of(device):
        backward = op_duration(instance, Kind.B, s, split)
        link = transfer_time(instance, s)
        held = instance.activation_memory[s]
        found.append(
            Offload(
                held=held,
                kept=held - offload_amount(instance, s),
                until_b=offsets[(Kind.B, s)] + backward - offsets[(Kind.F, s)],
                least_held=op_duration(instance, Kind.F, s, split) + 2 * link + backward,
                link=link,
            )
        )
    return found


def _most_saved(savings: list[tuple[float, float]], span: float, per_stage: int) -> float:
    """The most energy offloads save with at most `span` of link time and `per_stage` offloads of
    each stage: the fractional knapsack over `savings`, taken in their order (best saving per unit of
    link time first)."""
    total, room = 0.0, span
    for saved, link in savings:
        count = float(per_stage) if link <= 0 else min(float(per_stage), room / link)
        total += count * saved
        room -= count * link
        if room <= 0:
            break
    return total


def last_backward_bound(instance: Instance, split: bool, *, tuning: Tuning = DEFAULT_TUNING) -> float:
    """The largest, over devices with a limit, of their first op's earliest start, their busy time,
    and what the chain after their last B leaves idle beyond the W time they can hold (module notes;
    0 without a limit or with the backward fused, where nothing follows a device's last B)."""
    if not split:
        return 0.0
    offsets = chain_offsets(instance, split)
    best = 0.0
    for device in range(instance.num_devices):
        capacity = capacity_of(instance, device)
        stages = instance.stages_of(device)
        if capacity is None or not stages:
            continue
        held = [(op_duration(instance, Kind.W, s, split), instance.weight_memory[s]) for s in stages]
        idle = math.inf
        for s in stages:
            first = instance.route_at(s).start
            end = offsets[(Kind.W, first)] + op_duration(instance, Kind.W, first, split)
            tail = end - offsets[(Kind.B, s)] - op_duration(instance, Kind.B, s, split)
            room = capacity - instance.activation_memory[s]
            others = max_total_time(held, instance.stage_microbatches, max(room, 0.0), tuning=tuning)
            left = op_duration(instance, Kind.W, s, split) + others
            idle = min(idle, max(0.0, tail - left))
        start = min(offsets[(Kind.F, s)] for s in stages)
        best = max(best, start + busy_time(instance, split, device) + idle)
    return best
