"""JSON documents for programs: one document per command (its JSON format), every amount in the
instance's own units, which the document names under `units`.

`schedule` and `solve` give one schedule's numbers (and the solve's proof); `compare` one row per
schedule; `pareto` one point per memory limit or breakpoint. Each starts with the same summary of
the instance, so a document says what it was measured on.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pipesat.models import Instance, Objective, Schedule
from pipesat.models.solve_result import SolveResult
from pipesat.solver.evaluate.metrics import compute_metrics


def instance_summary(instance: Instance) -> dict[str, Any]:
    """The instance in a few fields: its shape, backward, p2p, limits and units."""
    return {
        "name": instance.name,
        "num_devices": instance.num_devices,
        "num_microbatches": instance.num_microbatches,
        "chunks": instance.chunks,
        "placement": instance.placement_name(),
        "split_backward": instance.split_backward,
        "p2p_time": instance.p2p_time,
        "memory_limit": None if instance.memory_limit is None else list(instance.memory_limit),
        "one_f_one_b_peak": instance.one_f_one_b_peak(),
    }


def _frame(instance: Instance, objective: Objective) -> dict[str, Any]:
    units = {"time": instance.time_unit or None, "memory": instance.memory_unit or None}
    return {"instance": instance_summary(instance), "objective": objective.value, "units": units}


def schedule_numbers(schedule: Schedule) -> dict[str, Any]:
    """A schedule's name and measures: makespan, max span, bubble rates, peak memory (and per device)."""
    metrics = compute_metrics(schedule)
    instance = schedule.instance
    return {
        "schedule": schedule.name,
        "makespan": metrics.makespan,
        "max_span": metrics.max_span,
        "bubble_rate": metrics.bubble_rate,
        "span_bubble_rate": metrics.span_bubble_rate,
        "peak_memory": metrics.max_peak_memory,
        "peak_memory_per_device": list(metrics.peak_memory),
        "fits": None if instance.memory_limit is None else not instance.over_limit(metrics.peak_memory),
    }


def schedule_document(schedule: Schedule, objective: Objective) -> dict[str, Any]:
    """`pipesat schedule`'s JSON document."""
    return _frame(schedule.instance, objective) | schedule_numbers(schedule)


def solve_document(result: SolveResult, instance: Instance, objective: Objective) -> dict[str, Any]:
    """`pipesat solve`'s JSON document: the proof (status, value, bound, gap) and the schedule's numbers."""
    document = _frame(instance, objective) | _proof(result)
    best, start = result.best_heuristic, result.starting_point
    document |= {
        "best_heuristic": None if best is None else {"name": best.name, "value": best.value},
        "starting_point": None if start is None else {"name": start.name, "value": start.value},
        "solve_time": result.solve_time,
        "tuning": result.tuning.as_dict(),
    }
    if result.schedule is not None:
        document |= schedule_numbers(result.schedule)
    return document


def _proof(result: SolveResult) -> dict[str, Any]:
    return {
        "status": result.status.value,
        "minimized": result.objective.value,
        "value": result.value,
        "bound": result.bound,
        "gap": result.gap,
        "resolution": result.resolution,
        "stopped_by": None if result.stopped_by is None else result.stopped_by.value,
        "reason": result.reason,
    }


def comparison_document(
    instance: Instance,
    objective: Objective,
    rows: Sequence[dict[str, Any]],
    reference_kind: str | None,
    reference: float | None,
) -> dict[str, Any]:
    """`pipesat compare`'s JSON document: one row per schedule, and what its gap is measured against."""
    return _frame(instance, objective) | {
        "gap_to": None if reference_kind is None else {"kind": reference_kind, "value": reference},
        "rows": list(rows),
    }


def pareto_document(
    instance: Instance,
    objective: Objective,
    points: Sequence[tuple[float, SolveResult]],
    memory: Sequence[SolveResult],
    heuristics: Sequence[tuple[str, float, float]],
    offloaded: Sequence[tuple[float, SolveResult]] = (),
) -> dict[str, Any]:
    """`pipesat pareto`'s JSON document: each point's limit (or breakpoint memory) with its proof, the
    points solved with offload allowed (`offloaded`, each with the (stage, microbatch)s it offloads),
    and the handwritten schedules at their own peak memory."""
    reference = instance.one_f_one_b_peak()

    def row_of(limit: float, result: SolveResult) -> dict[str, Any]:
        relative = limit / reference if reference > 0 else None
        row = {"memory_limit": limit, "relative_limit": relative} | _proof(result)
        if result.schedule is not None:
            row["peak_memory"] = compute_metrics(result.schedule).max_peak_memory
        return row

    rows = []
    for index, (limit, result) in enumerate(points):
        row = row_of(limit, result)
        if index < len(memory):
            row |= {"memory_bound": memory[index].bound, "memory_gap": memory[index].gap}
        rows.append(row)
    with_offload = [
        row_of(limit, result) | {"offloads": None if result.schedule is None else len(result.schedule.transfers) // 2}
        for limit, result in offloaded
    ]
    handwritten = [{"name": name, "peak_memory": peak, "value": value} for name, peak, value in heuristics]
    frame = _frame(instance, objective) | {"breakpoints": bool(memory), "points": rows, "offloaded": with_offload}
    return frame | {"handwritten": handwritten}
