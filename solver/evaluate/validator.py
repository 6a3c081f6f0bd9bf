"""The independent validator: checks a timed schedule against the rules of DESIGN.md.

It shares no code with the simulator or any schedule maker; it reads the rules directly (every op
exactly once, placement, durations, dependencies with p2p, one op at a time per device, the memory
limit) and returns every violation as a readable line.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from dataclasses import dataclass

from models import Op, Schedule, ScheduleError, expected_op_keys, op_duration, op_label
from solver.evaluate.metrics import memory_profiles

RELATIVE_TOLERANCE = 1e-9


@dataclass(frozen=True)
class Violation:
    """One broken rule. `rule` is one of: missing, repeated, unknown, placement, duration,
    dependency, overlap, memory."""

    rule: str
    message: str

    def __str__(self) -> str:
        return self.message


def validate(schedule: Schedule) -> list[Violation]:
    """Every violation of the schedule, in a stable order; an empty list means it is valid."""
    instance = schedule.instance
    violations: list[Violation] = []
    scale = max([1.0] + [abs(t) for op in schedule.ops for t in (op.start, op.end)])
    tolerance = RELATIVE_TOLERANCE * scale
    # W ops on an instance without weight times are reported as unknown below, not expected everywhere.
    split = schedule.split_backward and instance.split_backward

    by_key: dict[tuple[str, int, int], Op] = {}
    for op in schedule.ops:
        if op.kind == "W" and not instance.split_backward:
            violations.append(Violation("unknown", f"{op.label()} is a W op but the instance has no weight_times"))
            continue
        if not (0 <= op.stage < instance.num_stages and 0 <= op.microbatch < instance.num_microbatches):
            violations.append(
                Violation(
                    "unknown",
                    f"{op.label()} does not exist: stages are 0..{instance.num_stages - 1}, "
                    f"microbatches 0..{instance.num_microbatches - 1}",
                )
            )
            continue
        if op.key in by_key:
            violations.append(Violation("repeated", f"{op.label()} appears more than once"))
            continue
        by_key[op.key] = op
    for key in expected_op_keys(instance, split):
        if key not in by_key:
            violations.append(Violation("missing", f"{op_label(key)} is missing"))

    for op in by_key.values():
        expected_device = instance.placement[op.stage]
        if op.device != expected_device:
            violations.append(
                Violation(
                    "placement",
                    f"device {op.device}: {op.label()} runs here but stage {op.stage} is placed on device {expected_device}",
                )
            )
        duration = op_duration(instance, op.kind, op.stage, split)
        if abs((op.end - op.start) - duration) > tolerance:
            violations.append(
                Violation(
                    "duration",
                    f"device {op.device}: {op.label()} lasts {op.end - op.start:g} (from {op.start:g} to {op.end:g}), "
                    f"expected {duration:g}",
                )
            )

    last_stage = instance.num_stages - 1
    for op in by_key.values():
        kind, stage, mb = op.key
        if kind == "F":
            before = ("F", stage - 1, mb) if stage > 0 else None
        elif kind == "B":
            before = ("F", stage, mb) if stage == last_stage else ("B", stage + 1, mb)
        else:
            before = ("B", stage, mb)
        earlier = by_key.get(before) if before else None
        if earlier is None:
            continue
        latency = instance.p2p_time if instance.placement[earlier.stage] != instance.placement[op.stage] else 0.0
        if op.start < earlier.end + latency - tolerance:
            p2p = f" + p2p {latency:g}" if latency else ""
            violations.append(
                Violation(
                    "dependency",
                    f"device {op.device}: {op.label()} starts at {op.start:g} before {earlier.label()} "
                    f"ends at {earlier.end:g}{p2p}",
                )
            )

    per_device: dict[int, list[Op]] = defaultdict(list)
    for op in by_key.values():
        per_device[op.device].append(op)
    for device in sorted(per_device):
        ops = sorted(per_device[device], key=lambda o: (o.start, o.end))
        for previous, current in itertools.pairwise(ops):
            if current.start < previous.end - tolerance:
                violations.append(
                    Violation(
                        "overlap",
                        f"device {device}: {current.label()} starts at {current.start:g} while {previous.label()} "
                        f"runs until {previous.end:g}",
                    )
                )

    limit = instance.memory_limit
    # Memory is only meaningful for a complete set of ops on their own devices (a device may not even exist).
    if limit is not None and not any(v.rule in ("missing", "repeated", "unknown", "placement") for v in violations):
        for device, profile in enumerate(memory_profiles(schedule)):
            if profile.peak > limit * (1 + RELATIVE_TOLERANCE) + RELATIVE_TOLERANCE:
                at = float(profile.times[profile.memory.argmax()])
                violations.append(
                    Violation(
                        "memory",
                        f"device {device}: holds {profile.peak:g} of activation memory at time {at:g}, "
                        f"over the limit {limit:g}",
                    )
                )
    return violations


def ensure_valid(schedule: Schedule) -> Schedule:
    """Return the schedule if it is valid; otherwise raise `ScheduleError` with the first violations."""
    violations = validate(schedule)
    if violations:
        shown = "; ".join(str(v) for v in violations[:3])
        more = f" (and {len(violations) - 3} more)" if len(violations) > 3 else ""
        raise ScheduleError(f"invalid schedule {schedule.name or ''}: {shown}{more}".replace("  ", " "))
    return schedule
