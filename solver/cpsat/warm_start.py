"""Warm-starting a model: a complete hint from a schedule's order, and the objective's known range.

The hint times the order in the model's ticks (as soon as possible for the makespan, for the least
max span otherwise), so every variable gets a value and the hint is feasible; an order's pairs of a
kind the model does not offer run as the model can run them (`solver.cpsat.pairs.model_steps`). The minimised variable
is then restricted to [the analytic lower bound in ticks, the hint's value].
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pipesat.models import Instance, Kind, Objective, OpKey, Step
from pipesat.solver.cpsat.model import PipelineModel
from pipesat.solver.cpsat.offload import hint_offloads
from pipesat.solver.cpsat.pairs import model_steps
from pipesat.solver.cpsat.scale import ceil_ticks
from pipesat.solver.evaluate.bounds import lower_bound, minimum_memory_limit
from pipesat.solver.evaluate.metrics import compute_metrics
from pipesat.solver.evaluate.retime import min_span_schedule, timed_for
from pipesat.solver.evaluate.simulator import TransferPlan, simulate


@dataclass(frozen=True)
class ObjectiveRange:
    """The minimised variable's range in ticks: the analytic lower bound and the hint's value (None
    without a hint)."""

    lower: int
    upper: int | None


def warm_start(
    model: PipelineModel,
    orders: Sequence[Sequence[Step]] | None,
    floor: float | None = None,
    plan: TransferPlan | None = None,
) -> ObjectiveRange:
    """Hint `model` with `orders` (when given) and bound its minimised variable (see the module notes).
    `floor` is a lower bound on the time objective proven elsewhere (instance units); it bounds the
    range too where the model's times are exact, so that every schedule's value in ticks is its value.
    `plan` is the start's transfers (a start that offloads, `simulator.transfer_plan_of`): they are
    hinted too, and the hint's value bounds the range only where the times are exact (a transfer's
    time in ticks is whole only then)."""
    upper = None
    if orders is not None:
        transfers: dict[OpKey, int] = {}
        if plan is None:
            starts, capacity = tick_starts(model, orders)
        else:
            (starts, transfers), capacity = offload_tick_starts(model, orders, plan), None
        upper = add_hint(model, starts, capacity)
        hint_offloads(model.cp_model, model.variables, transfers)
        if plan is not None and not model.data.scale.exact_time:
            upper = None
    data = model.data
    if data.minimize_memory:
        bound = minimum_memory_limit(data.tick_instance)
    else:
        # The bounds under a memory limit assume no offload; with offload only the unlimited ones hold.
        bounded = data.tick_instance.with_limit(None) if data.offload else data.tick_instance
        bound = lower_bound(bounded, data.objective, data.split_backward, tuning=data.tuning)
        exact = data.scale.exact_span if data.objective == Objective.SPAN else data.scale.exact_time
        if floor is not None and exact:
            bound = max(bound, floor * data.ticks_per_unit)
    lower = ceil_ticks(bound)
    restrict_objective(model, lower, upper)
    return ObjectiveRange(lower, upper)


def offload_tick_starts(
    model: PipelineModel, orders: Sequence[Sequence[Step]], plan: TransferPlan
) -> tuple[dict[OpKey, int], dict[OpKey, int]]:
    """The orders timed in the model's ticks as soon as possible with the transfers of `plan` (a
    makespan model that offloads): the ops' starts and the transfers'."""
    data = model.data
    timed = simulate(data.tick_instance, model_steps(orders, data.pairs), links=plan.links, waits=plan.waits)
    return {op.key: round(op.start) for op in timed.ops}, {op.key: round(op.start) for op in timed.transfers}


def tick_starts(model: PipelineModel, orders: Sequence[Sequence[Step]]) -> tuple[dict[OpKey, int], int | None]:
    """The orders timed in the model's ticks, and their peak memory when the model minimises it."""
    data = model.data
    orders = model_steps(orders, data.pairs)
    timed = timed_for(data.objective, data.tick_instance, orders)
    if data.objective == Objective.SPAN and any(op.start != round(op.start) for op in timed.ops):
        # A min-span timing with a fractional span: the next whole tick keeps every time whole.
        span = ceil_ticks(compute_metrics(timed).max_span)
        timed = min_span_schedule(data.tick_instance, orders, span=span)
    starts = {op.key: round(op.start) for op in timed.ops}
    capacity = round(compute_metrics(timed).max_peak_memory) if data.minimize_memory else None
    return starts, capacity


def tick_value(model: PipelineModel, orders: Sequence[Sequence[Step]]) -> float:
    """The minimised quantity of `orders` in the model's ticks: timed for the objective at the tick
    times (or their peak memory, when the model minimises memory)."""
    data = model.data
    metrics = compute_metrics(timed_for(data.objective, data.tick_instance, model_steps(orders, data.pairs)))
    return metrics.max_peak_memory if data.minimize_memory else metrics.objective(data.objective)


def add_hint(model: PipelineModel, starts: Mapping[OpKey, int], capacity: int | None = None) -> int:
    """Hint every variable from op starts in ticks (and the capacity when minimising memory).

    Returns the hinted value of the minimised variable. With symmetry breaking the starts are
    first relabelled first-in-first-out per (stage, kind), which keeps the schedule valid.
    """
    data, variables, cp = model.data, model.variables, model.cp_model
    if data.symmetry_breaking:
        starts = _first_in_first_out(data.instance, starts)
    cp.clear_hints()
    for key, var in variables.starts.items():
        cp.add_hint(var, starts[key])
    ends = {key: starts[key] + data.durations[key] for key in data.keys}
    in_pair: set[OpKey] = set()
    for pair, var in variables.paired.items():
        runs = all(starts[key] == starts[pair.forward] for key in pair.op_keys())
        if runs and not pair.with_weight:
            weight = OpKey(Kind.W, pair.backward.stage, pair.backward.microbatch)
            runs = weight not in starts or starts[weight] != starts[pair.forward]
        cp.add_hint(var, runs)
        if runs:
            ends.update((key, starts[key] + data.pairs[pair]) for key in pair.op_keys())
            in_pair.update(pair.op_keys())
    for key, var in variables.alone.items():
        cp.add_hint(var, key not in in_pair)
    for key, (end, _) in variables.pair_ends.items():
        cp.add_hint(end, ends[key])
    for held in variables.held:
        for h in held:
            cp.add_hint(h.size, ends[h.last] - starts[h.first])
    for earliest, keys in variables.earliest_ends:
        cp.add_hint(earliest, min(ends[key] for key in keys))
    if data.objective == Objective.SPAN:
        spans = []
        for d, (first, last) in enumerate(zip(variables.first, variables.last, strict=True)):
            on_device = data.on_device(d)
            low, high = min(starts[k] for k in on_device), max(ends[k] for k in on_device)
            cp.add_hint(first, low)
            cp.add_hint(last, high)
            spans.append(high - low)
        time_value = max(spans)
    else:
        time_value = max(ends.values())
    cp.add_hint(variables.time_objective, time_value)
    if variables.capacity is not None:
        if capacity is None:
            raise ValueError("a hint for a memory-minimising model needs the capacity")
        cp.add_hint(variables.capacity, capacity)
        return capacity
    return time_value


def restrict_objective(model: PipelineModel, lower: int, upper: int | None) -> None:
    """Put proven bounds (in ticks) on the minimised variable's domain."""
    target = model.variables.minimized
    model.cp_model.add(target >= lower)
    if upper is not None:
        model.cp_model.add(target <= upper)


def _first_in_first_out(instance: Instance, starts: Mapping[OpKey, int]) -> dict[OpKey, int]:
    """The same op times with microbatches renumbered in start order per (kind, stage), among the
    microbatches that pass the stage."""
    groups: dict[tuple[Kind, int], list[int]] = {}
    for (kind, stage, _), start in starts.items():
        groups.setdefault((kind, stage), []).append(start)
    return {
        OpKey(kind, stage, j): start
        for (kind, stage), times in groups.items()
        for j, start in zip(instance.microbatches_at(stage), sorted(times), strict=True)
    }
