"""The text of the studies: the compare table's columns and its note, and the Pareto frontier's tables."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pipesat.models import Instance, Kind, Objective, Schedule, Status
from pipesat.models.solve_result import SolveResult
from pipesat.solver.evaluate.metrics import compute_metrics
from pipesat.solver.report.tables import Column, format_number, format_rows, heuristic_title, percent_or_dash, scaled
from pipesat.solver.report.text import describe
from pipesat.solver.report.units import units_of


def comparison_text(
    instance: Instance, table: str, fmt: str, lower_bound: float | None, placements: Sequence[str] = ()
) -> str:
    """The compare table; a text table comes under the instance (and the placements it is cut for),
    with a note when the gaps are to `lower_bound` because the optimum is not proven."""
    if fmt != "text":
        return table
    head = describe(instance)
    if placements:
        head += f"; the same model at each placement: {', '.join(placements)}"
    lines = [head, "", table]
    if lower_bound is not None:
        lines += ["", f"The optimum is not proven: gaps are to the lower bound {format_number(lower_bound)}."]
    return "\n".join(lines)


def pareto_text(
    instance: Instance,
    points: Sequence[tuple[float, SolveResult]],
    heuristics: Sequence[tuple[str, float, float]],
    objective: Objective,
    fmt: str,
    memory: Sequence[SolveResult] = (),
    offloaded: Sequence[tuple[float, SolveResult]] = (),
) -> str:
    """The frontier, one row per memory limit; a text table comes under the instance and over the
    handwritten schedules' (name, peak memory, value) without a limit. With `offloaded` (the points
    solved with offload allowed) a text table has a second one for them, "with offload", with the
    (stage, microbatch)s each offloads; a machine format holds both in one table, told apart by an
    `offload` column (no, yes).

    With `memory` (a breakpoint frontier: each point's least-memory solve) the rows are breakpoints:
    the memory column is the least memory that reaches the point's time, with its own proven bound
    and gap, and the status is optimal only when both are proven."""
    reference = instance.one_f_one_b_peak()
    units = units_of(instance)
    breakpoints = bool(memory)

    def in_memory(key: str, header: str) -> Column:
        return Column(key, header, scaled(units.memory_factor), unit=instance.memory_unit)

    columns = [
        in_memory("limit", units.memory_header("memory" if breakpoints else "memory limit")),
        Column("relative_limit", "x 1F1B peak", lambda x: "-" if x is None else f"{x:.2f}x"),
        Column("status", "status", align_right=False),
        Column("value", units.time_header(objective.label), unit=instance.time_unit),
        Column("bound", units.time_header("lower bound"), unit=instance.time_unit),
        Column("gap", "over bound", percent_or_dash),
    ]
    if breakpoints:
        columns += [
            in_memory("memory_bound", units.memory_header("memory bound")),
            Column("memory_gap", "memory over bound", percent_or_dash),
        ]
    else:
        columns.append(in_memory("peak_memory", units.memory_header("peak memory")))
    rows = [_point_row(limit, result, reference) for limit, result in points]
    for row, leanest in zip(rows, memory, strict=False):
        row.update(memory_bound=leanest.bound, memory_gap=leanest.gap)
        if row["status"] == Status.OPTIMAL and leanest.status != Status.OPTIMAL:
            row["status"] = leanest.status
    if fmt != "text":
        if not offloaded:
            return format_rows(columns, rows, fmt)
        # One table: the rows without offload, then those with it, told apart by the offload column.
        machine = [*columns, Column("offload", "offload", align_right=False), Column("offloads", "offloads")]
        with_offload = [_point_row(limit, result, reference) | {"offload": "yes"} for limit, result in offloaded]
        return format_rows(machine, [*({**row, "offload": "no"} for row in rows), *with_offload], fmt)
    frontier = format_rows(columns, rows, fmt)
    tables = [frontier]
    if offloaded:
        tables = [f"without offload:\n{frontier}"]
        offload_columns = [
            in_memory("limit", units.memory_header("memory limit")),
            *columns[1:6],
            in_memory("peak_memory", units.memory_header("peak memory")),
            Column("offloads", "offloads"),
        ]
        offload_rows = [_point_row(limit, result, reference) for limit, result in offloaded]
        tables.append(f"with offload over the host link:\n{format_rows(offload_columns, offload_rows, fmt)}")
    heuristic_columns = [
        Column("name", "handwritten", align_right=False),
        in_memory("peak", units.memory_header("peak memory")),
        Column("value", units.time_header(objective.label)),
    ]
    heuristic_rows = [{"name": heuristic_title(name), "peak": peak, "value": value} for name, peak, value in heuristics]
    shown_reference = units.with_memory(format_number(units.memory_value(reference)))
    header = f"{describe(instance)}; 1x = the 1F1B peak {shown_reference}"
    return "\n\n".join([header, *tables, format_rows(heuristic_columns, heuristic_rows, fmt)])


def pareto_notes(instance: Instance, ceiling: float | None, ended: str, left_out: Sequence[float]) -> list[str]:
    """The lines under a study's table: the device's budget that bounds it, the limits above it left
    out, and why it stopped short (`ended`, the study's own words)."""
    units = units_of(instance)

    def amount(value: float) -> str:
        return units.with_memory(format_number(units.memory_value(value)))

    notes = []
    if ceiling is not None:
        notes.append(f"limits up to {amount(ceiling)}: what the roomiest device holds beside its model state")
    if left_out:
        shown = ", ".join(amount(limit) for limit in left_out)
        notes.append(
            f"{len(left_out)} limits above {amount(ceiling or 0.0)} not solved (no device holds them): {shown}"
        )
    if ended:
        notes.append(f"stopped short: {ended}; the rows are what was done")
    return notes


def pareto_title(instance: Instance, objective: Objective) -> str:
    """The Pareto plot's title: the objective and the instance without its limit."""
    return f"{objective.label} against memory limit: {describe(instance.with_limit(None))}"


def _point_row(limit: float, result: SolveResult, reference: float) -> dict[str, Any]:
    return {
        "limit": limit,
        "relative_limit": limit / reference if reference > 0 else None,
        "status": result.status,
        "value": result.value,
        "bound": result.bound,
        "gap": result.gap,
        "peak_memory": None if result.schedule is None else compute_metrics(result.schedule).max_peak_memory,
        "offloads": None if result.schedule is None else _offloads(result.schedule),
    }


def _offloads(schedule: Schedule) -> str:
    """`12/16`: the (stage, microbatch)s a schedule offloads (each an offload and a reload), of all."""
    return f"{len(schedule.transfers) // 2}/{sum(1 for op in schedule.ops if op.kind == Kind.F)}"


def comparison_columns(
    instance: Instance,
    objective: Objective,
    reference_kind: str | None,
    machine: bool = False,
    placements: bool = False,
) -> list[Column]:
    """The compare table's columns; headers name the objective, the limit, the units and what the gap
    refers to (`reference_kind`: "optimum", "bound", "best" or None); with `placements` each row's
    placement.

    `machine` (CSV, JSON) adds the schedule's name, which scripts pass back to pipesat, and
    keeps the "fits" column even without a limit, so the columns do not depend on the instance.
    """
    units = units_of(instance)
    gap_header = f"slower than {reference_kind}" if reference_kind else "slower than optimum"
    name = [Column("name", "name", align_right=False)] if machine else []
    limits = instance.memory_limit
    fits_header = "fits"
    if limits is not None:
        uniform = len(set(limits)) == 1
        fits_header = (
            f"fits {units.with_memory(format_number(units.memory_value(limits[0])))}" if uniform else "fits limits"
        )
    fits = [Column("fits", fits_header)] if machine or limits is not None else []
    return [
        *name,
        Column("title", "schedule", align_right=False),
        *([Column("placement", "placement", align_right=False)] if placements else []),
        Column("value", units.time_header(objective.label), unit=instance.time_unit),
        Column("bubble_rate", "bubble rate", percent_or_dash),
        Column(
            "peak_memory", units.memory_header("peak memory"), scaled(units.memory_factor), unit=instance.memory_unit
        ),
        *fits,
        Column("gap", gap_header, percent_or_dash),
        Column("note", "note", align_right=False),
    ]
