"""Tick scaling: CP-SAT works with integers, so times and memory are scaled to whole ticks.

When every time is a fraction whose denominators have a least common multiple of at most
`MAX_EXACT_MULTIPLIER` (decimals such as 18.522 or p2p 0.0795654, thirds, quarters), that multiple is
the scale and the model is exact, as long as the longest schedule still fits CP-SAT's integers
(`TICK_BUDGET` ticks). Otherwise times are floored at 1/10_000 of the smallest positive time (memory
at 1/1_000_000 of the largest): flooring makes the model a relaxation, so its proven bounds stay valid. For the max span
the time scale is further multiplied by lcm(1..p) (while the scale stays at most 10**7 ticks per
unit, so up to p = 8 with millisecond decimals): the smallest max span of an order is a cycle mean
over at most p devices, so only then is it a whole number of ticks. Beyond that a proven span bound
is one tick below the model's. Either way the solver re-times the model's per-device order at the
instance's exact float times, so schedules users get are exact.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable
from dataclasses import dataclass
from fractions import Fraction

from pipesat.models import Instance, Objective
from pipesat.models.ops import offload_amount, transfer_time
from pipesat.models.tolerance import same, slack

MAX_EXACT_MULTIPLIER = 10**9
# The most ticks the longest conceivable schedule may span: far inside CP-SAT's 64-bit integers, and
# where doubles still hold every whole number exactly.
TICK_BUDGET = 2**50
TIME_RESOLUTION = 10_000
MEMORY_RESOLUTION = 1_000_000
MAX_SPAN_SCALE = 10**7


@dataclass(frozen=True)
class TickScale:
    """How the model's integers relate to the instance's floats: `ticks = value * per_unit`."""

    time: int
    memory: int
    exact_time: bool
    exact_memory: bool
    # True when the min max span of an order is a whole number of ticks (see the module notes).
    exact_span: bool


def choose_scale(instance: Instance, objective: Objective, offload: bool = False) -> TickScale:
    """The tick resolution for `instance` and the time objective (see the module notes)."""
    times = [
        *instance.forward_times,
        *instance.backward_times,
        *(instance.weight_times or ()),
        *(instance.forward_comm_times or ()),
        *(instance.backward_comm_times or ()),
        instance.p2p_time,
        *(transfer_time(instance, s) for s in range(instance.num_stages) if offload),
    ]
    budget = max(1, int(TICK_BUDGET // _longest_schedule(instance, objective)))
    time_multiplier = _exact_multiplier(times, min(MAX_EXACT_MULTIPLIER, budget))
    exact_time = time_multiplier is not None
    if time_multiplier is None:
        time_multiplier = _rounded_multiplier(min(t for t in times if t > 0), TIME_RESOLUTION)
    span_multiplier = math.lcm(*range(1, instance.num_devices + 1))
    exact_span = exact_time and time_multiplier * span_multiplier <= MAX_SPAN_SCALE
    if objective == Objective.SPAN and exact_span:
        time_multiplier *= span_multiplier

    memories = [*instance.activation_memory, *instance.weight_memory]
    if offload:
        memories.extend(offload_amount(instance, s) for s in range(instance.num_stages))
        memories.extend(() if instance.host_memory is None else (instance.host_memory,))
    if instance.memory_limit is not None:
        memories.extend(instance.memory_limit)
    memory_multiplier = _exact_multiplier(memories, MAX_EXACT_MULTIPLIER)
    exact_memory = memory_multiplier is not None
    if memory_multiplier is None:
        memory_multiplier = _rounded_multiplier(max(memories), MEMORY_RESOLUTION)
    return TickScale(time_multiplier, memory_multiplier, exact_time, exact_memory, exact_span)


def to_ticks(value: float, per_unit: int) -> int:
    """`value * per_unit` as an integer: rounded when within float noise of one (`slack`: decimal
    inputs such as 0.601 * 3000 land a few units in the last place off the integer they stand for),
    else floored, so that an inexact time never rounds up and the model stays a relaxation (a
    looser noise of 10^-6 relative once rounded 2π at 10^5 ticks, 628,318.53, up to 628,319, and a
    proven bound passed a valid schedule's value)."""
    scaled = value * per_unit
    nearest = round(scaled)
    return nearest if abs(scaled - nearest) <= slack(scaled) else math.floor(scaled)


def ceil_ticks(value: float) -> int:
    """The least whole tick at or above `value`, float noise ignored (`models.tolerance`)."""
    return math.ceil(value - slack(value))


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
        forward_comm_times=None if instance.forward_comm_times is None else times(instance.forward_comm_times),
        backward_comm_times=None if instance.backward_comm_times is None else times(instance.backward_comm_times),
        p2p_time=float(to_ticks(instance.p2p_time, scale.time)),
        activation_memory=memory(instance.activation_memory),
        weight_memory=memory(instance.weight_memory),
        memory_limit=None if instance.memory_limit is None else memory(instance.memory_limit),
        # Memory ticks per time tick: a transfer lasts its amount over it (offload only reads it).
        host_link_bandwidth=None
        if instance.host_link_bandwidth is None
        else instance.host_link_bandwidth * scale.memory / scale.time,
    )


def _exact_multiplier(values: Iterable[float], most: int) -> int | None:
    """The least common multiple of the values' denominators, if it is at most `most`."""
    multiplier = 1
    for value in values:
        fraction = Fraction(value).limit_denominator(most)
        if not same(float(fraction), value):
            return None
        multiplier = math.lcm(multiplier, fraction.denominator)
        if multiplier > most:
            return None
    return multiplier


def _longest_schedule(instance: Instance, objective: Objective) -> float:
    """An upper bound, in instance units, on the horizon of the model (`solver.cpsat.data`)."""
    work = instance.num_microbatches * (
        sum(instance.forward_times) + sum(instance.backward_times) + sum(instance.weight_times or ())
    )
    total = work + instance.p2p_time * 3 * instance.num_stages * instance.num_microbatches
    return max(total, 1e-300) * (instance.num_devices + 1 if objective == Objective.SPAN else 1)


def _rounded_multiplier(reference: float, resolution: int) -> int:
    """A power of ten that makes `reference` at least `resolution` ticks."""
    return 10 ** max(0, math.ceil(math.log10(resolution / reference)))
