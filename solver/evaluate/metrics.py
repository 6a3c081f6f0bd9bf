"""The one metrics module: every number pipesat reports about a schedule is computed here."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

from pipesat.models import Kind, Objective, Schedule
from pipesat.models.ops import memory_change, offload_amount, transfer_change
from pipesat.models.tolerance import same

if TYPE_CHECKING:
    import numpy as np

# numpy is imported in the functions that compute: the command line's help and refusals start without it.


@dataclass(frozen=True)
class MemoryProfile:
    """Held activation memory of one device: `memory[i]` is held from `times[i]` to `times[i + 1]`."""

    times: np.ndarray
    memory: np.ndarray

    @property
    def peak(self) -> float:
        return float(self.memory.max()) if len(self.memory) else 0.0


@dataclass(frozen=True)
class Metrics:
    """What pipesat reports about a timed schedule. Spans, busy times and peaks are per device.

    Units are the instance's: times (`makespan`, `spans`, `busy`, `zero_bubble_bound`) in its
    `time_unit`, memory (`peak_memory`, `max_peak_memory`) in its `memory_unit` (MiB for an instance
    from `instance_from_model`); the rates are fractions. A plan's `Measure` is in ms and bytes.
    """

    makespan: float
    spans: tuple[float, ...]
    max_span: float
    busy: tuple[float, ...]
    bubble_rate: float
    span_bubble_rate: float
    peak_memory: tuple[float, ...]
    max_peak_memory: float
    zero_bubble_bound: float

    def objective(self, objective: Objective) -> float:
        """The value of a time objective (the makespan or the max span)."""
        return self.makespan if objective == Objective.MAKESPAN else self.max_span

    def bubble_rate_for(self, objective: Objective) -> float:
        return self.bubble_rate if objective == Objective.MAKESPAN else self.span_bubble_rate

    def to_dict(self) -> dict[str, float | list[float]]:
        return {key: list(value) if isinstance(value, tuple) else value for key, value in asdict(self).items()}


def _device_arrays(schedule: Schedule) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    import numpy as np

    ops = schedule.ops
    device = np.fromiter((op.device for op in ops), dtype=np.int64, count=len(ops))
    start = np.fromiter((op.start for op in ops), dtype=np.float64, count=len(ops))
    end = np.fromiter((op.end for op in ops), dtype=np.float64, count=len(ops))
    return device, start, end


def bubble_rate(total_busy: float, num_devices: int, value: float) -> float:
    """`1 - total busy time / (p * T)` for an objective value T."""
    return 1.0 - total_busy / (num_devices * value) if value > 0 else 0.0


def relative_gap(value: float, reference: float) -> float:
    """`(value - reference) / reference`: how much slower (or larger) a value is than an optimum or a
    bound, the one definition of a gap everywhere (an optimum of 100 and a value of 110: 10%).

    Values equal to float noise (`models.tolerance`, e.g. the same times summed in another order)
    count as equal, so the same schedule value is never reported with a spurious 1e-14 gap. A value
    above a reference of 0 is infinitely far from it.
    """
    if same(value, reference):
        return 0.0
    if reference <= 0:
        return math.inf
    return (value - reference) / reference


def makespan(schedule: Schedule) -> float:
    """From the first op's start to the last op's end (0 without ops): `Metrics.makespan` alone, for a
    caller that times many orders and needs no more of them (the periodic start's periods)."""
    if not schedule.ops:
        return 0.0
    return max(op.end for op in schedule.ops) - min(op.start for op in schedule.ops)


def compute_metrics(schedule: Schedule) -> Metrics:
    """All metrics of a schedule (it need not be valid; the validator says whether it is)."""
    import numpy as np

    p = schedule.instance.num_devices
    device, start, end = _device_arrays(schedule)
    if len(device) == 0:
        zeros = tuple(0.0 for _ in range(p))
        return Metrics(0.0, zeros, 0.0, zeros, 0.0, 0.0, zeros, 0.0, 0.0)
    total = makespan(schedule)
    first = np.full(p, np.inf)
    last = np.full(p, -np.inf)
    np.minimum.at(first, device, start)
    np.maximum.at(last, device, end)
    spans = np.where(np.isfinite(first), last - first, 0.0)
    # The ops of an overlapped pair share one interval: the device is busy for it once.
    intervals = np.unique(np.column_stack((device, start, end)), axis=0)
    busy = np.bincount(intervals[:, 0].astype(np.int64), weights=intervals[:, 2] - intervals[:, 1], minlength=p)
    peaks = tuple(profile.peak for profile in memory_profiles(schedule))
    total_busy = float(busy.sum())
    max_span = float(spans.max())
    return Metrics(
        makespan=total,
        spans=tuple(float(x) for x in spans),
        max_span=max_span,
        busy=tuple(float(x) for x in busy),
        bubble_rate=bubble_rate(total_busy, p, total),
        span_bubble_rate=bubble_rate(total_busy, p, max_span),
        peak_memory=peaks,
        max_peak_memory=max(peaks),
        zero_bubble_bound=float(busy.max()),
    )


def link_busy(schedule: Schedule) -> tuple[float, ...]:
    """Per device, how long its host link carries transfers, both directions added (docs/offload.md);
    all 0 for a schedule that offloads nothing."""
    busy = [0.0] * schedule.instance.num_devices
    for op in schedule.transfers:
        busy[op.device] += op.end - op.start
    return tuple(busy)


def memory_profiles(schedule: Schedule) -> list[MemoryProfile]:
    """Memory over time per device, by `models.ops.memory_change`.

    At equal times frees come before allocations, so an op that ends when another starts does not
    count both (the same half-open intervals as the CP-SAT model). An offload frees what it moved at
    its end and a reload allocates it at its start (`models.ops.transfer_change`): memory is held
    while either is in flight.
    """
    import numpy as np

    instance = schedule.instance
    split = schedule.split_backward
    events: list[list[tuple[float, int, float]]] = [[] for _ in range(instance.num_devices)]
    for op in schedule.ops:
        change = memory_change(instance, op.kind, op.stage, split)
        if op.kind == Kind.F:
            events[op.device].append((op.start, 1, change))
        else:
            events[op.device].append((op.end, 0, change))
    for op in schedule.transfers:
        change = transfer_change(instance, op.kind, op.stage)
        events[op.device].append((op.start, 1, change) if op.kind == Kind.R else (op.end, 0, change))
    profiles = []
    for device_events in events:
        if not device_events:
            profiles.append(MemoryProfile(np.zeros(1), np.zeros(1)))
            continue
        array = np.array(device_events, dtype=np.float64)
        order = np.lexsort((array[:, 1], array[:, 0]))
        times, deltas = array[order, 0], array[order, 2]
        profiles.append(MemoryProfile(times, np.cumsum(deltas)))
    return profiles


@dataclass(frozen=True)
class HostPeak:
    """The most offloaded activations a device's host holds at once (`host_memory`'s rule), when it
    first does, and the (stage, microbatch)s it holds then."""

    held: float
    at: float
    holding: frozenset[tuple[int, int]]


def host_peaks(schedule: Schedule, slack: float = 0.0) -> dict[int, HostPeak]:
    """Per device with offloads, its host's peak: each offloaded (stage, microbatch) holds its offload
    amount from its offload's start to its reload's end (`slack` earlier: an end within float noise
    of a start is before it). Transfers without their pair are left out."""
    instance = schedule.instance
    by_key = {op.key: op for op in schedule.transfers}
    events: dict[int, list[tuple[float, float, tuple[int, int]]]] = {}
    for op in schedule.transfers:
        reload = by_key.get(op.key._replace(kind=Kind.R))
        if op.kind == Kind.O and reload is not None:
            amount = offload_amount(instance, op.stage)
            pair = (op.stage, op.microbatch)
            events.setdefault(op.device, []).extend([(op.start, amount, pair), (reload.end - slack, -amount, pair)])
    peaks = {}
    for device, changes in events.items():
        held, peak = 0.0, HostPeak(0.0, 0.0, frozenset())
        holding: set[tuple[int, int]] = set()
        for time, change, pair in sorted(changes, key=lambda event: event[:2]):  # frees first
            held += change
            (holding.add if change > 0 else holding.discard)(pair)
            if held > peak.held:
                peak = HostPeak(held, time, frozenset(holding))
        peaks[device] = peak
    return peaks
