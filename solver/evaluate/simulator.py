"""The one timeline evaluator: per-device op orders -> an as-soon-as-possible timed schedule.

Each op starts at the latest of (the end of the previous step on its device) and (the end of its one
direct dependency, plus `p2p_time` when that dependency ran on another device). Host-link
transfers (offloads and reloads, docs/offload.md) run the same way on each device's two link
directions, one transfer at a time per direction. An overlapped pair
is one step: its ops start together once all their dependencies are met (a W inside the pair waits
for nothing, its B being there too) and end together after `pair_duration`. Every heuristic, the
solver and every import go through `simulate`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pipesat.models import (
    KINDS,
    Instance,
    Kind,
    Op,
    OpKey,
    Pair,
    Schedule,
    ScheduleError,
    Step,
    expected_op_keys,
    op_duration,
    op_label,
    pair_duration,
    pair_error,
    pair_label,
    step_keys,
)
from pipesat.models.ops import TRANSFER_KINDS, dependency, transfer_time


@dataclass(frozen=True)
class TransferPlan:
    """A solution's offloads as the simulator runs them: per device its transfers in start order
    (`links`, as `simulate` takes them), and what each op or transfer must not start before the end of (`waits`)."""

    links: list[list[OpKey]]
    waits: dict[OpKey, list[OpKey]]


def transfer_plan_of(schedule: Schedule) -> TransferPlan:
    """The plan that times `schedule`'s orders with its transfers and keeps its memory profile
    (docs/offload.md, timing): its transfers per device in start order, and the waits.

    Timed as soon as possible, ops may move earlier, and a transfer with them; so that no memory
    interval that ended before another began overlaps it, every allocation (an F's start, a reload's
    start) waits for each free (a B's or W's end, an offload's end) on its device that came before it
    in `schedule`. Frees of compute ops before an F are before it in the device's order already; the
    rest are the last compute op ending by a reload's start, and the last offload ending by an F's or
    a reload's start (the device's offloads run one at a time, so the earlier ones ended before it).
    With `host_memory` the host's intervals (an offload's start to its reload's end) keep theirs the
    same way: each offload waits for the last reload of its device that ended by its start.
    """
    devices = range(schedule.instance.num_devices)
    links: list[list[OpKey]] = [[] for _ in devices]
    offload_ends: list[list[tuple[float, OpKey]]] = [[] for _ in devices]
    reload_ends: list[list[tuple[float, OpKey]]] = [[] for _ in devices]
    for op in sorted(schedule.transfers, key=lambda o: (o.start, o.end)):
        links[op.device].append(op.key)
        (offload_ends if op.kind == Kind.O else reload_ends)[op.device].append((op.end, op.key))
    compute_ends: list[list[tuple[float, OpKey]]] = [[] for _ in devices]
    for op in schedule.ops:
        compute_ends[op.device].append((op.end, op.key))
    waits: dict[OpKey, list[OpKey]] = {}
    host = schedule.instance.host_memory is not None
    for op in (*schedule.ops, *schedule.transfers):
        frees = {
            Kind.F: [offload_ends[op.device]],
            Kind.R: [offload_ends[op.device], compute_ends[op.device]],
            Kind.O: [reload_ends[op.device]] if host else [],  # the host takes an offload from its start
        }.get(op.kind, [])
        for ends in frees:
            last = max((item for item in ends if item[0] <= op.start and item[1] != op.key), default=None)
            if last is not None:
                waits.setdefault(op.key, []).append(last[1])
    return TransferPlan(links, waits)


def simulate(
    instance: Instance,
    orders: Sequence[Sequence[Step]],
    name: str = "",
    source: dict[str, Any] | None = None,
    links: Sequence[Sequence[OpKey]] = (),
    waits: Mapping[OpKey, Sequence[OpKey]] | None = None,
) -> Schedule:
    """Time per-device orders (of ops and overlapped pairs) as soon as possible.

    `links` are the host-link transfers, per device (none without offload, docs/offload.md): its
    offloads (O) in the order its device-to-host direction runs them and its reloads (R) in the
    order of the host-to-device one. An offload waits for its F, a reload for its offload, and a B
    whose microbatch is offloaded at its stage for the reload. `waits` adds, per op or transfer, the
    ops or transfers it must not start before the end of (how a solver's order keeps its memory
    profile: docs/offload.md, re-timing).

    The backward is split exactly when the orders hold W ops. Raises `ScheduleError` when the orders
    are not a complete, correctly placed set of ops, or when they deadlock (naming the op each stuck
    device waits at and what it waits for).
    """
    split = check_orders(instance, orders)
    num_stages, placement, p2p = instance.num_stages, instance.placement, instance.p2p_time
    durations = {kind: [op_duration(instance, kind, s, split) for s in range(num_stages)] for kind in KINDS}
    lanes: list[Sequence[Step]] = list(orders)
    if links:
        durations |= {kind: [transfer_time(instance, s) for s in range(num_stages)] for kind in TRANSFER_KINDS}
        check_links(instance, links)
        lanes += [[key for key in link if key.kind == kind] for kind in TRANSFER_KINDS for link in links]
    extra = _waits(links, waits)
    devices = instance.num_devices
    end: dict[OpKey, float] = {}
    position = [0] * len(lanes)
    free_at = [0.0] * len(lanes)
    waiting: dict[OpKey, list[int]] = {}
    ops: list[Op] = []
    transfers: list[Op] = []
    ready = list(range(len(lanes)))
    while ready:
        lane = ready.pop()
        device = lane % devices
        order, i, now = lanes[lane], position[lane], free_at[lane]
        while i < len(order):
            step = order[i]
            keys = step_keys(step)
            start, blocked = now, None
            for key in keys:
                dep = dependency(key, instance)
                if dep is None or dep in keys:
                    continue
                dep_end = end.get(dep)
                if dep_end is None:
                    blocked = dep
                    break
                if placement[dep.stage] != device:
                    dep_end += p2p
                if dep_end > start:
                    start = dep_end
            if blocked is None and extra:
                for key in keys:
                    for before in extra.get(key, ()):
                        before_end = end.get(before)
                        if before_end is None:
                            blocked = before
                            break
                        start = max(start, before_end)
            if blocked is not None:
                waiting.setdefault(blocked, []).append(lane)
                break
            if isinstance(step, Pair):
                now = start + pair_duration(instance, step, split)
            else:
                now = start + durations[step[0]][step[1]]
            placed = ops if lane < devices else transfers
            for key in keys:
                end[key] = now
                placed.append(Op(key[0], key[1], key[2], device, start, now))
            i += 1
            for key in keys:
                woken = waiting.pop(key, None)
                if woken:
                    ready.extend(woken)
        position[lane], free_at[lane] = i, now
    if len(ops) + len(transfers) != sum(len(step_keys(step)) for order in lanes for step in order):
        raise ScheduleError(_deadlock_message(instance, lanes, position, end.keys(), extra))
    return Schedule(instance, tuple(ops), name, dict(source or {}), tuple(transfers))


def _waits(links: Sequence[Sequence[OpKey]], waits: Mapping[OpKey, Sequence[OpKey]] | None) -> dict[OpKey, list[OpKey]]:
    """What each op waits for beyond its dependency: a B for its reload, and the `waits` given."""
    extra = {key: list(before) for key, before in (waits or {}).items()}
    for link in links:
        for key in link:
            if key.kind == Kind.R:
                extra.setdefault(OpKey(Kind.B, key.stage, key.microbatch), []).append(key)
    return extra


def check_links(instance: Instance, links: Sequence[Sequence[OpKey]]) -> None:
    """Check that the transfers are offloads and reloads of existing (stage, microbatch)s, each once,
    on the stage's device, that every offloaded one is reloaded, and that the instance has a link."""
    if instance.host_link_bandwidth is None:
        raise ScheduleError("the orders offload activations but the instance has no host link; add host_link_bandwidth")
    if len(links) != instance.num_devices:
        raise ScheduleError(f"got host-link orders for {len(links)} devices, the instance has {instance.num_devices}")
    seen: dict[Kind, set[tuple[int, int]]] = {Kind.O: set(), Kind.R: set()}
    for device, link in enumerate(links):
        for key in link:
            kind, stage, microbatch = key
            if kind not in TRANSFER_KINDS or not 0 <= stage < instance.num_stages:
                raise ScheduleError(f"{op_label(key)} is not an offload or reload of a stage of the instance")
            if microbatch not in instance.microbatches_at(stage) or instance.placement[stage] != device:
                raise ScheduleError(f"{op_label(key)} is not a transfer of device {device}")
            if (stage, microbatch) in seen[kind]:
                raise ScheduleError(f"{op_label(key)} is ordered twice")
            seen[kind].add((stage, microbatch))
    if seen[Kind.O] != seen[Kind.R]:
        stage, microbatch = min(seen[Kind.O] ^ seen[Kind.R])
        raise ScheduleError(f"stage {stage}, mb {microbatch} has an offload without its reload or the reverse")


def check_orders(instance: Instance, orders: Sequence[Sequence[Step]]) -> bool:
    """Check that the orders hold every op once on its stage's device, and that every pair is an F
    and a B of different microbatches (with that B's W if any); return whether W is split."""
    if len(orders) != instance.num_devices:
        raise ScheduleError(f"got orders for {len(orders)} devices, the instance has {instance.num_devices}")
    for order in orders:
        for step in order:
            if isinstance(step, Pair) and (problem := pair_error(step)) is not None:
                raise ScheduleError(problem)
    keys = [[key for step in order for key in step_keys(step)] for order in orders]
    split = any(key[0] == Kind.W for order in keys for key in order)
    if split and not instance.split_backward:
        raise ScheduleError("the orders hold W ops but the instance has no weight_times; add weight_times")
    expected = expected_op_keys(instance, split)
    counts = Counter(key for order in keys for key in order)
    if len(counts) != len(expected) or any(counts[key] != 1 for key in expected):
        missing = [key for key in expected if key not in counts]
        doubled = [key for key, n in counts.items() if n > 1]
        unknown = sorted(set(counts) - set(expected))
        problems = []
        for what, listed in (("missing", missing), ("repeated", doubled), ("unknown", unknown)):
            if listed:
                shown = ", ".join(op_label(k) for k in listed[:3]) + (
                    f" and {len(listed) - 3} more" if len(listed) > 3 else ""
                )
                problems.append(f"{what}: {shown}")
        raise ScheduleError("the orders are not a complete set of ops: " + "; ".join(problems))
    for device, order in enumerate(keys):
        for key in order:
            _, stage, _ = key
            if instance.placement[stage] != device:
                raise ScheduleError(
                    f"{op_label(key)} is ordered on device {device}, but stage {stage} is placed on device "
                    f"{instance.placement[stage]}"
                )
    return split


def _deadlock_message(
    instance: Instance,
    lanes: Sequence[Sequence[Step]],
    position: list[int],
    done: Collection[OpKey],
    extra: Mapping[OpKey, Sequence[OpKey]],
) -> str:
    stuck = []
    for lane, i in enumerate(position):
        if i < len(lanes[lane]):
            step = lanes[lane][i]
            keys = step_keys(step)
            # A stuck step waits for an op that has not run (never for an op of its own pair).
            before = next(
                dep
                for key in keys
                for dep in (dependency(key, instance), *extra.get(key, ()))
                if dep is not None and dep not in done and dep not in keys
            )
            at = pair_label(step) if isinstance(step, Pair) else op_label(keys[0])
            where = f"device {lane % instance.num_devices}" + ("'s host link" if lane >= instance.num_devices else "")
            stuck.append(f"{where} is stuck at {at} waiting for {op_label(before)}")
    return "the orders deadlock: " + "; ".join(stuck)
