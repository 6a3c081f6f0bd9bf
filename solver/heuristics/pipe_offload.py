"""PipeOffload's handwritten offload schedules, and the baseline that offloads stage 0's device (docs/offload.md).

PipeOffload (Wan et al., ICML 2025) keeps a handwritten order of F, B and W and adds to it, per
device, the offload of chosen (stage, microbatch)s right after their F and their reload shortly
before their B, on the device's host link. The order is the base schedule's, unchanged; what
differs is which (stage, microbatch)s are offloaded (`Selection`):

- full: every one of them;
- selective: those of each device's first chunk (the paper's option `offload-chunk-num` at 1: a chunk is
  offloaded when its index on the device is below that number), whose lifespan from F to B is the
  long one on the V placement, the second chunk staying resident; with one chunk per device (the
  linear placement) there is no such chunk, and every other microbatch is offloaded, half of
  what a device holds in the steady state;
- the baseline: every (stage, microbatch) of device 0, where stage 0 is, and none elsewhere.

PipeOffload's families also keep resident what cannot be hidden: as in its scheduler, an offload
is dropped when the base schedule's lifespan (F's end to B's start, less one B for the reload's
margin) is at most three times an offload and a reload (`HIDE_FACTOR`). The baseline drops none. Under a
memory limit, where what hides does not fit, more of the selection is offloaded, one at a time: at a
device's first moment over its limit, the one resident then with the longest lifespan
(`_within_limit`), until every device fits or none is left (an offload that does not hide costs
time; a peak over the limit has no schedule at all).

Transfers are timed by the one simulator: offloads in the order of their Fs, reloads in the order
of their Bs. A reload is timed back from its B's start, as PipeOffload's scheduler does: it waits for
the end of the op two steps before its B on the device (`RELOAD_LEAD`), and for the last op that
ends, in the schedule timed with that wait alone, by the B's start less the reload's time among the ops of the next stage's
device and the later stages' Bs of the microbatch, the chain its gradient comes down (`_timed_back`).
The second wait matters where the device idles before its B: in 1F1B's warm-up the op two steps before the first Bs ends long before
they can start, and a reload that waited for it alone held its memory through the idle time
(PipeOffload full (1F1B) on OptPipe's instance: reloads ended up to 266 ms, ten forwards, before
their B, and device 0's peak fell by one microbatch of eight).
"""

from __future__ import annotations

from collections.abc import Callable

from pipesat.models import Instance, Kind, OpKey, Schedule, step_keys
from pipesat.models.ops import offload_amount, op_duration, transfer_time
from pipesat.models.tolerance import fits
from pipesat.solver.evaluate.metrics import host_peaks, memory_profiles
from pipesat.solver.evaluate.simulator import TransferPlan, simulate
from pipesat.solver.heuristics.heuristic import StepOrders

Selection = Callable[[Instance, int, int], bool]
"""Whether (instance, stage, microbatch) is chosen for offload."""

HIDE_FACTOR = 3.0
"""PipeOffload's scheduler offloads a (stage, microbatch) only when its lifespan, less one B, exceeds
this many offload-and-reload times."""

RELOAD_LEAD = 2
"""A reload waits for the end of the op this many steps before its B (it then overlaps the op just before)."""


def chunk_of(instance: Instance, stage: int) -> int:
    """The index of `stage` among its device's stages, in stage order (0: the device's first chunk)."""
    device = instance.placement[stage]
    return sum(1 for s in range(stage) if instance.placement[s] == device)


def every(instance: Instance, stage: int, microbatch: int) -> bool:
    """Full offload."""
    return True


def first_chunk(instance: Instance, stage: int, microbatch: int) -> bool:
    """Selective offload with chunks: the device's first chunk only."""
    return chunk_of(instance, stage) == 0


def every_other(instance: Instance, stage: int, microbatch: int) -> bool:
    """Selective offload with one chunk per device: microbatches 0, 2, 4, ..."""
    return microbatch % 2 == 0


def on_device_0(instance: Instance, stage: int, microbatch: int) -> bool:
    """The baseline: everything of stage 0's device."""
    return instance.placement[stage] == 0


def needs_host_link(instance: Instance) -> str | None:
    if instance.host_link_bandwidth is None:
        return "needs a host link (host_link_bandwidth)"
    return None


def offload_plan(instance: Instance, orders: StepOrders, select: Selection, hide_only: bool) -> TransferPlan:
    """The transfers of the (stage, microbatch)s `select` chooses on the base `orders` (the module
    notes); with `hide_only`, those whose base lifespan cannot hide them are left resident."""
    chosen = {
        (s, j)
        for s in range(instance.num_stages)
        if offload_amount(instance, s) > 0
        for j in instance.microbatches_at(s)
        if select(instance, s, j)
    }
    base = simulate(instance, orders)
    plan = _plan(instance, orders, _hidden(instance, base, chosen) if hide_only and chosen else chosen)
    if hide_only and instance.memory_limit is not None:
        plan = _within_limit(instance, orders, plan, chosen)
    chosen = {(key.stage, key.microbatch) for link in plan.links for key in link}
    while instance.host_memory is not None:
        # Within the host's memory: drop the offload held longest at a host's first peak over it.
        timed = simulate(instance, orders, links=plan.links, waits=plan.waits)
        over = [peak for peak in host_peaks(timed).values() if not fits(peak.held, instance.host_memory)]
        if not over:
            break
        at = {op.key: op for op in timed.transfers}
        held = {pair: at[OpKey(Kind.R, *pair)].end - at[OpKey(Kind.O, *pair)].start for pair in over[0].holding}
        chosen = chosen - {max(held, key=held.__getitem__)}
        plan = _plan(instance, orders, chosen)
    return plan


def _within_limit(
    instance: Instance, orders: StepOrders, plan: TransferPlan, chosen: set[tuple[int, int]]
) -> TransferPlan:
    """Under a memory limit, the plan with more of the `chosen` (stage, microbatch)s offloaded until
    every device fits: at a device's first moment over its limit, the one resident then whose base
    lifespan is the longest, one at a time (the hide rule is for no limit: an offload that does not
    hide costs time, a peak over the limit has no schedule). The plan as it was when none is left."""
    offloaded = {(key.stage, key.microbatch) for link in plan.links for key in link}
    while True:
        timed = simulate(instance, orders, links=plan.links, waits=plan.waits)
        moment = _first_over(instance, timed)
        if moment is None:
            return plan
        device, at = moment
        spans = {(op.stage, op.microbatch): op for op in timed.ops if op.kind == Kind.F and op.device == device}
        backs = {(op.stage, op.microbatch): op.start for op in timed.ops if op.kind == Kind.B}
        resident = [pair for pair in chosen - offloaded if pair in spans and spans[pair].start <= at < backs[pair]]
        if not resident:
            return plan
        longest = max(resident, key=lambda pair: backs[pair] - spans[pair].end)
        offloaded.add(longest)
        plan = _plan(instance, orders, offloaded)


def _first_over(instance: Instance, schedule: Schedule) -> tuple[int, float] | None:
    """(device, time) of the earliest moment a device holds more than its limit, if any."""
    found = []
    for device, profile in enumerate(memory_profiles(schedule)):
        limit = instance.limit_of(device)
        over = [i for i, held in enumerate(profile.memory) if limit is not None and not fits(held, limit)]
        if over:
            found.append((float(profile.times[over[0]]), device))
    if not found:
        return None
    at, device = min(found)
    return device, at


def _plan(instance: Instance, orders: StepOrders, chosen: set[tuple[int, int]]) -> TransferPlan:
    """The transfers of the `chosen` (stage, microbatch)s on `orders`, timed as the module notes say."""
    links: list[list[OpKey]] = [[] for _ in orders]
    waits: dict[OpKey, list[OpKey]] = {}
    for device, order in enumerate(orders):
        reloads: list[OpKey] = []
        for i, step in enumerate(order):
            for kind, s, j in step_keys(step):
                if (s, j) not in chosen:
                    continue
                if kind == Kind.F:
                    links[device].append(OpKey(Kind.O, s, j))
                elif kind == Kind.B:
                    reload = OpKey(Kind.R, s, j)
                    reloads.append(reload)
                    waits[reload] = [step_keys(order[i - RELOAD_LEAD])[-1]] if i >= RELOAD_LEAD else []
        links[device] += reloads
    # Timed back from the Bs' starts with the transfers (the Bs may start later than in the base).
    leading = simulate(instance, orders, links=links, waits=waits)
    for reload in [key for link in links for key in link if key.kind == Kind.R]:
        waits[reload] = waits[reload] + _timed_back(instance, orders, leading, reload.stage, reload.microbatch)
    return TransferPlan(links, waits)


def _timed_back(instance: Instance, orders: StepOrders, timed: Schedule, stage: int, microbatch: int) -> list[OpKey]:
    """The op that ends last, in the `timed` schedule, by the start of (stage, microbatch)'s B less its
    reload's time, of the next stage's device's ops and the microbatch's Bs of the later stages (the
    device may idle before this B, and the next one too: in 1F1B's warm-up all but the last do):
    none for the last stage (its B follows its own F), nor when none ends that early."""
    if stage + 1 >= instance.num_stages:
        return []
    ends = {op.key: op.end for op in timed.ops}
    starts = {op.key: op.start for op in timed.ops}
    latest = starts[OpKey(Kind.B, stage, microbatch)] - transfer_time(instance, stage)
    chain = [OpKey(Kind.B, later, microbatch) for later in range(stage + 1, instance.num_stages)]
    next_device = [key for step in orders[instance.placement[stage + 1]] for key in step_keys(step)]
    before = [key for key in (*next_device, *chain) if ends[key] <= latest]
    return [max(before, key=ends.__getitem__)] if before else []


def _hidden(instance: Instance, base: Schedule, chosen: set[tuple[int, int]]) -> set[tuple[int, int]]:
    """The chosen (stage, microbatch)s whose lifespan in the `base` schedule hides their transfers."""
    split = any(op.kind == Kind.W for op in base.ops)
    ends = {(op.stage, op.microbatch): op.end for op in base.ops if op.kind == Kind.F}
    starts = {(op.stage, op.microbatch): op.start for op in base.ops if op.kind == Kind.B}
    kept = set()
    for s, j in chosen:
        lifespan = starts[s, j] - ends[s, j] - op_duration(instance, Kind.B, s, split)
        if lifespan > HIDE_FACTOR * 2 * transfer_time(instance, s):
            kept.add((s, j))
    return kept


def transfers(select: Selection, hide_only: bool = True) -> Callable[[Instance, StepOrders], TransferPlan]:
    """A family's transfers, as the table of schedules takes them (`Heuristic.transfers`)."""
    return lambda instance, orders: offload_plan(instance, orders, select, hide_only)
