"""The one timeline evaluator: per-device op orders -> an as-soon-as-possible timed schedule.

Each op starts at the latest of (the end of the previous op on its device) and (the end of its one
direct dependency, plus `p2p_time` when that dependency ran on another device). Every heuristic,
the solver and every import go through `simulate`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from pipesat.models import Instance, Op, OpKey, Schedule, ScheduleError, expected_op_keys, op_duration, op_label
from pipesat.models.ops import dependency


def simulate(
    instance: Instance,
    orders: Sequence[Sequence[OpKey]],
    name: str = "",
    source: dict[str, Any] | None = None,
) -> Schedule:
    """Time per-device orders as soon as possible.

    The backward is split exactly when the orders hold W ops. Raises `ScheduleError` when the orders
    are not a complete, correctly placed set of ops, or when they deadlock (naming the op each stuck
    device waits at and what it waits for).
    """
    split = check_orders(instance, orders)
    num_stages, placement, p2p = instance.num_stages, instance.placement, instance.p2p_time
    durations = {kind: [op_duration(instance, kind, s, split) for s in range(num_stages)] for kind in ("F", "B", "W")}
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
            key = order[i]
            kind, stage, microbatch = key
            start = now
            dep = dependency(key, num_stages)
            if dep is not None:
                dep_end = end.get(dep)
                if dep_end is None:
                    waiting.setdefault(dep, []).append(device)
                    break
                if placement[dep.stage] != device:
                    dep_end += p2p
                if dep_end > start:
                    start = dep_end
            now = start + durations[kind][stage]
            end[key] = now
            ops.append(Op(kind, stage, microbatch, device, start, now))
            i += 1
            woken = waiting.pop(key, None)
            if woken:
                ready.extend(woken)
        position[device], free_at[device] = i, now
    if len(ops) != sum(len(order) for order in orders):
        raise ScheduleError(_deadlock_message(orders, position, num_stages))
    return Schedule(instance, tuple(ops), name, dict(source or {}))


def check_orders(instance: Instance, orders: Sequence[Sequence[OpKey]]) -> bool:
    """Check that the orders hold every op once on its stage's device; return whether W is split."""
    if len(orders) != instance.num_devices:
        raise ScheduleError(f"got orders for {len(orders)} devices, the instance has {instance.num_devices}")
    split = any(kind == "W" for order in orders for kind, _, _ in order)
    if split and not instance.split_backward:
        raise ScheduleError("the orders hold W ops but the instance has no weight_times; add weight_times")
    expected = expected_op_keys(instance, split)
    counts = Counter(key for order in orders for key in order)
    if len(counts) != len(expected) or any(counts[key] != 1 for key in expected):
        missing = [key for key in expected if key not in counts]
        doubled = [key for key, n in counts.items() if n > 1]
        unknown = sorted(set(counts) - set(expected))
        problems = []
        for what, keys in (("missing", missing), ("repeated", doubled), ("unknown", unknown)):
            if keys:
                shown = ", ".join(op_label(k) for k in keys[:3]) + (
                    f" and {len(keys) - 3} more" if len(keys) > 3 else ""
                )
                problems.append(f"{what}: {shown}")
        raise ScheduleError("the orders are not a complete set of ops: " + "; ".join(problems))
    for device, order in enumerate(orders):
        for key in order:
            _, stage, _ = key
            if instance.placement[stage] != device:
                raise ScheduleError(
                    f"{op_label(key)} is ordered on device {device}, but stage {stage} is placed on device "
                    f"{instance.placement[stage]}"
                )
    return split


def _deadlock_message(orders: Sequence[Sequence[OpKey]], position: list[int], num_stages: int) -> str:
    stuck = []
    for d, i in enumerate(position):
        if i < len(orders[d]):
            before = dependency(orders[d][i], num_stages)
            assert before is not None  # only F of stage 0 waits for nothing, and it never waits
            stuck.append(f"device {d} is stuck at {op_label(orders[d][i])} waiting for {op_label(before)}")
    return "the orders deadlock: " + "; ".join(stuck)
