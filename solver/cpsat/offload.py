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

Host memory (`host_memory`, when given): each device's host holds an offloaded microbatch's
offload amount from its offload's start to its reload's end, within `host_memory`, one cumulative
per device (amounts floored to whole ticks, the capacity rounded up: a relaxation).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ortools.sat.python import cp_model

from pipesat.models import Kind, Op, OpKey, Schedule
from pipesat.models.ops import offload_amount
from pipesat.solver.cpsat.constraints import memory_limit_ticks
from pipesat.solver.cpsat.data import ModelData
from pipesat.solver.cpsat.scale import ceil_ticks, to_ticks
from pipesat.solver.cpsat.variables import ModelVariables, offload_keys, op_name
from pipesat.solver.evaluate.simulator import TransferPlan, transfer_plan_of


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
            interval = model.new_optional_fixed_size_interval_var(
                start, o.duration, present, f"link {kind}{o.stage}.{o.microbatch}"
            )
            links.setdefault((device, kind), []).append(interval)
    for intervals in links.values():
        model.add_no_overlap(intervals)
    if instance.host_memory is not None:
        _add_host_memory(model, data, variables, instance.host_memory)
    if data.memory_limited:
        _add_memory(model, data, variables)


def _add_host_memory(model: cp_model.CpModel, data: ModelData, variables: ModelVariables, capacity: float) -> None:
    """Each device's host holds its offloads in flight, from an offload's start to its reload's end,
    within `capacity` (memory units)."""
    hosts: dict[int, _Holds] = {}
    for o in variables.offloads:
        device = data.instance.placement[o.stage]
        holds = hosts.setdefault(device, _Holds(model, data.horizon))
        amount = to_ticks(offload_amount(data.instance, o.stage), data.scale.memory)
        holds.add(o.offload_start, o.reload_start + o.duration, amount, o.offloaded)
    for holds in hosts.values():
        if holds.intervals:
            model.add_cumulative(holds.intervals, holds.demands, ceil_ticks(capacity * data.scale.memory))


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
    """The plan of a solution (`simulator.transfer_plan_of` of it in ticks): `starts` are its ops'
    starts, `values` the offload variables (`watched`)."""
    instance = data.instance
    ops = [
        Op(kind, s, j, instance.placement[s], start, start + data.durations[OpKey(kind, s, j)])
        for (kind, s, j), start in starts.items()
    ]
    transfers = []
    for (s, j), at in zip(offload_keys(data), range(0, len(values), 3), strict=True):
        if values[at]:
            for kind, start in ((Kind.O, values[at + 1]), (Kind.R, values[at + 2])):
                transfers.append(Op(kind, s, j, instance.placement[s], start, start + data.offload_ticks[s]))
    return transfer_plan_of(Schedule(instance, tuple(ops), transfers=tuple(transfers)))


def hint_offloads(model: cp_model.CpModel, variables: ModelVariables, starts: dict[OpKey, int]) -> None:
    """Hint the offloads from a start's transfers (`starts`: their starts in ticks): each offloaded
    where the start offloads it, and nowhere else."""
    for o in variables.offloads:
        offload, reload = OpKey(Kind.O, o.stage, o.microbatch), OpKey(Kind.R, o.stage, o.microbatch)
        model.add_hint(o.offloaded, offload in starts)
        model.add_hint(o.offload_start, starts.get(offload, 0))
        model.add_hint(o.reload_start, starts.get(reload, 0))


def watched(variables: ModelVariables) -> list[cp_model.IntVar]:
    """The offload variables a solution's read-back needs, after the starts: per offload its choice
    and its two starts."""
    return [var for o in variables.offloads for var in (o.offloaded, o.offload_start, o.reload_start)]
