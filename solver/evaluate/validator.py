"""The independent validator: checks a timed schedule against the rules of a valid schedule (docs/design.md).

It shares no code with the simulator or any schedule maker, only the rules themselves (`models.ops`,
`models.tolerance`). One check per rule (every op exactly once, placement, no start before time 0,
durations, dependencies with p2p, one op at a time per device or one overlapped pair, the memory
limit, and for host-link transfers: which exist, one per direction at a time, offload after F,
reload before B); every violation
comes back as a readable line. Times are compared up to float noise scaled to the times compared
(`models.tolerance.time_slack`), never to the schedule's extent, so one op far away cannot hide an
error elsewhere.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from enum import StrEnum

from pipesat.models import (
    Instance,
    Kind,
    Op,
    OpKey,
    Pair,
    Schedule,
    ScheduleError,
    dependency,
    expected_op_keys,
    op_duration,
    op_label,
    pair_duration,
    pair_error,
)
from pipesat.models.tolerance import duration_slack, fits, time_slack
from pipesat.models.units import memory_text
from pipesat.solver.evaluate.metrics import host_peaks, memory_profiles

OpSet = dict[OpKey, Op]
"""The schedule's ops that exist on the instance, each once, by key."""

Pairs = dict[OpKey, Pair]
"""The overlapped pair each paired op runs in, by the op's key."""


class Rule(StrEnum):
    """The rules the validator checks, one member each. A `StrEnum`: a rule equals, and prints as, its name."""

    MISSING = "missing"
    """An op the instance expects is not in the schedule."""
    REPEATED = "repeated"
    """An op appears more than once."""
    UNKNOWN = "unknown"
    """An op the instance does not have (a stage or microbatch out of range, a W without weight_times)."""
    PLACEMENT = "placement"
    """An op runs on a device its stage is not placed on."""
    START = "start"
    """An op starts before time 0."""
    DURATION = "duration"
    """An op does not last its time (or its overlapped pair's)."""
    DEPENDENCY = "dependency"
    """An op starts before the op it waits for ends (plus p2p between devices)."""
    OVERLAP = "overlap"
    """A device runs two ops at once that are not one overlapped pair."""
    MEMORY = "memory"
    """A device holds more activation memory than its limit (transfers in flight included)."""
    TRANSFER = "transfer"
    """A host-link transfer the instance cannot have: no link, an unknown stage or microbatch, another
    device, one repeated, an offload without its reload or the reverse, or the wrong length."""
    LINK = "link"
    """A device's host link runs two transfers of one direction at once."""
    OFFLOAD = "offload"
    """An offload starts before its F ends, or a reload before its offload ends."""
    RELOAD = "reload"
    """A B of an offloaded microbatch starts before its reload ends."""
    HOST = "host"
    """A device's host holds more offloaded activations than `host_memory` (each from its offload's
    start to its reload's end)."""


OP_SET_RULES = frozenset({Rule.MISSING, Rule.REPEATED, Rule.UNKNOWN, Rule.PLACEMENT, Rule.TRANSFER})
"""The rules of which ops run where: while one is broken, held memory means nothing and is not checked."""


@dataclass(frozen=True)
class Violation:
    """One broken rule, and the readable line that says how."""

    rule: Rule
    message: str

    def __str__(self) -> str:
        return self.message


def validate(schedule: Schedule) -> list[Violation]:
    """Every violation of the schedule, in a stable order; an empty list means it is valid.

    Parameters
    ----------
    schedule
        Any schedule, from any source.

    Returns
    -------
    list[Violation]
        Each broken rule with its ops and a message; empty when the schedule is valid.
    """
    instance = schedule.instance
    origin = max(0.0, min((op.start for op in schedule.ops), default=0.0))
    # W ops on an instance without weight times are reported as unknown, not expected everywhere.
    split = schedule.split_backward and instance.split_backward
    ops, violations = check_op_set(schedule, split)
    pairs = find_pairs(ops)
    for op in ops.values():
        violations += check_placement(instance, op)
        violations += check_start(op)
        violations += check_duration(instance, op, split, pairs.get(op.key))
    violations += check_dependencies(instance, ops, pairs, origin)
    violations += check_overlaps(ops, pairs, origin)
    if schedule.transfers:
        transfers, problems = check_transfer_set(schedule)
        violations += problems
        violations += check_link_overlaps(transfers, origin)
        violations += check_transfer_order(ops, transfers, origin)
        if not problems:  # the host's amounts need known stages
            violations += check_host_memory(schedule, origin)
    # Memory is only meaningful for a complete set of ops on their own devices (a device may not even exist).
    if not any(v.rule in OP_SET_RULES for v in violations):
        violations += check_memory(schedule)
    return violations


def check_op_set(schedule: Schedule, split: bool) -> tuple[OpSet, list[Violation]]:
    """Every expected op exactly once: the ops that exist, and the unknown, repeated and missing ones."""
    instance = schedule.instance
    violations: list[Violation] = []
    ops: OpSet = {}
    for op in schedule.ops:
        if op.kind == Kind.W and not instance.split_backward:
            violations.append(Violation(Rule.UNKNOWN, f"{op.label()} is a W op but the instance has no weight_times"))
            continue
        if not (0 <= op.stage < instance.num_stages and 0 <= op.microbatch < instance.num_microbatches):
            violations.append(
                Violation(
                    Rule.UNKNOWN,
                    f"{op.label()} does not exist: stages are 0..{instance.num_stages - 1}, "
                    f"microbatches 0..{instance.num_microbatches - 1}",
                )
            )
            continue
        if op.microbatch not in instance.microbatches_at(op.stage):
            route = instance.route(op.microbatch)
            violations.append(
                Violation(
                    Rule.UNKNOWN,
                    f"{op.label()} does not exist: microbatch {op.microbatch} runs stages "
                    f"{route.start}..{route.stop - 1} (one copy of a bidirectional placement)",
                )
            )
            continue
        if op.key in ops:
            violations.append(Violation(Rule.REPEATED, f"{op.label()} appears more than once"))
            continue
        ops[op.key] = op
    for key in expected_op_keys(instance, split):
        if key not in ops:
            violations.append(Violation(Rule.MISSING, f"{op_label(key)} is missing"))
    return ops, violations


def find_pairs(ops: OpSet) -> Pairs:
    """The overlapped pairs: ops on one device sharing one positive interval that are an F and a B of
    different microbatches, with that B's W or not. Any other ops sharing a device's time are not a
    pair, and `check_overlaps` reports them."""
    together: dict[tuple[int, float, float], list[Op]] = defaultdict(list)
    for op in ops.values():
        if op.end > op.start:
            together[(op.device, op.start, op.end)].append(op)
    pairs: Pairs = {}
    for group in together.values():
        by_kind = {op.kind: op.key for op in group}
        forward, backward, weight = by_kind.get(Kind.F), by_kind.get(Kind.B), by_kind.get(Kind.W)
        if len(group) not in (2, 3) or len(by_kind) != len(group) or forward is None or backward is None:
            continue
        pair = Pair(forward, backward, with_weight=weight is not None)
        if pair_error(pair) is None and set(pair.op_keys()) == {op.key for op in group}:
            pairs.update((key, pair) for key in pair.op_keys())
    return pairs


def check_placement(instance: Instance, op: Op) -> list[Violation]:
    """The op runs on the device its stage is placed on."""
    expected_device = instance.placement[op.stage]
    if op.device == expected_device:
        return []
    return [
        Violation(
            Rule.PLACEMENT,
            f"device {op.device}: {op.label()} runs here but stage {op.stage} is placed on device {expected_device}",
        )
    ]


def check_start(op: Op) -> list[Violation]:
    """The op starts at time 0 or later."""
    if op.start >= 0:
        return []
    return [Violation(Rule.START, f"device {op.device}: {op.label()} starts at {op.start:g}, before time 0")]


def check_duration(instance: Instance, op: Op, split: bool, pair: Pair | None = None) -> list[Violation]:
    """The op lasts its stage's time for its kind (a B without separate Ws the whole backward), or in
    an overlapped pair the pair's time (`models.ops.pair_duration`)."""
    duration = op_duration(instance, op.kind, op.stage, split) if pair is None else pair_duration(instance, pair, split)
    if abs((op.end - op.start) - duration) <= duration_slack(duration, op.end):
        return []
    return [
        Violation(
            Rule.DURATION,
            f"device {op.device}: {op.label()} lasts {op.end - op.start:g} (from {op.start:g} to {op.end:g}), "
            f"expected {duration:g}{' for its overlapped pair' if pair is not None else ''}",
        )
    ]


def check_dependencies(instance: Instance, ops: OpSet, pairs: Pairs, origin: float) -> list[Violation]:
    """Each op starts after its dependency (`models.ops.dependency`) ends, plus p2p between devices;
    a W in an overlapped pair with its B runs with it."""
    violations = []
    for op in ops.values():
        before = dependency(op.key, instance)
        earlier = ops.get(before) if before else None
        if earlier is None or (op.key in pairs and pairs.get(earlier.key) == pairs[op.key]):
            continue
        latency = instance.p2p_time if instance.placement[earlier.stage] != instance.placement[op.stage] else 0.0
        ready = earlier.end + latency
        if op.start < ready - time_slack(ready, origin):
            p2p = f" + p2p {latency:g}" if latency else ""
            violations.append(
                Violation(
                    Rule.DEPENDENCY,
                    f"device {op.device}: {op.label()} starts at {op.start:g} before {earlier.label()} "
                    f"ends at {earlier.end:g}{p2p}",
                )
            )
    return violations


def check_overlaps(ops: OpSet, pairs: Pairs, origin: float) -> list[Violation]:
    """Each device runs one op at a time, or the ops of one overlapped pair together."""
    per_device: dict[int, list[Op]] = defaultdict(list)
    for op in ops.values():
        per_device[op.device].append(op)

    def paired(previous: Op, current: Op) -> bool:
        return previous.key in pairs and pairs.get(current.key) == pairs[previous.key]

    return [
        Violation(
            Rule.OVERLAP,
            f"device {device}: {current.label()} starts at {current.start:g} while {previous.label()} "
            f"runs until {previous.end:g}",
        )
        for device in sorted(per_device)
        for previous, current in _overlapping(per_device[device], origin, paired)
    ]


def _overlapping(
    lane: list[Op], origin: float, together: Callable[[Op, Op], bool] = lambda previous, current: False
) -> Iterator[tuple[Op, Op]]:
    """The consecutive ops of one resource (a device, a host link's direction), in time order, where the
    later starts before the earlier ends, but for two that run `together` (an overlapped pair)."""
    for previous, current in itertools.pairwise(sorted(lane, key=lambda o: (o.start, o.end))):
        if not together(previous, current) and current.start < previous.end - time_slack(previous.end, origin):
            yield previous, current


def check_transfer_set(schedule: Schedule) -> tuple[OpSet, list[Violation]]:
    """Each transfer exists (a link, a stage and microbatch of the instance, O or R), runs on its
    stage's device, appears once and lasts the amount over the bandwidth; every offload has its
    reload and every reload its offload."""
    instance = schedule.instance
    if instance.host_link_bandwidth is None:
        return {}, [Violation(Rule.TRANSFER, "the schedule offloads activations but the instance has no host link")]
    violations: list[Violation] = []
    transfers: OpSet = {}
    for op in schedule.transfers:
        if op.kind not in (Kind.O, Kind.R) or not (
            0 <= op.stage < instance.num_stages and op.microbatch in instance.microbatches_at(op.stage)
        ):
            violations.append(Violation(Rule.TRANSFER, f"{op.label()} is not a transfer the instance has"))
        elif op.device != instance.placement[op.stage]:
            violations.append(
                Violation(Rule.TRANSFER, f"device {op.device}: {op.label()} moves stage {op.stage}'s activations")
            )
        elif op.key in transfers:
            violations.append(Violation(Rule.TRANSFER, f"{op.label()} appears more than once"))
        else:
            transfers[op.key] = op
            amount = instance.offload_fraction * instance.activation_memory[op.stage]
            duration = amount / instance.host_link_bandwidth
            if abs((op.end - op.start) - duration) > duration_slack(duration, op.end):
                violations.append(
                    Violation(
                        Rule.TRANSFER,
                        f"device {op.device}: {op.label()} lasts {op.end - op.start:g}, expected {duration:g}",
                    )
                )
    for key in transfers:
        other = OpKey(Kind.R if key.kind == Kind.O else Kind.O, key.stage, key.microbatch)
        if other not in transfers:
            violations.append(Violation(Rule.TRANSFER, f"{op_label(key)} has no {op_label(other)}"))
    return transfers, violations


def check_link_overlaps(transfers: OpSet, origin: float) -> list[Violation]:
    """Each direction of a device's host link runs one transfer at a time."""
    lanes: dict[tuple[int, Kind], list[Op]] = defaultdict(list)
    for op in transfers.values():
        lanes[(op.device, op.kind)].append(op)
    return [
        Violation(
            Rule.LINK,
            f"device {device}: {current.label()} starts at {current.start:g} on the host link while "
            f"{previous.label()} runs until {previous.end:g}",
        )
        for (device, _), lane in sorted(lanes.items())
        for previous, current in _overlapping(lane, origin)
    ]


def check_transfer_order(ops: OpSet, transfers: OpSet, origin: float) -> list[Violation]:
    """An offload after its F, a reload after its offload, the B after its reload."""
    violations = []
    for key, op in transfers.items():
        offload = key.kind == Kind.O
        earlier = (ops if offload else transfers).get(OpKey(Kind.F if offload else Kind.O, key.stage, key.microbatch))
        if earlier is not None and op.start < earlier.end - time_slack(earlier.end, origin):
            violations.append(
                Violation(
                    Rule.OFFLOAD,
                    f"device {op.device}: {op.label()} starts at {op.start:g} before {earlier.label()} "
                    f"ends at {earlier.end:g}",
                )
            )
        backward = None if offload else ops.get(OpKey(Kind.B, key.stage, key.microbatch))
        if backward is not None and backward.start < op.end - time_slack(op.end, origin):
            violations.append(
                Violation(
                    Rule.RELOAD,
                    f"device {op.device}: {backward.label()} starts at {backward.start:g} before "
                    f"{op.label()} ends at {op.end:g}",
                )
            )
    return violations


def check_host_memory(schedule: Schedule, origin: float) -> list[Violation]:
    """Each device's host holds at most `host_memory` of offloaded activations at once
    (`metrics.host_peaks`)."""
    instance = schedule.instance
    if instance.host_memory is None:
        return []
    slack = time_slack(max((op.end for op in schedule.transfers), default=0.0), origin)
    return [
        Violation(
            Rule.HOST,
            f"device {device}: its host holds {memory_text(peak.held, instance.memory_unit)} of offloaded "
            f"activations at time {f'{peak.at:g} {instance.time_unit}'.strip()}, over host_memory "
            f"{memory_text(instance.host_memory, instance.memory_unit)}",
        )
        for device, peak in sorted(host_peaks(schedule, slack).items())
        if not fits(peak.held, instance.host_memory)
    ]


def check_memory(schedule: Schedule) -> list[Violation]:
    """Each device's held memory fits its memory limit (`models.tolerance.fits`), if it has one."""
    instance = schedule.instance
    if instance.memory_limit is None:
        return []
    violations = []
    for device, profile in enumerate(memory_profiles(schedule)):
        limit = instance.memory_limit[device]
        if not fits(profile.peak, limit):
            at = float(profile.times[profile.memory.argmax()])
            violations.append(
                Violation(
                    Rule.MEMORY,
                    f"device {device}: holds {memory_text(profile.peak, instance.memory_unit)} of activation "
                    f"memory at time {f'{at:g} {instance.time_unit}'.strip()}, over the limit "
                    f"{memory_text(limit, instance.memory_unit)}",
                )
            )
    return violations


def ensure_valid(schedule: Schedule) -> Schedule:
    """Return the schedule if it is valid; otherwise raise `ScheduleError` with the first violations.

    Parameters
    ----------
    schedule
        Any schedule, from any source.

    Returns
    -------
    Schedule
        The same schedule, valid.

    Raises
    ------
    ScheduleError
        The first violations, in one message.
    """
    violations = validate(schedule)
    if violations:
        shown = "; ".join(str(v) for v in violations[:3])
        more = f" (and {len(violations) - 3} more)" if len(violations) > 3 else ""
        raise ScheduleError(f"invalid schedule {schedule.name or ''}: {shown}{more}".replace("  ", " "))
    return schedule
