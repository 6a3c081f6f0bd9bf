"""Activation offload in the CP-SAT model (docs/offload.md): CP-SAT decides which (stage,
microbatch)s to offload to host memory and when.

Per (stage, microbatch) whose offload moves anything: a Boolean `offloaded`, and an offload and a
reload, fixed-size optional intervals present when it is offloaded. The offload starts after its F
ends, the reload after the offload ends, the B after the reload ends. Each device's link runs one
offload at a time (device to host) and one reload at a time (host to device): one no-overlap per
direction.

Memory: an offloaded microbatch's held-memory intervals (`variables.HeldMemory`, present when it
is not offloaded) give way to, with the same total, its activation M_B from the start of F to the
end of the offload, the part not offloaded from there to the reload's start (floored to whole ticks,
which keeps the model a relaxation), and from the reload's start what the B and the W free, to
their ends. All enter the device's one cumulative under the limit.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ortools.sat.python import cp_model

from pipesat.models import Kind, OpKey
from pipesat.models.ops import offload_amount
from pipesat.solver.cpsat.constraints import memory_limit_ticks
from pipesat.solver.cpsat.data import ModelData
from pipesat.solver.cpsat.scale import to_ticks
from pipesat.solver.cpsat.variables import ModelVariables, offload_keys, op_name
from pipesat.solver.evaluate.simulator import TransferPlan


def add_offloads(model: cp_model.CpModel, data: ModelData, variables: ModelVariables) -> None:
    """The offloads' precedences, the link's two no-overlaps per device, and, under a memory limit,
    each device's cumulative with the offloads' memory (see the module notes)."""
    instance = data.instance
    links: dict[tuple[int, Kind], list[cp_model.IntervalVar]] = {}
    for o in variables.offloads:
        device, present = instance.placement[o.stage], o.offloaded
        forward, backward = OpKey(Kind.F, o.stage, o.microbatch), OpKey(Kind.B, o.stage, o.microbatch)
        model.add(o.offload_start >= variables.ends[forward]).only_enforce_if(present)
        model.add(o.reload_start >= o.offload_start + o.duration).only_enforce_if(present)
        model.add(variables.starts[backward] >= o.reload_start + o.duration).only_enforce_if(present)
        for kind, start in ((Kind.O, o.offload_start), (Kind.R, o.reload_start)):
            interval = model.new_optional_fixed_size_interval_var(start, o.duration, present, f"link {kind}{o.stage}")
            links.setdefault((device, kind), []).append(interval)
    for intervals in links.values():
        model.add_no_overlap(intervals)
    if data.memory_limited:
        _add_memory(model, data, variables)


def _add_memory(model: cp_model.CpModel, data: ModelData, variables: ModelVariables) -> None:
    """Each device's held memory, with and without its offloads, within its limit."""
    offloads = {(o.stage, o.microbatch): o for o in variables.offloads}
    for device, held in enumerate(variables.held):
        holds = _Holds(model, data.horizon)
        for h in held:
            start, end, name = variables.starts[h.first], variables.ends[h.last], f"holds {op_name(h.first)}"
            o = offloads.get((h.first.stage, h.first.microbatch))
            if o is None:
                holds.intervals.append(model.new_interval_var(start, h.size, end, name))
                holds.demands.append(h.demand)
                continue
            # Without the offload: held as the model holds it otherwise; with it: from the reload on.
            holds.intervals.append(model.new_optional_interval_var(start, h.size, end, o.offloaded.Not(), name))
            holds.demands.append(h.demand)
            holds.add(o.reload_start, end, h.demand, o.offloaded)
        for o in variables.offloads:
            if data.instance.placement[o.stage] != device:
                continue
            left = data.instance.activation_memory[o.stage] - offload_amount(data.instance, o.stage)
            activation = int(data.tick_instance.activation_memory[o.stage])
            forward = variables.starts[OpKey(Kind.F, o.stage, o.microbatch)]
            holds.add(forward, o.offload_start + o.duration, activation, o.offloaded)
            holds.add(
                o.offload_start + o.duration,
                o.reload_start,
                min(activation, to_ticks(left, data.scale.memory)),
                o.offloaded,
            )
        if holds.intervals:
            model.add_cumulative(holds.intervals, holds.demands, memory_limit_ticks(data, device))


@dataclass
class _Holds:
    """One device's held-memory intervals and their demands, for its cumulative."""

    model: cp_model.CpModel
    horizon: int
    intervals: list[cp_model.IntervalVar] = field(default_factory=list)
    demands: list[int] = field(default_factory=list)

    def add(
        self, start: cp_model.LinearExprT, end: cp_model.LinearExprT, demand: int, present: cp_model.IntVar
    ) -> None:
        """`demand` held from `start` to `end` when `present` (nothing for no demand)."""
        if demand > 0:
            size = self.model.new_int_var(0, self.horizon, "")
            self.intervals.append(self.model.new_optional_interval_var(start, size, end, present, ""))
            self.demands.append(demand)


def transfer_plan(data: ModelData, starts: dict[OpKey, int], values: list[int]) -> TransferPlan:
    """The plan of a solution: `starts` are its ops' starts, `values` the offload variables (`watched`).

    Re-timed as soon as possible at float times, ops may move earlier, and a transfer with them; so
    that the memory profile stays one the model accepted, every allocation (an F's start, a reload's
    start) waits for each free (a B's or W's end, an offload's end) on its device that came before it
    in the solution. Frees of compute ops before an F are before it in the device's order already; the
    rest are the last compute op ending by a reload's start, and the last offload ending by an F's or a
    reload's start (the device's offloads run one at a time, so the earlier ones ended before it).
    """
    instance = data.instance
    devices = range(instance.num_devices)
    transfers: list[tuple[int, OpKey, int]] = []
    for (s, j), at in zip(offload_keys(data), range(0, len(values), 3), strict=True):
        if values[at]:
            transfers.append((values[at + 1], OpKey(Kind.O, s, j), instance.placement[s]))
            transfers.append((values[at + 2], OpKey(Kind.R, s, j), instance.placement[s]))
    transfers.sort(key=lambda item: item[0])
    links: list[list[OpKey]] = [[] for _ in devices]
    offload_ends: list[list[tuple[int, OpKey]]] = [[] for _ in devices]
    for start, key, device in transfers:
        links[device].append(key)
        if key.kind == Kind.O:
            offload_ends[device].append((start + data.offload_ticks[key.stage], key))
    compute_ends: list[list[tuple[int, OpKey]]] = [[] for _ in devices]
    for key, start in starts.items():
        compute_ends[instance.placement[key.stage]].append((start + data.durations[key], key))
    waits: dict[OpKey, list[OpKey]] = {}
    allocations = [(start, key, device) for start, key, device in transfers if key.kind == Kind.R]
    allocations += [(at, key, instance.placement[key.stage]) for key, at in starts.items() if key.kind == Kind.F]
    for at, key, device in allocations:
        frees = [offload_ends[device], *([compute_ends[device]] if key.kind == Kind.R else [])]
        for ends in frees:
            last = max((item for item in ends if item[0] <= at and item[1] != key), default=None)
            if last is not None:
                waits.setdefault(key, []).append(last[1])
    return TransferPlan(links, waits)


def hint_no_offloads(model: cp_model.CpModel, variables: ModelVariables) -> None:
    """Hint that nothing is offloaded (a start's schedule offloads nothing)."""
    for o in variables.offloads:
        model.add_hint(o.offloaded, False)
        model.add_hint(o.offload_start, 0)
        model.add_hint(o.reload_start, 0)


def watched(variables: ModelVariables) -> list[cp_model.IntVar]:
    """The offload variables a solution's read-back needs, after the starts: per offload its choice
    and its two starts."""
    return [var for o in variables.offloads for var in (o.offloaded, o.offload_start, o.reload_start)]
