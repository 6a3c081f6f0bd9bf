"""Every handwritten schedule and the solver's best on one instance and memory limit, side by side.

Heuristics are judged by their peak memory against the limit ("fits"), not refused for it, so the
table shows what each would cost. Gaps are measured against the solver's proven optimum, or against
its lower bound when the optimum is not proven (then the true gap is at most the one shown).

Across placements (`compare_placements`) the same model is cut for each one and compared there; the
rows come together, each with its placement, and their gaps are to the fastest schedule that fits
(each solver row's note keeps its own proof or gap to its placement's bound).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pipesat.models import Instance, Objective, Schedule, Status
from pipesat.models.objective import time_objective
from pipesat.models.solve_result import SolveResult
from pipesat.solver.evaluate.metrics import compute_metrics, relative_gap
from pipesat.solver.evaluate.retime import retimed_for
from pipesat.solver.evaluate.validator import ensure_valid
from pipesat.solver.heuristics import Attempt, NotApplicable, try_every_heuristic
from pipesat.solver.report.solve_text import outcome_text
from pipesat.solver.report.units import Units, units_of
from pipesat.solver.solve import solve as run_solver
from pipesat.solver.torch.import_schedule import torch_rows

SOLVER_NAME = "cp-sat"


@dataclass(frozen=True)
class ComparisonRow:
    """One schedule's line. `schedule` is None for rows that did not produce one (n/a, infeasible).
    `value` is in the instance's `time_unit`, `peak_memory` in its `memory_unit`, `bubble_rate` and
    `gap` are fractions; `fits` says whether the peak is within the limit (None without one)."""

    name: str
    title: str
    schedule: Schedule | None = None
    value: float | None = None
    bubble_rate: float | None = None
    peak_memory: float | None = None
    fits: bool | None = None
    gap: float | None = None
    note: str = ""
    placement: str = ""

    def as_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        del data["schedule"]
        return data


@dataclass(frozen=True)
class Comparison:
    """The rows, and what the gaps refer to: `reference` is the optimum or, unproven, the bound."""

    instance: Instance
    objective: Objective
    rows: list[ComparisonRow]
    solve_result: SolveResult | None = None
    reference: float | None = None
    reference_kind: str | None = None  # "optimum" | "bound" | "best" (across placements) | None
    placements: tuple[str, ...] = ()


def _fits(peaks: tuple[float, ...], instance: Instance) -> bool | None:
    """Whether every device's peak fits its limit; None without limits."""
    return None if instance.memory_limit is None else not instance.over_limit(peaks)


def _gap(value: float, reference: float | None) -> float | None:
    return None if reference is None or value <= 0 else relative_gap(value, reference)


def heuristic_row(attempt: Attempt, objective: Objective) -> ComparisonRow:
    """A heuristic's row: its schedule checked by the validator without the limit, then measured.

    For the max span the heuristic's order is re-timed for the least span, as the solver measures it.
    """
    name, title = attempt.heuristic.name, attempt.heuristic.title
    if isinstance(attempt.error, NotApplicable):
        return ComparisonRow(name, title, note=f"n/a: {str(attempt.error).removeprefix(title + ': ')}")
    if attempt.error is not None:
        return ComparisonRow(name, title, note=f"failed: {attempt.error}")
    assert attempt.schedule is not None
    return measured_row(name, title, attempt.schedule, objective)


def measured_row(
    name: str, title: str, schedule: Schedule, objective: Objective, reference: float | None = None
) -> ComparisonRow:
    """A schedule's row: validated without the memory limit, measured, judged against the limit.

    The gap to `reference` (the optimum or bound) is given only for a schedule that fits.
    """
    instance = schedule.instance
    schedule = retimed_for(objective, schedule)
    unlimited = dataclasses.replace(instance, memory_limit=None)
    ensure_valid(dataclasses.replace(schedule, instance=unlimited))
    metrics = compute_metrics(schedule)
    value = metrics.objective(objective)
    fits = _fits(metrics.peak_memory, instance)
    return ComparisonRow(
        name,
        title,
        schedule,
        value,
        metrics.bubble_rate_for(objective),
        metrics.max_peak_memory,
        fits,
        gap=_gap(value, reference) if fits is not False else None,
        note="" if fits is not False else "over the memory limit",
    )


def solver_row(result: SolveResult, objective: Objective, units: Units = Units()) -> ComparisonRow:  # noqa: B008
    """The solver's row from a `SolveResult` (a note without a schedule says why, amounts in `units`);
    its schedule has passed the validator."""
    title = "CP-SAT"
    if result.schedule is None:
        return ComparisonRow(SOLVER_NAME, title, note=outcome_text(result, units))
    schedule = ensure_valid(result.schedule)
    metrics = compute_metrics(schedule)
    note = str(result.status)
    if result.status == Status.OPTIMAL:
        note = "optimal (proven)" if result.resolution is None else f"optimal (proven to {result.resolution:g})"
    return ComparisonRow(
        SOLVER_NAME,
        title,
        schedule,
        metrics.objective(objective),
        metrics.bubble_rate_for(objective),
        metrics.max_peak_memory,
        _fits(metrics.peak_memory, schedule.instance),
        result.gap,
        note,
    )


def compare(
    instance: Instance,
    objective: Objective | str = Objective.MAKESPAN,
    time_limit: float = 10.0,
    solve: bool = True,
    **solve_kwargs: Any,
) -> Comparison:
    """Run every handwritten schedule and (unless `solve` is False) the solver on `instance`.

    Rows come best first: the solver, the heuristics that fit by objective value, those over the
    limit, then those that do not apply.

    Parameters
    ----------
    instance
        What is scheduled, under its memory limit (a heuristic over it is shown, marked so).
    objective
        `makespan` or `span`.
    time_limit
        Seconds CP-SAT may search.
    solve
        Whether to run the solver (False: the handwritten schedules alone).
    **solve_kwargs
        `solve`'s other options (workers, seed, progress, ...).

    Returns
    -------
    Comparison
        The rows (`ComparisonRow`: value in the instance's time unit, peak memory in its memory unit),
        the solve's result and what the gaps refer to.
    """
    objective = time_objective(objective)
    rows = sorted(
        (heuristic_row(attempt, objective) for attempt in try_every_heuristic(instance)),
        key=lambda row: (row.value is None, row.fits is False, row.value or 0.0),
    )
    if not solve:
        return Comparison(instance, objective, rows)
    result = run_solver(instance, objective=objective, time_limit=time_limit, **solve_kwargs)
    reference, kind = None, None
    if result.status == Status.OPTIMAL and result.value is not None:
        reference, kind = result.value, "optimum"
    elif result.bound is not None:
        reference, kind = result.bound, "bound"
    rows = [
        dataclasses.replace(row, gap=_gap(row.value, reference))
        if row.value is not None and row.fits is not False
        else row
        for row in rows
    ]
    rows.insert(0, solver_row(result, objective, units_of(instance)))
    return Comparison(instance, objective, rows, result, reference, kind)


def compare_placements(
    instance: Instance,
    placements: Sequence[str],
    objective: Objective | str = Objective.MAKESPAN,
    time_limit: float = 10.0,
    solve: bool = True,
    **solve_kwargs: Any,
) -> Comparison:
    """`compare` on the same model at each named placement (`Instance.at_placement`), in one table.

    A schedule that applies at no placement keeps one row saying what it needs; rows come best
    first, gaps are to the fastest row that fits, and each solver row's note keeps its own outcome.

    Parameters
    ----------
    instance
        The model, at any placement; it is cut again for each of `placements`.
    placements
        Placement names (`linear`, `interleaved`, `vshape`, `bidirectional`).
    objective, time_limit, solve, **solve_kwargs
        As for `compare`.

    Returns
    -------
    Comparison
        The rows of every placement, each row naming its placement.

    Raises
    ------
    InstanceError
        A placement that is not a name or does not take the instance's chunks.
    """
    objective = time_objective(objective)
    rows: list[ComparisonRow] = []
    needs: dict[str, ComparisonRow] = {}
    for placement in placements:
        comparison = compare(instance.at_placement(placement), objective, time_limit, solve, **solve_kwargs)
        for row in comparison.rows:
            if row.value is None and row.name != SOLVER_NAME:
                needs.setdefault(row.name, row)
                continue
            note = row.note
            if row.name == SOLVER_NAME and row.gap is not None and row.gap > 0:
                note = f"{note}, {row.gap:.2%} over its bound"
            rows.append(dataclasses.replace(row, placement=placement, note=note))
    made = {row.name for row in rows}
    rows += [row for name, row in needs.items() if name not in made]
    fitting = [row.value for row in rows if row.value is not None and row.fits is not False]
    best = min(fitting, default=None)
    rows = sorted(
        (
            dataclasses.replace(row, gap=None if row.fits is False or row.value is None else _gap(row.value, best))
            for row in rows
        ),
        key=lambda row: (row.value is None, row.fits is False, row.value or 0.0),
    )
    kind = None if best is None else "best"
    return Comparison(instance, objective, rows, None, best, kind, tuple(placements))


def with_torch_rows(comparison: Comparison) -> Comparison:
    """The comparison with one row per torch built-in schedule after pipesat's.

    Like the heuristics, torch's schedules are timed without the memory limit and then judged
    against it ("fits"), with gaps to the same optimum or bound.
    """
    unlimited = dataclasses.replace(comparison.instance, memory_limit=None)
    rows = []
    for result in torch_rows(unlimited):
        title = result.name.replace(":", " ")
        if result.schedule is None:
            kind = "n/a" if (result.reason or "").startswith("needs") else "failed"
            rows.append(ComparisonRow(result.name, title, note=f"{kind}: {result.known_issue or result.reason}"))
            continue
        schedule = dataclasses.replace(result.schedule, instance=comparison.instance)
        rows.append(measured_row(result.name, title, schedule, comparison.objective, comparison.reference))
    rows.sort(key=lambda row: (row.value is None, row.fits is False, row.value or 0.0))
    return dataclasses.replace(comparison, rows=[*comparison.rows, *rows])
