"""A starting schedule under a memory limit with offload: a list scheduler in time order that moves
activations to the host and back as the limit needs (docs/offload.md).

The handwritten offload schedules keep a base order and add transfers to it; below the memory that
order needs, its forwards do not fit whatever is offloaded, and a search from the one-at-a-time
order with everything offloaded moves slowly. Here every device decides at each moment, as the
memory-gated start does for the order alone:

- its compute: a B whose input is there and whose activations are on the device, else (with
  `eager_weights`) a pending W, else a forward whose input is there and whose activations fit the
  limit with the room a wanted reload keeps back, else a pending W; the lowest microbatch first,
  the later stage first among equals;
- its device-to-host link: the offload of the oldest activations on the device whose B is not due
  within a round trip on the link (the last stage's, whose B follows its own F, never leave);
- its host-to-device link: the reload of the activations whose B is due first, once that B is due
  within the reload's time (the chain of later stages' Bs timed from its last op started), when
  they fit; until they do, the device starts no forward.

The times are as soon as possible under those rules; the schedule that leaves is a timed schedule
with transfers, which the solve re-times with the one simulator (`simulator.transfer_plan_of`) and
validates. A device that can do nothing while nothing is left to happen has no schedule (None).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from pipesat.models import Instance, Kind, Op, OpKey, Schedule, op_duration
from pipesat.models.ops import dependency, expected_op_keys, input_ready, memory_change, offload_amount, transfer_time
from pipesat.models.tolerance import fits

NAME = "offload-gated"


@dataclass(frozen=True)
class Variant:
    """One variant of the list scheduler. `eager_weights`: a W right after its B (its memory freed
    first), or deferred until no forward fits (zero-bubble's choice, which fills idle time).
    `in_flight`: each stage s of S starts a forward only while fewer than `in_flight` x (S - s) of
    its forwards are ahead of its backwards (1F1B's count at 1; None: as many as fit), so that the
    first stages do not run ahead of the pipeline, every forward offloaded, and leave the later
    stages' forwards and the Bs to come all at once. `lookahead`: a reload is timed only from an op of
    its B's chain at most that many ops before the B that has started (None: from any), so that a
    reload does not hold memory for a B that ops still far up the chain, late on busy devices, keep
    waiting (on the 7B V at 1/3 of the 1F1B peak, with any op, reloads end 20 ms before their B on
    average)."""

    eager_weights: bool
    in_flight: float | None
    lookahead: int | None = None


VARIANTS = tuple(
    Variant(eager, cap, lookahead)
    for lookahead in (None, 1, 2)
    for eager in (False, True)
    for cap in (0.5, 1.0, 1.5, None)
    if lookahead is None or cap != 0.5
)
"""The variants the solve starts from; the best of them counts. A cap of 0.5 never gave the best with
a lookahead on the benchmark's instances (benchmarks/bench_offload.py), so it runs only without."""


@dataclass
class _Device:
    """One device's state as the list scheduler goes: when its compute and its two link directions
    are free, the memory it holds now and the frees to come, and a reload it wants room for."""

    compute_free: float = 0.0
    offload_free: float = 0.0
    reload_free: float = 0.0
    held: float = 0.0
    frees: list[tuple[float, float]] = field(default_factory=list)
    wanted: float = 0.0

    def release(self, now: float) -> None:
        """Apply the frees due by `now`."""
        due = [amount for at, amount in self.frees if at <= now]
        self.held -= sum(due)
        self.frees = [(at, amount) for at, amount in self.frees if at > now]


def offload_gated_schedule(instance: Instance, split: bool, variant: Variant) -> Schedule | None:
    """The schedule of the module notes, or None where it finds none (a bidirectional or paired
    instance, no host link, or a device that cannot go on)."""
    if instance.host_link_bandwidth is None or instance.bidirectional:
        return None
    return _Scheduler(instance, split, variant).run()


def offload_gated_schedules(instance: Instance, split: bool) -> list[Schedule]:
    """The schedule of each variant in `VARIANTS` that has one (without W ops, those that differ only
    in when a W runs are one)."""
    variants = VARIANTS if split else [v for v in VARIANTS if not v.eager_weights]
    found = (offload_gated_schedule(instance, split, variant) for variant in variants)
    return [schedule for schedule in found if schedule is not None]


class _Scheduler:
    def __init__(self, instance: Instance, split: bool, variant: Variant) -> None:
        self.instance, self.split, self.eager = instance, split, variant.eager_weights
        stages = instance.num_stages
        self.caps = [math.inf if variant.in_flight is None else variant.in_flight * (stages - s) for s in range(stages)]
        self.lookahead = variant.lookahead
        self.ahead = [0] * stages  # forwards started less backwards started, per stage
        self.devices = [_Device() for _ in range(instance.num_devices)]
        # Per device, the ops to place whose input is placed (or that wait for none): the only ones
        # that can start, kept so that each moment looks at a few ops, not all of them.
        self.released: list[set[OpKey]] = [set() for _ in self.devices]
        self.dependents: dict[OpKey, list[OpKey]] = {}
        self.before: dict[OpKey, OpKey | None] = {}
        self.duration: dict[OpKey, float] = {}
        self.left = 0
        for key in expected_op_keys(instance, split):
            before = self.before[key] = dependency(key, instance)
            self.duration[key] = op_duration(instance, key.kind, key.stage, split)
            if before is None:
                self.released[instance.placement[key.stage]].add(key)
            else:
                self.dependents.setdefault(before, []).append(key)
            self.left += 1
        self.start: dict[OpKey, float] = {}
        self.end: dict[OpKey, float] = {}
        self.offloaded: dict[tuple[int, int], float] = {}  # offload's end
        self.reloaded: dict[tuple[int, int], float] = {}  # reload's end
        # Per device, its (stage, microbatch)s whose F has started and whose activations are on it,
        # neither offloaded nor their B started; and those offloaded and not yet reloaded.
        self.on_device: list[set[tuple[int, int]]] = [set() for _ in self.devices]
        self.on_host: list[set[tuple[int, int]]] = [set() for _ in self.devices]
        self.transfers: list[Op] = []

    def run(self) -> Schedule | None:
        now = 0.0
        while self.left:
            for device in self.devices:
                device.release(now)
            while self._step(now):
                pass
            later = self._next_time(now)
            if later is None:
                return None
            now = later
        ops = tuple(
            Op(key.kind, key.stage, key.microbatch, self.instance.placement[key.stage], at, self.end[key])
            for key, at in self.start.items()
        )
        return Schedule(self.instance, ops, NAME, transfers=tuple(self.transfers))

    def _step(self, now: float) -> bool:
        """Start whatever each device can start at `now`; whether anything started."""
        started = False
        for d, device in enumerate(self.devices):
            if device.offload_free <= now:
                started |= self._offload(d, now)
            if device.reload_free <= now:
                started |= self._reload(d, now)
            if device.compute_free <= now:
                started |= self._compute(d, now)
        return started

    def _limit(self, d: int) -> float:
        limit = self.instance.limit_of(d)
        return math.inf if limit is None else limit

    def _ready(self, key: OpKey, now: float) -> bool:
        at = input_ready(key, self.instance, self.end)
        return at is not None and at <= now

    def _resident(self, stage: int, microbatch: int, now: float) -> bool:
        """Whether the activations of (stage, microbatch) are on the device at `now`."""
        pair = (stage, microbatch)
        if pair not in self.offloaded:
            return True
        return pair in self.reloaded and self.reloaded[pair] <= now

    def _compute(self, d: int, now: float) -> bool:
        device, released = self.devices[d], self.released[d]
        ready = sorted((k for k in released if self._ready(k, now)), key=lambda k: (k.microbatch, -k.stage))
        backwards = [k for k in ready if k.kind == Kind.B and self._resident(k.stage, k.microbatch, now)]
        weights = [k for k in ready if k.kind == Kind.W]
        room = self._limit(d) - device.wanted
        forwards = [
            k
            for k in ready
            if k.kind == Kind.F
            and self.ahead[k.stage] < self.caps[k.stage]
            and fits(device.held + self.instance.activation_memory[k.stage], room)
        ]
        ranked = [backwards, weights, forwards] if self.eager else [backwards, forwards, weights]
        choice = next((keys[0] for keys in ranked if keys), None)
        if choice is None:
            return False
        duration = self.duration[choice]
        self.start[choice], self.end[choice] = now, now + duration
        device.compute_free = now + duration
        change = memory_change(self.instance, choice.kind, choice.stage, self.split)
        if change > 0:
            device.held += change
        elif change < 0:
            device.frees.append((now + duration, -change))
        released.discard(choice)
        self.left -= 1
        for after in self.dependents.get(choice, []):
            self.released[self.instance.placement[after.stage]].add(after)
        self.ahead[choice.stage] += {Kind.F: 1, Kind.B: -1}.get(choice.kind, 0)
        if choice.kind == Kind.F:
            self.on_device[d].add((choice.stage, choice.microbatch))
        elif choice.kind == Kind.B:
            self.on_device[d].discard((choice.stage, choice.microbatch))
        return True

    def _due(self, stage: int, microbatch: int) -> float | None:
        """When (stage, microbatch)'s B can start at the earliest, by the chain of ops it waits for
        from the last of them that has started; None while none has, while none of the `lookahead`
        ops before the B has, or while one on the B's own device has not (its memory and its time are
        not spoken for: a reload that held memory for it could keep the op it waits for from
        starting)."""
        wait = 0.0
        device = self.instance.placement[stage]
        key: OpKey | None = OpKey(Kind.B, stage, microbatch)
        placement = self.instance.placement
        steps = 0
        while key is not None:
            before = self.before[key]
            steps += 1
            if before is None:
                return None
            if before in self.end:
                across = placement[before.stage] != placement[key.stage]
                return self.end[before] + wait + (self.instance.p2p_time if across else 0.0)
            if placement[before.stage] == device or (self.lookahead is not None and steps >= self.lookahead):
                return None
            if placement[before.stage] != placement[key.stage]:
                wait += self.instance.p2p_time
            wait += self.duration[before]
            key = before
        return None

    def _offload(self, d: int, now: float) -> bool:
        device = self.devices[d]
        candidates = []
        for stage, j in self.on_device[d]:
            forward = OpKey(Kind.F, stage, j)
            if offload_amount(self.instance, stage) <= 0 or self.end[forward] > now:
                continue
            due = self._due(stage, j)
            if due is not None and due <= now + 2 * transfer_time(self.instance, stage):
                continue
            candidates.append((self.end[forward], stage, j))
        if not candidates:
            return False
        _, stage, j = min(candidates)
        self.on_device[d].discard((stage, j))
        self.on_host[d].add((stage, j))
        finish = now + transfer_time(self.instance, stage)
        self.offloaded[stage, j] = finish
        device.offload_free = finish
        device.frees.append((finish, offload_amount(self.instance, stage)))
        self.transfers.append(Op(Kind.O, stage, j, d, now, finish))
        return True

    def _reload(self, d: int, now: float) -> bool:
        device = self.devices[d]
        waiting = []
        for stage, j in self.on_host[d]:
            if self.offloaded[stage, j] > now:
                continue
            due = self._due(stage, j)
            if due is not None and due - transfer_time(self.instance, stage) <= now:
                waiting.append((due, stage, j))
        device.wanted = 0.0
        if not waiting:
            return False
        _, stage, j = min(waiting)
        amount = offload_amount(self.instance, stage)
        if not fits(device.held + amount, self._limit(d)):
            device.wanted = amount
            return False
        finish = now + transfer_time(self.instance, stage)
        self.reloaded[stage, j] = finish
        self.on_host[d].discard((stage, j))
        device.reload_free = finish
        device.held += amount
        self.transfers.append(Op(Kind.R, stage, j, d, now, finish))
        return True

    def _next_time(self, now: float) -> float | None:
        """The next moment anything may change: a device or link coming free, a free, an input
        arriving, a reload falling due (None when nothing is left to happen)."""
        times = []
        for d, device in enumerate(self.devices):
            times += [device.compute_free, device.offload_free, device.reload_free]
            times += [at for at, _ in device.frees]
            for key in self.released[d]:
                at = input_ready(key, self.instance, self.end)
                if at is not None:
                    times.append(at)
            for stage, j in self.on_host[d]:
                times.append(self.offloaded[stage, j])
                due = self._due(stage, j)
                if due is not None:
                    times.append(due - transfer_time(self.instance, stage))
            times += [finish for finish in self.reloaded.values()]
        later = [t for t in times if t > now]
        return min(later) if later else None
