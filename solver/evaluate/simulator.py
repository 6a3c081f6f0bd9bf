"""The one timeline evaluator: per-device op orders -> an as-soon-as-possible timed schedule.

Each op starts at the latest of (the end of the previous step on its device) and (the end of its one
direct dependency, plus `p2p_time` when that dependency ran on another device). An overlapped pair
is one step: its ops start together once all their dependencies are met (a W inside the pair waits
for nothing, its B being there too) and end together after `pair_duration`. Every heuristic, the
solver and every import go through `simulate`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Sequence
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
from pipesat.models.ops import dependency


def simulate(
    instance: Instance,
    orders: Sequence[Sequence[Step]],
    name: str = "",
    source: dict[str, Any] | None = None,
) -> Schedule:
    """Time per-device orders (of ops and overlapped pairs) as soon as possible.

    The backward is split exactly when the orders hold W ops. Raises `ScheduleError` when the orders
    are not a complete, correctly placed set of ops, or when they deadlock (naming the op each stuck
    device waits at and what it waits for).
    """
    split = check_orders(instance, orders)
    num_stages, placement, p2p = instance.num_stages, instance.placement, instance.p2p_time
    durations = {kind: [op_duration(instance, kind, s, split) for s in range(num_stages)] for kind in KINDS}
    end: dict[OpKey, float] = {}
    position = [0] * instance.num_devices
    free_at = [0.0] * instance.num_devices
    waiting: dict[OpKey, list[int]] = {}
    ops: list[Op] = []
    ready = list(range(instance.num_devices))
    while ready:
        device = ready.pop()
        order, i, now = orders[device], position[device], free_at[device]
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
            if blocked is not None:
                waiting.setdefault(blocked, []).append(device)
                break
            if isinstance(step, Pair):
                now = start + pair_duration(instance, step, split)
            else:
                now = start + durations[step[0]][step[1]]
            for key in keys:
                end[key] = now
                ops.append(Op(key[0], key[1], key[2], device, start, now))
            i += 1
            for key in keys:
                woken = waiting.pop(key, None)
                if woken:
                    ready.extend(woken)
        position[device], free_at[device] = i, now
    if len(ops) != sum(len(step_keys(step)) for order in orders for step in order):
        raise ScheduleError(_deadlock_message(instance, orders, position, end.keys()))
    return Schedule(instance, tuple(ops), name, dict(source or {}))


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
    instance: Instance, orders: Sequence[Sequence[Step]], position: list[int], done: Collection[OpKey]
) -> str:
    stuck = []
    for d, i in enumerate(position):
        if i < len(orders[d]):
            step = orders[d][i]
            keys = step_keys(step)
            # A stuck step waits for an op that has not run (never for an op of its own pair).
            before = next(dep for key in keys if (dep := dependency(key, instance)) is not None and dep not in done)
            at = pair_label(step) if isinstance(step, Pair) else op_label(keys[0])
            stuck.append(f"device {d} is stuck at {at} waiting for {op_label(before)}")
    return "the orders deadlock: " + "; ".join(stuck)
