"""The text of the studies: the compare table's columns and its note, and the Pareto frontier's tables."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from models import Instance, Objective, Status
from models.solve_result import SolveResult
from solver.evaluate.metrics import compute_metrics
from solver.report.tables import Column, format_number, format_rows, heuristic_title, percent_or_dash
from solver.report.text import describe


def comparison_text(instance: Instance, table: str, fmt: str, lower_bound: float | None) -> str:
    """The compare table; a text table comes under the instance, with a note when the gaps are to
    `lower_bound` because the optimum is not proven."""
    if fmt != "table":
        return table
    lines = [describe(instance), "", table]
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
) -> str:
    """The frontier, one row per memory limit; a text table comes under the instance and over the
    handwritten schedules' (name, peak memory, value) without a limit.

    With `memory` (a breakpoint frontier: each point's least-memory solve) the rows are breakpoints:
    the memory column is the least memory that reaches the point's time, with its own proven bound
    and gap, and the status is optimal only when both are proven."""
    reference = instance.one_f_one_b_peak()
    breakpoints = bool(memory)
    columns = [
        Column("limit", "memory" if breakpoints else "memory limit"),
        Column("relative_limit", "x 1F1B peak", lambda x: "-" if x is None else f"{x:.2f}x"),
        Column("status", "status", align_right=False),
        Column("value", objective.title),
        Column("bound", "lower bound"),
        Column("gap", "over bound", percent_or_dash),
    ]
    if breakpoints:
        columns += [Column("memory_bound", "memory bound"), Column("memory_gap", "memory over bound", percent_or_dash)]
    else:
        columns.append(Column("peak_memory", "peak memory"))
    rows = [_point_row(limit, result, reference) for limit, result in points]
    for row, leanest in zip(rows, memory, strict=False):
        row.update(memory_bound=leanest.bound, memory_gap=leanest.gap)
        if row["status"] == Status.OPTIMAL and leanest.status != Status.OPTIMAL:
            row["status"] = leanest.status
    frontier = format_rows(columns, rows, fmt)
    if fmt != "table":
        return frontier
    heuristic_columns = [
        Column("name", "handwritten", align_right=False),
        Column("peak", "peak memory"),
        Column("value", objective.title),
    ]
    heuristic_rows = [{"name": heuristic_title(name), "peak": peak, "value": value} for name, peak, value in heuristics]
    header = f"{describe(instance)}; 1x = the 1F1B peak {format_number(reference)}"
    return "\n".join([header, "", frontier, "", format_rows(heuristic_columns, heuristic_rows, fmt)])


def pareto_title(instance: Instance, objective: Objective) -> str:
    """The Pareto plot's title: the objective and the instance without its limit."""
    return f"{objective.title} against memory limit: {describe(dataclasses.replace(instance, memory_limit=None))}"


def _point_row(limit: float, result: SolveResult, reference: float) -> dict[str, Any]:
    return {
        "limit": limit,
        "relative_limit": limit / reference if reference > 0 else None,
        "status": result.status,
        "value": result.value,
        "bound": result.bound,
        "gap": result.gap,
        "peak_memory": None if result.schedule is None else compute_metrics(result.schedule).max_peak_memory,
    }


def comparison_columns(
    objective: Objective, memory_limit: float | None, reference_kind: str | None, machine: bool = False
) -> list[Column]:
    """The compare table's columns; headers name the objective, the limit and what the gap refers to
    (`reference_kind`: "optimum", "bound" or None).

    `machine` (CSV, JSON) adds the schedule's name, which scripts pass back to pipesat, and
    keeps the "fits" column even without a limit, so the columns do not depend on the instance.
    """
    limit = memory_limit
    gap_header = f"slower than {reference_kind}" if reference_kind else "slower than optimum"
    name = [Column("name", "name", align_right=False)] if machine else []
    fits = [Column("fits", f"fits {format_number(limit)}" if limit else "fits")] if machine or limit else []
    return [
        *name,
        Column("title", "schedule", align_right=False),
        Column("value", objective.title),
        Column("bubble_rate", "bubble rate", percent_or_dash),
        Column("peak_memory", "peak memory"),
        *fits,
        Column("gap", gap_header, percent_or_dash),
        Column("note", "note", align_right=False),
    ]
