"""Proven lower bounds on the makespan, the max span and the peak memory of any valid schedule.

Every bound holds for every schedule of the instance with the backward split or fused as asked and
the memory limit respected (the validator's tolerance included). The arguments, per device d:

- *busy*: d runs all its ops one at a time, so its span is at least their total time.
- *one microbatch*: the ops of one microbatch form a chain (forwards down, backwards up, each W after
  its B) with p2p between devices; `chain_offsets` gives the earliest start of each op after the
  microbatch's first forward, which every other distance here is measured with.
- *head window* (the memory-aware bound): from d's first op until its first B ends, d frees nothing,
  so it runs only forwards that fit in the memory limit together (and at most m per stage; on one
  route, per microbatch the forwards of its first stages on d) plus that B. The window lasts at
  least the round trip from d's first stage down and back to that B, so the rest of it is idle.
- *tail window* (the same argument in reverse time): from the start of d's last forward to its last
  op, d runs that forward and then only B and W ops: a B and its W for each microbatch and stage
  holding M_B at that moment, a W for each one holding only M_W, all within the limit. The window
  lasts at least the round trip from d's last forward stage to the end of that microbatch's last op
  on d.
- The two windows are disjoint when d has more forwards than fit in the limit together; their idle
  times then add up, otherwise the larger counts.
- *memory energy*: every microbatch holds each of d's stages' activations from its forward's start
  until its B (and, for M_W, its W) ends, at least the round trip of the chain in between; all of it
  lies within d's span and at no moment passes the limit, so the span is at least the total of
  amount x duration over the limit.
- *up to the last B*: from d's last forward to the end of its last B, the round trip of that
  microbatch back to d's first stage, and at most the work d holds then less the W ops it defers
  past that B; so d's time up to its last B is its busy time, its head idle and that tail term,
  negative by at most the W time it can hold (`until_last_backward`). On one route a microbatch
  whose B of a later stage of d is still to come has those of its earlier stages still to come too.
- *enclosed devices*: when d's first stage comes before every stage of device e on every route, d's
  span starts before e's first op and ends after e's last B by the chains between them, so it is
  at least those chains plus e's time up to its last B (`enclosure`).
- *spaced forwards*: on one route the forwards of e's first stage start no faster than the longest
  forward between d's first stage and it allows (`forward_spacing`), so in e's head window fewer
  microbatches can have arrived, unless e's first op starts late by as much: the lead and e's head
  idle are bounded together (`until_last_backward` with a spacing; the makespan's the same way from
  the schedule's first op).
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
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import math
from collections import Counter
from collections.abc import Sequence

from pipesat.models import Instance, InstanceError, Objective, op_duration
from pipesat.models.tolerance import fits, slack

# Branch-and-bound nodes of one knapsack before falling back to its (still sound) fractional bound.
KNAPSACK_NODES = 20_000
# Combinations of held backwards `least_tail` enumerates before falling back to its (still sound)
# Lagrangian bound.
EXACT_TAIL_NODES = 200
# Halvings of the search for the least memory that a time cap allows (a relative precision of 2^-40).
BISECTIONS = 40
# Forwards arrive spaced (`forward_spacing`); bench_proofs' variant `no-spacing` turns it off to measure it.
SPACED_FORWARDS = True

Item = tuple[float, float]
"""A kind of op in a knapsack: (its time, its memory weight)."""
HeldItem = tuple[float, float, float]
"""What a microbatch of a stage held by a device has left to run: (its time, the W time in it, the memory held)."""


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


def chain_offsets(instance: Instance, split: bool) -> dict[tuple[str, int], float]:
    """Earliest start of each op of one microbatch, `(kind, stage) -> time`, after its first forward
    starts: along its route, so each stage's offsets are those of the microbatches that pass it."""
    placement, p2p = instance.placement, instance.p2p_time
    offsets: dict[tuple[str, int], float] = {}
    for route in instance.routes():
        time = 0.0
        for s in route:
            if s > route.start and placement[s] != placement[s - 1]:
                time += p2p
            offsets[("F", s)] = time
            time += instance.forward_times[s]
        for s in reversed(route):
            if s < route.stop - 1 and placement[s] != placement[s + 1]:
                time += p2p
            offsets[("B", s)] = time
            time += op_duration(instance, "B", s, split)
        if split:
            for s in route:
                offsets[("W", s)] = offsets[("B", s)] + instance.backward_times[s]
    return offsets


def zero_bubble_bound(instance: Instance, split: bool) -> float:
    """The busiest device's total op time (a bound on both the makespan and the max span)."""
    return max(_busy(instance, split, d) for d in range(instance.num_devices))


def critical_path_bound(instance: Instance, split: bool) -> float:
    """The makespan of one microbatch alone: its forward chain, backward chain and last W, with p2p."""
    offsets = chain_offsets(instance, split)
    return max(offset + op_duration(instance, kind, stage, split) for (kind, stage), offset in offsets.items())


def device_span_bound(instance: Instance, split: bool, device: int, head_share: float = 0.0) -> float:
    """A lower bound on the span of `device` under its memory limit: its busy time plus the idle of its
    head and tail windows, or its memory energy over its limit, whichever is larger. `instance` is
    the compute alone when the ops carry communication, and `head_share` the least all-to-all share
    of the device's forwards (see the module notes)."""
    m = instance.stage_microbatches
    offsets = chain_offsets(instance, split)
    capacity = _capacity(instance, device)
    head_idle = _head_idle(instance, device, offsets, capacity, head_share)

    # From d's last forward (of its last stage on a route) to the end of that microbatch's ops on d,
    # less that forward: d runs what it holds then, that microbatch's B and W on d among them.
    items = _held_items(instance, split, instance.stages_of(device))
    tail_idle = max(
        0.0,
        min(
            _tail_window(instance, split, on_route, offsets)
            - _held_work(items, _backward_left(instance, split, on_route), m, capacity, 1.0)
            for on_route in instance.route_stages(device)
        ),
    )

    disjoint = _windows_disjoint(instance, device, capacity)
    idle = head_idle + tail_idle if disjoint else max(head_idle, tail_idle)
    windows = _busy(instance, split, device) + idle
    if capacity is None or capacity <= 0:
        return windows
    return max(windows, memory_energy(instance, split, device, offsets) / capacity)


def until_last_backward(
    instance: Instance,
    split: bool,
    device: int,
    offsets: dict[tuple[str, int], float],
    head_share: float = 0.0,
    spacing: float = 0.0,
) -> float:
    """A lower bound on the time from the start of `device`'s first op to the end of its last B
    (docs/bounds.md, "Up to a device's last B"): its busy time and head-window idle, plus the tail
    term, which is negative when W ops may wait until after the last B. With a `spacing` (one route;
    `forward_spacing`), from the earliest time its first op can start after the caller's reference
    instead: the head term is then the least of that op's delay plus the head window's idle when
    forwards arrive no faster than that (`_head_idle`).

    From the start t1 of the device's last forward to the end t2 of its last B the microbatch of
    that forward runs its B of the device's first stage, at least `reach` after t1; after t1 the
    device runs that forward and what the microbatches it holds at t1 have left (a B and its W, or a
    W), all of it but the W ops it defers past t2. So t2 - t1 is at least `reach` and at least that
    work less the deferred W time X, and the busy time before t1 is the rest: the span up to t2 is
    at least busy + max(reach - F - work held, -X), the least over the sets held that fit in the
    limit, with X at most their W time.
    """
    m = instance.stage_microbatches
    capacity = _capacity(instance, device)
    items = _held_items(instance, split, instance.stages_of(device))
    routes = instance.route_stages(device)
    tail = math.inf
    for on_route in routes:
        first, last = on_route[0], on_route[-1]
        reach = offsets[("B", first)] + op_duration(instance, "B", first, split) - offsets[("F", last)]
        forced = _backward_left(instance, split, on_route)
        window = reach - instance.forward_times[last]
        least = least_tail(items, forced, m, capacity, window)
        if len(routes) == 1 and len(on_route) > 1:
            # Per microbatch, where its combinations are few enough to enumerate.
            prefixes = _enumerated_least_tail(_held_prefixes(instance, split, on_route), forced, m, capacity, window)
            if prefixes is not None:
                least = max(least, prefixes)
        tail = min(tail, least)
    head_idle = _head_idle(instance, device, offsets, capacity, head_share, spacing)
    head = head_idle if _windows_disjoint(instance, device, capacity) else 0.0
    return _busy(instance, split, device) + head + tail


def enclosure(
    instance: Instance, split: bool, outer: int, inner: int, offsets: dict[tuple[str, int], float]
) -> float | None:
    """How much longer device `outer`'s span is than `inner`'s time up to its last B
    (`until_last_backward`) when `outer` encloses `inner`, else None (docs/bounds.md, "Enclosed
    devices").

    `outer` encloses `inner` when on every route through `inner` `outer`'s first stage comes before
    all of `inner`'s: then `outer`'s first op starts before `inner`'s first op by at least the chain
    between their first stages, and `outer`'s last op ends after `inner`'s last B (a B of `inner`'s
    first stage: every other B of a microbatch on `inner` precedes that one) by at least the chain
    from that B back to the W (fused: the B) of `outer`'s first stage.
    """
    lead, trail = math.inf, math.inf
    last_kind = "W" if split else "B"
    for route in instance.routes():
        outside = [s for s in instance.stages_of(outer) if s in route]
        inside = [s for s in instance.stages_of(inner) if s in route]
        if not inside:
            continue
        if not outside or outside[0] >= inside[0]:
            return None
        first = inside[0]
        after_last_b = offsets[("B", first)] + op_duration(instance, "B", first, split)
        ends_outside = offsets[(last_kind, outside[0])] + op_duration(instance, last_kind, outside[0], split)
        lead = min(lead, offsets[("F", first)] - offsets[("F", outside[0])])
        trail = min(trail, ends_outside - after_last_b)
    return None if outer == inner or not math.isfinite(lead) else lead + trail


def memory_energy(
    instance: Instance, split: bool, device: int, offsets: dict[tuple[str, int], float] | None = None
) -> float:
    """The least total of memory x time that `device` holds over all microbatches (docs/bounds.md).

    Stage s's microbatch holds M_B - M_W from its forward's start to its B's end, at least the round
    trip `o(B, s) + B_s - o(F, s)`, and M_W until its W ends, at least that plus W_s (fused: all of M_B
    until the whole backward ends).
    """
    offsets = chain_offsets(instance, split) if offsets is None else offsets
    total = 0.0
    for s in instance.stages_of(device):
        until_b = offsets[("B", s)] + op_duration(instance, "B", s, split) - offsets[("F", s)]
        weight = instance.weight_memory[s] if split else 0.0
        until_w = until_b + (op_duration(instance, "W", s, split) if split else 0.0)
        total += (instance.activation_memory[s] - weight) * until_b + weight * until_w
    return instance.stage_microbatches * total


def head_share(instance: Instance, device: int) -> float:
    """The least share of its time a forward of `device` spends in communication (0 without any)."""
    if instance.forward_comm_times is None:
        return 0.0
    return min(instance.forward_comm_times[s] / instance.forward_times[s] for s in instance.stages_of(device))


def span_bound(instance: Instance, split: bool) -> float:
    """A lower bound on the max span under the instance's memory limits (of its compute alone, and
    the communication of its head windows, with communication): the busiest device's work, every
    device's span bound, every device's span from the time to the last B of each device it
    encloses, and stage 0's device's span from the makespan (`first_device_span_bound`)."""
    relaxed = without_communication(instance)
    offsets = chain_offsets(relaxed, split)
    devices = range(instance.num_devices)
    shares = [head_share(instance, d) for d in devices]
    best = max(zero_bubble_bound(relaxed, split), *(device_span_bound(relaxed, split, d, shares[d]) for d in devices))
    for inner in devices:
        widest: dict[float, float] = {}  # per spacing of the inner device's forwards, the widest enclosure
        for outer in devices:
            more = enclosure(relaxed, split, outer, inner, offsets)
            if more is not None:
                spacing = forward_spacing(relaxed, relaxed.stages_of(outer)[0], relaxed.stages_of(inner)[0])
                widest[spacing] = max(more, widest.get(spacing, -math.inf))
        for spacing, more in widest.items():
            # A wider spacing only raises the time to the last B: this one counts if it encloses more.
            if all(other < more for wider, other in widest.items() if wider > spacing):
                best = max(best, more + until_last_backward(relaxed, split, inner, offsets, shares[inner], spacing))
    return max(best, first_device_span_bound(instance, split))


def makespan_bound(instance: Instance, split: bool) -> float:
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
        return offsets[("B", first)] + op_duration(instance, "B", first, split)

    for d in range(instance.num_devices):
        stages = instance.stages_of(d)
        head = min(offsets[("F", s)] for s in stages)
        if split:
            tail = 0.0  # a W can be the last op of every schedule
        else:
            # The last op on d is a B whose successor on its route (if any) runs elsewhere.
            last_candidates = [s for s in stages if s == instance.route_at(s).start or placement[s - 1] != d]
            tail = min(
                end_of_chain(s) - offsets[("B", s)] - op_duration(instance, "B", s, split) for s in last_candidates
            )
        best = max(best, head + device_span_bound(instance, split, d, shares[d]) + tail)
        best = max(best, _makespan_through_last_backward(instance, split, d, offsets, shares[d]))
    return best


def _makespan_through_last_backward(
    instance: Instance, split: bool, device: int, offsets: dict[tuple[str, int], float], share: float
) -> float:
    """The makespan from `device`'s time up to its last B (`until_last_backward`): before it, the chain
    from the schedule's first op to the device's first stage; after it, the chain from that B (of the
    device's first stage on its route) to the last op of its microbatch."""
    lead, trail = math.inf, math.inf
    kinds = ("B", "W") if split else ("B",)
    for on_route in instance.route_stages(device):
        first = on_route[0]
        after_last_b = offsets[("B", first)] + op_duration(instance, "B", first, split)
        later = [
            offsets[(kind, s)] + op_duration(instance, kind, s, split)
            for kind in kinds
            for s in instance.route_at(first)
            if s < first or (s == first and kind == "W")
        ]
        lead = min(lead, offsets[("F", first)])
        trail = min(trail, max(later, default=after_last_b) - after_last_b)
    spacing = forward_spacing(instance, 0, instance.stages_of(device)[0])
    return lead + until_last_backward(instance, split, device, offsets, share, spacing) + trail


def memory_bound_under_cap(instance: Instance, split: bool, objective: Objective, time_cap: float) -> float:
    """A lower bound on the peak memory of any schedule whose makespan (or max span) is at most
    `time_cap`: the smallest feasible limit, every device's memory energy over the cap (its span is
    at most the cap), and the largest limit whose time bound already passes the cap (by bisection:
    the time bound only falls as the limit grows)."""
    relaxed = without_communication(instance)
    least = minimum_memory_limit(instance)
    energy = max(memory_energy(relaxed, split, d) for d in range(instance.num_devices)) / time_cap
    low, high = max(least, energy), max(least, energy)

    def time_bound(limit: float) -> float:
        limited = instance.with_limit(limit)
        return makespan_bound(limited, split) if objective == Objective.MAKESPAN else span_bound(limited, split)

    if time_bound(high) <= time_cap:
        return low
    while time_bound(high) > time_cap:
        low, high = high, 2 * high
    for _ in range(BISECTIONS):
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


def first_device_span_bound(instance: Instance, split: bool) -> float:
    """A lower bound on the span of stage 0's device on one route (0 on two): the makespan bound of
    the instance, with the W ops of every other device free when the backward is split (see the
    module notes)."""
    if instance.bidirectional:
        return 0.0
    if span_is_makespan(instance, split):
        return makespan_bound(instance, split)
    return makespan_bound(first_device_instance(instance), split)


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
    instance: Instance, objective: Objective = Objective.MAKESPAN, split_backward: bool | None = None
) -> float:
    """The best proven lower bound on `objective` (makespan, span or memory) under the instance's limit."""
    split = resolve_split(instance, split_backward)
    if objective == Objective.MEMORY:
        return minimum_memory_limit(instance)
    if objective == Objective.SPAN:
        return span_bound(instance, split)
    if objective == Objective.MAKESPAN:
        return makespan_bound(instance, split)
    raise InstanceError(f"unknown objective {objective!r}; use makespan, span or memory")


def max_count(weights: Sequence[float], count: int, capacity: float | None) -> int:
    """The most items (at most `count` of each weight) whose weights fit in `capacity` together."""
    if capacity is None:
        return count * len(weights)
    total = 0
    for weight in sorted(weights):
        fits = count if weight <= 0 else min(count, _floor_fit(capacity, weight))
        total += fits
        capacity -= fits * weight
    return total


def max_total_time(items: Sequence[Item], count: int, capacity: float | None, exact: bool = True) -> float:
    """An upper bound (exact when the search is small) on the total time of ops chosen with at most
    `count` of each item and total memory weight at most `capacity` (None: no limit); with `exact`
    False, the fractional bound (the linear relaxation) without a search."""
    if capacity is None:
        return count * sum(time for time, _ in items)
    free = count * sum(time for time, weight in items if weight <= 0)
    # Equal items (the equal stages of an interleaved pipeline) are one item of their summed count:
    # the same optimum, searched over far fewer nodes.
    copies = Counter(item for item in items if item[1] > 0 and item[0] > 0)
    weighted = sorted(
        ((time, weight, count * number) for (time, weight), number in copies.items()),
        key=lambda item: item[0] / item[1],
        reverse=True,
    )
    return free + (_knapsack(weighted, capacity) if exact else _fractional(weighted, capacity))


def _fractional(items: Sequence[tuple[float, float, int]], room: float) -> float:
    """The fractional knapsack of (time, weight, count) items sorted by time per weight: an upper bound
    on the bounded knapsack."""
    total = 0.0
    for time, weight, count in items:
        take = max(0.0, min(count, room / weight))
        total += take * time
        room -= take * weight
        if room <= 0:
            break
    return total


def _knapsack(items: list[tuple[float, float, int]], capacity: float) -> float:
    """Bounded knapsack by branch and bound over (time, weight, count) items sorted by time per weight.

    Returns the optimum, or the fractional bound when the search exceeds KNAPSACK_NODES (both are
    upper bounds on what the ops can fill, which is all the lower bounds need).
    """
    best = 0.0
    nodes = 0

    def visit(i: int, room: float, value: float) -> None:
        nonlocal best, nodes
        nodes += 1
        if i == len(items):
            best = max(best, value)
            return
        if nodes > KNAPSACK_NODES or value + _fractional(items[i:], room) <= best:
            return
        time, weight, count = items[i]
        for n in range(min(count, _floor_fit(room, weight)), -1, -1):
            visit(i + 1, room - n * weight, value + n * time)

    visit(0, capacity, 0.0)
    return best if nodes <= KNAPSACK_NODES else _fractional(items, capacity)


def _floor_fit(capacity: float, weight: float) -> int:
    """How many items of `weight` fit in `capacity`, rounding a hair up (sound for upper bounds)."""
    return max(0, math.floor(capacity / weight * (1 + 1e-12) + 1e-12))


def _held_items(instance: Instance, split: bool, stages: list[int]) -> list[HeldItem]:
    """What a device may still run after its last forward starts, per microbatch of its `stages` that it
    holds then: a B and its W, holding M_B (`_backward_left`), or (split) only a W, holding M_W."""
    return _backward_left(instance, split, stages) + _weights_left(instance, split, stages)


def _held_prefixes(instance: Instance, split: bool, on_route: list[int]) -> list[HeldItem]:
    """What a device may still run after its last forward starts, per microbatch it holds then: its Bs
    still to come, with their Ws, are those of its first stages on the route (its B of a later stage
    runs before its B of an earlier one), holding their M_B; or (split) a W alone, holding M_W."""
    items: list[HeldItem] = []
    work, deferred, memory = 0.0, 0.0, 0.0
    for time, weight_time, held in _backward_left(instance, split, on_route):
        work, deferred, memory = work + time, deferred + weight_time, memory + held
        items.append((work, deferred, memory))
    return items + _weights_left(instance, split, on_route)


def _weights_left(instance: Instance, split: bool, stages: list[int]) -> list[HeldItem]:
    """Per stage, what a microbatch whose B has run but not its W has left (split; none fused): that W,
    holding M_W."""
    if not split:
        return []
    times = [op_duration(instance, "W", s, split) for s in stages]
    return [(time, time, instance.weight_memory[s]) for time, s in zip(times, stages, strict=True)]


def _backward_left(instance: Instance, split: bool, stages: list[int]) -> list[HeldItem]:
    """Per stage, what a microbatch whose B is still to come has left: its B and W (fused: the whole
    backward), of which its W time, holding its M_B."""
    items = []
    for s in stages:
        weight_time = op_duration(instance, "W", s, split) if split else 0.0
        items.append((op_duration(instance, "B", s, split) + weight_time, weight_time, instance.activation_memory[s]))
    return items


def _tail_window(instance: Instance, split: bool, on_route: list[int], offsets: dict[tuple[str, int], float]) -> float:
    """From the start of a device's last forward, of its last stage `on_route[-1]` on a route, to the end
    of that microbatch's last op on the device, less that forward's own time."""
    last = on_route[-1]
    kinds = ("B", "W") if split else ("B",)
    ends = [offsets[(kind, s)] + op_duration(instance, kind, s, split) for kind in kinds for s in on_route]
    return max(ends) - offsets[("F", last)] - instance.forward_times[last]


def least_tail(
    items: list[HeldItem], forced: list[HeldItem], count: int, capacity: float | None, window: float
) -> float:
    """A lower bound on the least, over the sets H of held items (`forced` and at most `count` of each
    of `items`) that fit in `capacity`, of max(window - work(H), -W time(H)) (`until_last_backward`).

    For every weight l in [0, 1] the maximum is at least l·(window - work) - (1 - l)·W time, whose least
    over H is at least l·window less the knapsack of l·work + (1 - l)·W time: a bound for each l. With
    the fractional knapsack it is linear in l wherever the items keep their order of value per
    memory, so its best l is 0, 1 or an l where two items swap places; the exact knapsack there (and
    at both ends) can only raise it. Where the items holding a B have at most EXACT_TAIL_NODES
    combinations within the capacity, the least itself (`_enumerated_least_tail`).
    """

    least = _enumerated_least_tail(items, forced, count, capacity, window)
    if least is not None:
        return least

    def at(weight: float, exact: bool) -> float:
        return weight * window - _held_work(items, forced, count, capacity, weight, exact)

    swaps = {0.0, 1.0}
    for (work, deferred, memory), (other_work, other_deferred, other_memory) in itertools.combinations(
        sorted(set(items)), 2
    ):
        if memory > 0 and other_memory > 0:
            # (deferred + l·(work - deferred)) / memory equals the same of the other item.
            slope = (work - deferred) / memory - (other_work - other_deferred) / other_memory
            if slope != 0:
                weight = (other_deferred / other_memory - deferred / memory) / slope
                if 0 < weight < 1:
                    swaps.add(weight)
    best = max(sorted(swaps), key=lambda weight: at(weight, exact=False))
    return max(at(weight, exact=True) for weight in {0.0, best, 1.0})


def _enumerated_least_tail(
    items: list[HeldItem], forced: list[HeldItem], count: int, capacity: float | None, window: float
) -> float | None:
    """The least over H of max(window - work(H), -W time(H)) (`least_tail`) exactly, by enumerating
    how many of each item holding a B H takes: the rest of the room goes to the items that are a W
    alone, whose work is their W time, so the more of their time the lower both terms (their
    knapsack). None without a limit, when the forced items do not fit, or past EXACT_TAIL_NODES."""
    if capacity is None:
        return None
    room = capacity - sum(memory for _, _, memory in forced)
    backwards = sorted(Counter(item for item in items if item[0] > item[1]).items())
    weights = [(work, memory) for work, deferred, memory in items if work == deferred]
    # Of an item holding no memory H takes all: it adds to both its work and its W time; so of every
    # item when all of them fit.
    everything = sum(count * copies * memory for (_, _, memory), copies in backwards)
    fits_all = everything + count * sum(memory for _, memory in weights) <= room
    numbers = [
        [count * copies] if memory <= 0 or fits_all else range(min(count * copies, _floor_fit(room, memory)) + 1)
        for (_, _, memory), copies in backwards
    ]
    if room < 0 or math.prod(len(choices) for choices in numbers) > EXACT_TAIL_NODES:
        return None
    base_work, base_deferred = sum(item[0] for item in forced), sum(item[1] for item in forced)
    filled = functools.cache(lambda left: max_total_time(weights, count, left))  # few distinct rooms
    least = math.inf
    for chosen in itertools.product(*numbers):
        work, deferred, left = base_work, base_deferred, room
        for n, ((item_work, item_deferred, memory), _) in zip(chosen, backwards, strict=True):
            work, deferred, left = work + n * item_work, deferred + n * item_deferred, left - n * memory
        if left >= 0:
            least = min(least, max(window - work - filled(left), -(deferred + filled(left))))
    return least


def _held_work(
    items: list[HeldItem],
    forced: list[HeldItem],
    count: int,
    capacity: float | None,
    weight: float,
    exact: bool = True,
) -> float:
    """The most blended time (weight·work + (1 - weight)·W time) of the `forced` items and at most
    `count` of each of `items` held together within `capacity` (an upper bound; `max_total_time`)."""

    def blended(item: HeldItem) -> float:
        work, deferred, _ = item
        return weight * work + (1 - weight) * deferred

    room = None if capacity is None else capacity - sum(memory for _, _, memory in forced)
    chosen = [(blended(item), item[2]) for item in items]
    return sum(blended(item) for item in forced) + max_total_time(chosen, count, room, exact)


def _capacity(instance: Instance, device: int) -> float | None:
    """`device`'s memory limit with the validator's float tolerance, or None without one."""
    limit = instance.limit_of(device)
    return None if limit is None else limit + slack(limit)


def forward_spacing(instance: Instance, since: int, stage: int) -> float:
    """The least time between the starts of two forwards of `stage` in start order, each counted from
    the start of the first forward of stage `since` (one route, `since` <= `stage`; 0 on two routes):
    the k-th starts at least o(F, stage) - o(F, since) + k x the longest forward from `since` to
    `stage`, as in a flow shop of identical jobs (docs/bounds.md, "Forwards arrive no faster than the
    slowest stage before")."""
    if instance.bidirectional or not SPACED_FORWARDS:
        return 0.0
    return max(instance.forward_times[since : stage + 1])


def _head_idle(
    instance: Instance,
    device: int,
    offsets: dict[tuple[str, int], float],
    capacity: float | None,
    share: float,
    spacing: float = 0.0,
) -> float:
    """The idle time of `device`'s head window, from its first op to the start of its first B (module
    notes). With a `spacing` (`forward_spacing`): the least, over how late y the first op starts, of
    y plus that idle when the forwards of the device's first stage arrive `spacing` apart, the first
    of them y before the first op (docs/bounds.md)."""
    m = instance.stage_microbatches
    forwards = [(instance.forward_times[s], instance.activation_memory[s]) for s in instance.stages_of(device)]
    # That B's microbatch ran its forwards of d's stages on its route in the window, from the first of
    # them (on one route: from d's first stage down and back).
    routes = instance.route_stages(device)
    window = min(offsets[("B", s)] - offsets[("F", on_route[0])] for on_route in routes for s in on_route)
    # Per microbatch the forwards begun in the window are those of its first stages on the route.
    one_route = len(routes) == 1 and len(routes[0]) > 1
    times = itertools.accumulate(instance.forward_times[s] for s in routes[0])
    memory = itertools.accumulate(instance.activation_memory[s] for s in routes[0])
    prefixes = list(zip(times, memory, strict=True))

    @functools.cache
    def work(count: int) -> float:
        """The most forward time of `count` microbatches held at once."""
        most = max_total_time(forwards, count, capacity)
        if one_route and not fits(count * prefixes[-1][0], most):
            # (Where every forward fits at once, these items fit the microbatches' whole routes too.)
            most = min(most, _microbatch_work(prefixes, count, capacity))
        return most

    def idle(delay: float, count: int) -> float:
        return max(0.0, window + delay - work(count), share * (window + delay))

    if spacing <= 0 or len(routes) != 1:
        return idle(0.0, m)
    # The k-th forward of the first stage (from 0) ends in a window of length `window + y` only if
    # k·spacing + its time <= window + y: the count steps up at each y where that becomes true.
    first_time = instance.forward_times[routes[0][0]]
    arrived = min(m, _floor_fit(window - first_time, spacing) + 1) if window >= first_time else 0
    least = idle(0.0, arrived)
    for count in range(arrived + 1, m + 1):
        delay = (count - 1) * spacing + first_time - window
        if max(0.0, window + delay - work(m)) >= least:
            break  # later delays only add to the idle
        least = min(least, idle(delay, count))
    return least


def _microbatch_work(prefixes: list[Item], count: int, capacity: float | None) -> float:
    """The most time of at most `count` microbatches that each run one of the `prefixes` (time, memory
    of a device's first stages on the route) and fit in `capacity` together: exact by enumeration, or
    past KNAPSACK_NODES the knapsack that allows `count` of each prefix (an upper bound too)."""
    longest = max(time for time, _ in prefixes)
    if capacity is None or all(memory <= 0 for _, memory in prefixes):
        return count * longest
    # Longest first, so that good totals come early; a branch is cut where even `left` of the longest,
    # or its room filled at the best time per memory of what is left, cannot beat the best.
    items = sorted(prefixes, reverse=True)
    densest = [max(time / memory if memory > 0 else math.inf for time, memory in items[i:]) for i in range(len(items))]
    best, nodes = 0.0, 0

    def visit(i: int, left: int, room: float, value: float) -> None:
        nonlocal best, nodes
        nodes += 1
        best = max(best, value)
        if i == len(items) or left == 0 or nodes > KNAPSACK_NODES:
            return
        if value + min(left * longest, room * densest[i]) <= best:
            return
        time, memory = items[i]
        most = left if memory <= 0 else min(left, _floor_fit(room, memory))
        for n in range(most, -1, -1):
            visit(i + 1, left - n, room - n * memory, value + n * time)

    visit(0, count, capacity, 0.0)
    return best if nodes <= KNAPSACK_NODES else max_total_time(prefixes, count, capacity)


def _windows_disjoint(instance: Instance, device: int, capacity: float | None) -> bool:
    """Whether `device`'s head and tail windows cannot overlap: its forwards do not all fit at once."""
    stages = instance.stages_of(device)
    activation = [instance.activation_memory[s] for s in stages]
    return instance.stage_microbatches * len(stages) > max_count(activation, instance.stage_microbatches, capacity)


def _busy(instance: Instance, split: bool, device: int) -> float:
    per_microbatch = sum(
        op_duration(instance, kind, s, split) for s in instance.stages_of(device) for kind in ("FBW" if split else "FB")
    )
    return instance.stage_microbatches * per_microbatch
