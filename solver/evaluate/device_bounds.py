"""Proven lower bounds on one device's span, and on its time up to its last B, from one microbatch's chain.

Every bound holds for every schedule of the instance with the backward split or fused as asked and
the memory limit respected (the validator's tolerance included); `bounds` combines them into the
bounds on the makespan and the max span. The arguments, per device d:

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
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import math

from pipesat.models import Instance, Kind, backward_kinds, op_duration, op_kinds
from pipesat.models.tolerance import fits, slack
from pipesat.models.tuning import DEFAULT_TUNING, Tuning
from pipesat.solver.evaluate.knapsack import (
    HeldItem,
    HeldSets,
    enumerated_least_tail,
    floor_fit,
    held_work,
    least_tail,
    max_count,
    max_total_time,
    microbatch_work,
)
from pipesat.solver.evaluate.memory_quanta import quantized_span


def chain_offsets(instance: Instance, split: bool) -> dict[tuple[Kind, int], float]:
    """Earliest start of each op of one microbatch, `(kind, stage) -> time`, after its first forward
    starts: along its route, so each stage's offsets are those of the microbatches that pass it."""
    placement, p2p = instance.placement, instance.p2p_time
    offsets: dict[tuple[Kind, int], float] = {}
    for route in instance.routes():
        time = 0.0
        for s in route:
            if s > route.start and placement[s] != placement[s - 1]:
                time += p2p
            offsets[(Kind.F, s)] = time
            time += instance.forward_times[s]
        for s in reversed(route):
            if s < route.stop - 1 and placement[s] != placement[s + 1]:
                time += p2p
            offsets[(Kind.B, s)] = time
            time += op_duration(instance, Kind.B, s, split)
        if split:
            for s in route:
                offsets[(Kind.W, s)] = offsets[(Kind.B, s)] + instance.backward_times[s]
    return offsets


def zero_bubble_bound(instance: Instance, split: bool) -> float:
    """The busiest device's total op time (a bound on both the makespan and the max span)."""
    return max(busy_time(instance, split, d) for d in range(instance.num_devices))


def device_span_bound(
    instance: Instance, split: bool, device: int, head_share: float = 0.0, *, tuning: Tuning = DEFAULT_TUNING
) -> float:
    """A lower bound on the span of `device` under its memory limit: its busy time plus the idle of its
    head and tail windows, or its memory energy over its limit, whichever is larger. `instance` is
    the compute alone when the ops carry communication, and `head_share` the least all-to-all share
    of the device's forwards (see the module notes of `bounds`); `tuning` bounds the knapsacks' searches."""
    offsets = chain_offsets(instance, split)
    capacity = capacity_of(instance, device)
    head_idle = _head_idle(instance, device, offsets, capacity, head_share, tuning=tuning)

    # From d's last forward (of its last stage on a route) to the end of that microbatch's ops on d,
    # less that forward: d runs what it holds then, that microbatch's B and W on d among them.
    tail_idle = max(
        0.0,
        min(
            _tail_window(instance, split, on_route, offsets)
            - held_work(_held_sets(instance, split, device, on_route), 1.0, tuning=tuning)
            for on_route in instance.route_stages(device)
        ),
    )

    disjoint = _windows_disjoint(instance, device, capacity)
    idle = head_idle + tail_idle if disjoint else max(head_idle, tail_idle)
    windows = busy_time(instance, split, device) + idle
    if capacity is None or capacity <= 0:
        return windows
    return max(windows, quantized_span(held_memory(instance, split, device, offsets), capacity))


def until_last_backward(
    instance: Instance,
    split: bool,
    device: int,
    offsets: dict[tuple[Kind, int], float],
    head_share: float = 0.0,
    spacing: float = 0.0,
    *,
    tuning: Tuning = DEFAULT_TUNING,
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
    capacity = capacity_of(instance, device)
    routes = instance.route_stages(device)
    tail = math.inf
    for on_route in routes:
        first, last = on_route[0], on_route[-1]
        reach = offsets[(Kind.B, first)] + op_duration(instance, Kind.B, first, split) - offsets[(Kind.F, last)]
        held = _held_sets(instance, split, device, on_route)
        window = reach - instance.forward_times[last]
        least = least_tail(held, window, tuning=tuning)
        if len(routes) == 1 and len(on_route) > 1:
            # Per microbatch, where its combinations are few enough to enumerate.
            per_microbatch = dataclasses.replace(held, items=_held_prefixes(instance, split, on_route))
            prefixes = enumerated_least_tail(per_microbatch, window, tuning=tuning)
            if prefixes is not None:
                least = max(least, prefixes)
        tail = min(tail, least)
    head_idle = _head_idle(instance, device, offsets, capacity, head_share, spacing, tuning=tuning)
    head = head_idle if _windows_disjoint(instance, device, capacity) else 0.0
    return busy_time(instance, split, device) + head + tail


def enclosure(
    instance: Instance, split: bool, outer: int, inner: int, offsets: dict[tuple[Kind, int], float]
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
    last_kind = Kind.W if split else Kind.B
    for route in instance.routes():
        outside = [s for s in instance.stages_of(outer) if s in route]
        inside = [s for s in instance.stages_of(inner) if s in route]
        if not inside:
            continue
        if not outside or outside[0] >= inside[0]:
            return None
        first = inside[0]
        after_last_b = offsets[(Kind.B, first)] + op_duration(instance, Kind.B, first, split)
        ends_outside = offsets[(last_kind, outside[0])] + op_duration(instance, last_kind, outside[0], split)
        lead = min(lead, offsets[(Kind.F, first)] - offsets[(Kind.F, outside[0])])
        trail = min(trail, ends_outside - after_last_b)
    return None if outer == inner or not math.isfinite(lead) else lead + trail


def memory_energy(
    instance: Instance, split: bool, device: int, offsets: dict[tuple[Kind, int], float] | None = None
) -> float:
    """The least total of memory x time that `device` holds over all microbatches (docs/bounds.md): the
    amounts of `held_memory` times their least durations."""
    return sum(amount * duration for amount, duration in held_memory(instance, split, device, offsets))


def held_memory(
    instance: Instance, split: bool, device: int, offsets: dict[tuple[Kind, int], float] | None = None
) -> list[tuple[float, float]]:
    """What `device` holds for the microbatches of each of its stages, as (amount, least time held over
    them all): each holds M_B from its forward's start to its B's end, at least the round trip
    `o(B, s) + B_s - o(F, s)`, then (split) M_W until its W ends, at least W_s (fused: M_B until the
    whole backward ends)."""
    offsets = chain_offsets(instance, split) if offsets is None else offsets
    count, held = instance.stage_microbatches, []
    for s in instance.stages_of(device):
        until_b = offsets[(Kind.B, s)] + op_duration(instance, Kind.B, s, split) - offsets[(Kind.F, s)]
        held.append((instance.activation_memory[s], count * until_b))
        if split:
            held.append((instance.weight_memory[s], count * op_duration(instance, Kind.W, s, split)))
    return held


def _held_sets(instance: Instance, split: bool, device: int, on_route: list[int]) -> HeldSets:
    """What `device` may hold once the last forward of `on_route` (its stages on one route) starts:
    that microbatch's B and W left on the route, and any microbatch's work left on its stages, within
    its limit (the tail terms of `device_span_bound` and `until_last_backward`)."""
    return HeldSets(
        items=_held_items(instance, split, instance.stages_of(device)),
        forced=_backward_left(instance, split, on_route),
        count=instance.stage_microbatches,
        capacity=capacity_of(instance, device),
    )


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
    times = [op_duration(instance, Kind.W, s, split) for s in stages]
    return [(time, time, instance.weight_memory[s]) for time, s in zip(times, stages, strict=True)]


def _backward_left(instance: Instance, split: bool, stages: list[int]) -> list[HeldItem]:
    """Per stage, what a microbatch whose B is still to come has left: its B and W (fused: the whole
    backward), of which its W time, holding its M_B."""
    items = []
    for s in stages:
        weight_time = op_duration(instance, Kind.W, s, split) if split else 0.0
        items.append(
            (op_duration(instance, Kind.B, s, split) + weight_time, weight_time, instance.activation_memory[s])
        )
    return items


def _tail_window(instance: Instance, split: bool, on_route: list[int], offsets: dict[tuple[Kind, int], float]) -> float:
    """From the start of a device's last forward, of its last stage `on_route[-1]` on a route, to the end
    of that microbatch's last op on the device, less that forward's own time."""
    last = on_route[-1]
    kinds = backward_kinds(split)
    ends = [offsets[(kind, s)] + op_duration(instance, kind, s, split) for kind in kinds for s in on_route]
    return max(ends) - offsets[(Kind.F, last)] - instance.forward_times[last]


def capacity_of(instance: Instance, device: int) -> float | None:
    """`device`'s memory limit with the validator's float tolerance, or None without one."""
    limit = instance.limit_of(device)
    return None if limit is None else limit + slack(limit)


def forward_spacing(instance: Instance, since: int, stage: int, *, tuning: Tuning = DEFAULT_TUNING) -> float:
    """The least time between the starts of two forwards of `stage` in start order, each counted from
    the start of the first forward of stage `since` (one route, `since` <= `stage`; 0 on two routes):
    the k-th starts at least o(F, stage) - o(F, since) + k x the longest forward from `since` to
    `stage`, as in a flow shop of identical jobs (docs/bounds.md, "Forwards arrive no faster than the
    slowest stage before"); 0 without `Tuning.spaced_forwards`
    (benchmarks/experiments/2026-11-29_spaced-forwards)."""
    if instance.bidirectional or not tuning.spaced_forwards:
        return 0.0
    return max(instance.forward_times[since : stage + 1])


def _head_idle(
    instance: Instance,
    device: int,
    offsets: dict[tuple[Kind, int], float],
    capacity: float | None,
    share: float,
    spacing: float = 0.0,
    *,
    tuning: Tuning,
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
    window = min(offsets[(Kind.B, s)] - offsets[(Kind.F, on_route[0])] for on_route in routes for s in on_route)
    # Per microbatch the forwards begun in the window are those of its first stages on the route.
    one_route = len(routes) == 1 and len(routes[0]) > 1
    times = itertools.accumulate(instance.forward_times[s] for s in routes[0])
    memory = itertools.accumulate(instance.activation_memory[s] for s in routes[0])
    prefixes = list(zip(times, memory, strict=True))

    @functools.cache
    def work(count: int) -> float:
        """The most forward time of `count` microbatches held at once."""
        most = max_total_time(forwards, count, capacity, tuning=tuning)
        if one_route and not fits(count * prefixes[-1][0], most):
            # (Where every forward fits at once, these items fit the microbatches' whole routes too.)
            most = min(most, microbatch_work(prefixes, count, capacity, tuning=tuning))
        return most

    def idle(delay: float, count: int) -> float:
        return max(0.0, window + delay - work(count), share * (window + delay))

    if spacing <= 0 or len(routes) != 1:
        return idle(0.0, m)
    # The k-th forward of the first stage (from 0) ends in a window of length `window + y` only if
    # k·spacing + its time <= window + y: the count steps up at each y where that becomes true.
    first_time = instance.forward_times[routes[0][0]]
    arrived = min(m, floor_fit(window - first_time, spacing) + 1) if window >= first_time else 0
    least = idle(0.0, arrived)
    for count in range(arrived + 1, m + 1):
        delay = (count - 1) * spacing + first_time - window
        if max(0.0, window + delay - work(m)) >= least:
            break  # later delays only add to the idle
        least = min(least, idle(delay, count))
    return least


def _windows_disjoint(instance: Instance, device: int, capacity: float | None) -> bool:
    """Whether `device`'s head and tail windows cannot overlap: its forwards do not all fit at once."""
    stages = instance.stages_of(device)
    activation = [instance.activation_memory[s] for s in stages]
    return instance.stage_microbatches * len(stages) > max_count(activation, instance.stage_microbatches, capacity)


def busy_time(instance: Instance, split: bool, device: int) -> float:
    """The total time of `device`'s ops."""
    per_microbatch = sum(
        op_duration(instance, kind, s, split) for s in instance.stages_of(device) for kind in op_kinds(split)
    )
    return instance.stage_microbatches * per_microbatch
