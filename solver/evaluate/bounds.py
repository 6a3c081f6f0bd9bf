"""Proven lower bounds on the makespan, the max span and the peak memory of any valid schedule.

Every bound holds for every schedule of the instance with the backward split or fused as asked and
the memory limit respected (the validator's tolerance included). The bounds on one device's span
and the arguments behind them (its busy time, one microbatch's chain, its head and tail windows, its
memory energy, enclosed devices, spaced forwards) are in `device_bounds`, the knapsacks they fill in
`knapsack`. Here they are combined, with two more arguments, per device d:

- *stage 0's device* (one route): each op of a microbatch starts after its stage-0 F starts and,
  but for a W, ends by its stage-0 B's end, both on stage 0's device d0. Give every W off d0 no time
  and run it at its B's end: the schedule stays valid (it frees its memory no later), and its
  makespan is d0's span, no more than the max span. So the max span is at least the makespan bound
  of the instance with those W ops free; with B and W fused, of the instance itself: every
  schedule's max span is then its makespan (`span_is_makespan`).
- For the makespan, d's first op cannot start before its first stage's forward chain reaches it,
  and (with a fused backward) the backward chain still runs after d's last op; after d's last B its
  microbatch's chain still runs to the end.

On an instance whose ops carry communication, overlapped pairs can hide it, so `lower_bound` and
`memory_bound_under_cap` bound the instance's compute alone (`without_communication`): every
schedule with pairs becomes one of that instance, no pairs, with every op run in its own interval's
first part (a pair lasts at least its two computes), each F starting and each B and W ending no
later, so no bound of it is more than the real schedule's value. One thing the relaxation forgets is
kept: in a device's head window (before its first B) there is no B to pair a forward with, so each
forward there runs alone and pays its all-to-all; the window then exceeds the compute of the
forwards in it by at least the least all-to-all share of a forward times the window
(`head_share`): filled to the window with forwards, a share of them is communication; filled
beyond, their communication alone is at least that share of the window.

The bounds that search (the knapsacks, the spaced forwards, the bisection of `memory_bound_under_cap`)
go as far as the solve's `Tuning` says: each takes it, pipesat's default unless given.
"""

from __future__ import annotations

import dataclasses
import math

from pipesat.models import Instance, InstanceError, Kind, Objective, backward_kinds, op_duration
from pipesat.models.tolerance import slack
from pipesat.models.tuning import DEFAULT_TUNING, Tuning
from pipesat.solver.evaluate.device_bounds import (
    chain_offsets,
    device_span_bound,
    enclosure,
    forward_spacing,
    memory_energy,
    until_last_backward,
    zero_bubble_bound,
)


def without_communication(instance: Instance) -> Instance:
    """The instance's compute alone: each op's time less its communication part (see the module notes)."""
    if not instance.has_communication:
        return instance

    def compute(times: tuple[float, ...], comm: tuple[float, ...] | None) -> tuple[float, ...]:
        return times if comm is None else tuple(t - c for t, c in zip(times, comm, strict=True))

    return dataclasses.replace(
        instance,
        forward_times=compute(instance.forward_times, instance.forward_comm_times),
        backward_times=compute(instance.backward_times, instance.backward_comm_times),
        forward_comm_times=None,
        backward_comm_times=None,
    )


def resolve_split(instance: Instance, split_backward: bool | None) -> bool:
    """The backward mode to schedule: the instance's when None; a split needs weight times."""
    if split_backward is None:
        return instance.split_backward
    if split_backward and not instance.split_backward:
        raise InstanceError("a split backward needs weight_times in the instance; add weight_times or drop the split")
    return split_backward


def minimum_memory_limit(instance: Instance) -> float:
    """The smallest memory limit (the same on every device) any schedule fits in, exactly: the largest
    of `minimum_memory_limits`."""
    return max(minimum_memory_limits(instance))


def minimum_memory_limits(instance: Instance) -> list[float]:
    """Each device's smallest memory limit, exactly: what one microbatch of all its stages holds.

    Every forward of a microbatch comes before its first backward, so when device d starts the forward
    of its last stage for a microbatch it holds that microbatch's activations of all its stages (on the
    microbatch's route: of one copy, on a bidirectional placement). Running
    one microbatch at a time holds no more, so the bound is met on every device at once.
    """
    return [
        max(sum(instance.activation_memory[s] for s in on_route) for on_route in instance.route_stages(d))
        for d in range(instance.num_devices)
    ]


def least_offload_limits(instance: Instance) -> list[float]:
    """Each device's smallest memory limit when activations may be offloaded, exactly (docs/offload.md).

    An F holds its stage's whole activation from its start, offloaded or not; a microbatch's earlier
    stages on the device (on its route) keep what an offload leaves, `1 - offload_fraction` of theirs,
    until their B, which comes after this F's. So device d holds at least, for some stage s of its,
    M_B[s] plus that part of its earlier stages'. The one-at-a-time order with everything offloaded
    (`solver.heuristics.offloaded`) holds no more. With `host_memory` it is a lower bound only: that
    order may need more of the host than it holds.
    """
    kept = 1 - instance.offload_fraction
    memory = instance.activation_memory
    return [
        max(
            memory[s] + kept * sum(memory[a] for a in on_route[:i])
            for on_route in instance.route_stages(d)
            for i, s in enumerate(on_route)
        )
        for d in range(instance.num_devices)
    ]


def critical_path_bound(instance: Instance, split: bool) -> float:
    """The makespan of one microbatch alone: its forward chain, backward chain and last W, with p2p."""
    offsets = chain_offsets(instance, split)
    return max(offset + op_duration(instance, kind, stage, split) for (kind, stage), offset in offsets.items())


def head_share(instance: Instance, device: int) -> float:
    """The least share of its time a forward of `device` spends in communication (0 without any)."""
    if instance.forward_comm_times is None:
        return 0.0
    return min(instance.forward_comm_times[s] / instance.forward_times[s] for s in instance.stages_of(device))


def span_bound(instance: Instance, split: bool, *, tuning: Tuning = DEFAULT_TUNING) -> float:
    """A lower bound on the max span under the instance's memory limits (of its compute alone, and
    the communication of its head windows, with communication): the busiest device's work, every
    device's span bound, every device's span from the time to the last B of each device it
    encloses, and stage 0's device's span from the makespan (`first_device_span_bound`)."""
    relaxed = without_communication(instance)
    offsets = chain_offsets(relaxed, split)
    devices = range(instance.num_devices)
    shares = [head_share(instance, d) for d in devices]
    spans = (device_span_bound(relaxed, split, d, shares[d], tuning=tuning) for d in devices)
    best = max(zero_bubble_bound(relaxed, split), *spans)
    for inner in devices:
        widest: dict[float, float] = {}  # per spacing of the inner device's forwards, the widest enclosure
        for outer in devices:
            more = enclosure(relaxed, split, outer, inner, offsets)
            if more is not None:
                firsts = relaxed.stages_of(outer)[0], relaxed.stages_of(inner)[0]
                spacing = forward_spacing(relaxed, *firsts, tuning=tuning)
                widest[spacing] = max(more, widest.get(spacing, -math.inf))
        for spacing, more in widest.items():
            # A wider spacing only raises the time to the last B: this one counts if it encloses more.
            if all(other < more for wider, other in widest.items() if wider > spacing):
                tail = until_last_backward(relaxed, split, inner, offsets, shares[inner], spacing, tuning=tuning)
                best = max(best, more + tail)
    return max(best, first_device_span_bound(instance, split, tuning=tuning))


def makespan_bound(instance: Instance, split: bool, *, tuning: Tuning = DEFAULT_TUNING) -> float:
    """A lower bound on the makespan: per device, head + span bound + tail, and head + the time to its
    last B + the chain after that B; and the critical path (of the compute alone, and the
    communication of its head windows, with communication)."""
    shares = [head_share(instance, d) for d in range(instance.num_devices)]
    instance = without_communication(instance)
    offsets = chain_offsets(instance, split)
    placement = instance.placement
    best = critical_path_bound(instance, split)

    def end_of_chain(stage: int) -> float:
        first = instance.route_at(stage).start
        return offsets[(Kind.B, first)] + op_duration(instance, Kind.B, first, split)

    for d in range(instance.num_devices):
        stages = instance.stages_of(d)
        head = min(offsets[(Kind.F, s)] for s in stages)
        if split:
            tail = 0.0  # a W can be the last op of every schedule
        else:
            # The last op on d is a B whose successor on its route (if any) runs elsewhere.
            last_candidates = [s for s in stages if s == instance.route_at(s).start or placement[s - 1] != d]
            tail = min(
                end_of_chain(s) - offsets[(Kind.B, s)] - op_duration(instance, Kind.B, s, split)
                for s in last_candidates
            )
        best = max(best, head + device_span_bound(instance, split, d, shares[d], tuning=tuning) + tail)
        best = max(best, _makespan_through_last_backward(instance, split, d, offsets, shares[d], tuning))
    return best


def _makespan_through_last_backward(
    instance: Instance, split: bool, device: int, offsets: dict[tuple[Kind, int], float], share: float, tuning: Tuning
) -> float:
    """The makespan from `device`'s time up to its last B (`until_last_backward`): before it, the chain
    from the schedule's first op to the device's first stage; after it, the chain from that B (of the
    device's first stage on its route) to the last op of its microbatch."""
    lead, trail = math.inf, math.inf
    kinds = backward_kinds(split)
    for on_route in instance.route_stages(device):
        first = on_route[0]
        after_last_b = offsets[(Kind.B, first)] + op_duration(instance, Kind.B, first, split)
        later = [
            offsets[(kind, s)] + op_duration(instance, kind, s, split)
            for kind in kinds
            for s in instance.route_at(first)
            if s < first or (s == first and kind == Kind.W)
        ]
        lead = min(lead, offsets[(Kind.F, first)])
        trail = min(trail, max(later, default=after_last_b) - after_last_b)
    spacing = forward_spacing(instance, 0, instance.stages_of(device)[0], tuning=tuning)
    return lead + until_last_backward(instance, split, device, offsets, share, spacing, tuning=tuning) + trail


def memory_bound_under_cap(
    instance: Instance, split: bool, objective: Objective, time_cap: float, *, tuning: Tuning = DEFAULT_TUNING
) -> float:
    """A lower bound on the peak memory of any schedule whose makespan (or max span) is at most
    `time_cap`: the smallest feasible limit, every device's memory energy over the cap (its span is
    at most the cap), and the largest limit whose time bound already passes the cap (by bisection,
    `Tuning.bisections` halvings: the time bound only falls as the limit grows)."""
    relaxed = without_communication(instance)
    least = minimum_memory_limit(instance)
    energy = max(memory_energy(relaxed, split, d) for d in range(instance.num_devices)) / time_cap
    low, high = max(least, energy), max(least, energy)

    def time_bound(limit: float) -> float:
        limited = instance.with_limit(limit)
        if objective == Objective.MAKESPAN:
            return makespan_bound(limited, split, tuning=tuning)
        return span_bound(limited, split, tuning=tuning)

    if time_bound(high) <= time_cap:
        return low
    while time_bound(high) > time_cap:
        low, high = high, 2 * high
    for _ in range(tuning.bisections):
        middle = (low + high) / 2
        if time_bound(middle) > time_cap:
            low = middle
        else:
            high = middle
    # Every schedule whose peak the validator accepts under `low` (up to its float tolerance) is
    # slower than the cap, so one within the cap holds more than that.
    return low + slack(low)


def span_is_makespan(instance: Instance, split: bool) -> bool:
    """Whether every schedule's max span is its makespan: on one route with B and W fused, each op of
    a microbatch starts after its stage-0 F starts and ends by its stage-0 B's end, both on stage 0's
    device, so that device's span is the makespan, which no span exceeds."""
    return not split and not instance.bidirectional


def first_device_span_bound(instance: Instance, split: bool, *, tuning: Tuning = DEFAULT_TUNING) -> float:
    """A lower bound on the span of stage 0's device on one route (0 on two): the makespan bound of
    the instance, with the W ops of every other device free when the backward is split (see the
    module notes)."""
    if instance.bidirectional:
        return 0.0
    if span_is_makespan(instance, split):
        return makespan_bound(instance, split, tuning=tuning)
    return makespan_bound(first_device_instance(instance), split, tuning=tuning)


def first_device_instance(instance: Instance) -> Instance:
    """The instance (one route, backward split) whose makespan is at most stage 0's device's span in
    any schedule: its compute alone, with every W off that device taking no time (see the module
    notes). Its optimum makespan is a lower bound on the max span."""
    relaxed = without_communication(instance)
    assert relaxed.weight_times is not None  # a split backward has weight times (`resolve_split`)
    first = relaxed.placement[0]
    kept = tuple(t if relaxed.placement[s] == first else 0.0 for s, t in enumerate(relaxed.weight_times))
    return dataclasses.replace(relaxed, weight_times=kept)


def lower_bound(
    instance: Instance,
    objective: Objective = Objective.MAKESPAN,
    split_backward: bool | None = None,
    *,
    tuning: Tuning = DEFAULT_TUNING,
) -> float:
    """The best proven lower bound on `objective` (makespan, span or memory) under the instance's limit,
    its searches as far as `tuning` says."""
    split = resolve_split(instance, split_backward)
    if objective == Objective.MEMORY:
        return minimum_memory_limit(instance)
    if objective == Objective.SPAN:
        return span_bound(instance, split, tuning=tuning)
    if objective == Objective.MAKESPAN:
        return makespan_bound(instance, split, tuning=tuning)
    raise InstanceError(f"unknown objective {objective!r}; use makespan, span or memory")
