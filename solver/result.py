"""A solve's result (`SolveResult`): from the schedule it chose and the bound it proved, or without
a schedule (infeasible, unknown, or interrupted before any was found).
"""

from __future__ import annotations

import time

from pipesat.models import Status
from pipesat.models.solve_result import Infeasibility, SolveResult, StopReason
from pipesat.models.tolerance import fits
from pipesat.solver.evaluate.metrics import relative_gap
from pipesat.solver.portfolio import Candidate, Problem


def schedule_result(
    problem: Problem,
    clock: float,
    chosen: Candidate,
    start: Candidate | None,
    bound: float,
    stopped_by: StopReason,
    reason: str,
    searched: bool,
    time_to_first: float | None = None,
    resolution: float | None = None,
) -> SolveResult:
    """The result of a solve of `problem` begun at `clock` (a `time.monotonic()`), returning `chosen`,
    proven to `bound`, `start` being the best starting schedule, ended as `stopped_by` and `reason`
    say (interrupted when they say so).

    `resolution` (a tick, in instance units) says CP-SAT proved the chosen order optimal for the
    times in whole ticks; it makes the result optimal at that resolution when the value is not
    equal to the bound (the model floors inexact times, so the bound is a tick-sum below).
    """
    value = chosen.value
    if not fits(bound, value):
        raise RuntimeError(f"internal error: lower bound {bound!r} exceeds the value {value!r} of a valid schedule")
    exact = fits(value, bound)
    optimal = exact or resolution is not None
    if exact:
        bound, resolution = value, None
    gap = relative_gap(value, bound)
    interrupted = stopped_by == StopReason.INTERRUPT
    status = Status.INTERRUPTED if interrupted else Status.OPTIMAL if optimal else Status.FEASIBLE
    if optimal and stopped_by not in (StopReason.PROOF, StopReason.BOUNDS, StopReason.INTERRUPT):
        reason = f"{chosen.name} meets the lower bound; {reason}"  # the search stopped before its proof
    elapsed = time.monotonic() - clock
    schedule = chosen.schedule.with_source(
        kind="solver",
        made_by=chosen.name,
        status=status.value,
        objective=problem.result_objective.value,
        value=value,
        bound=bound,
        gap=gap,
        tuning=problem.tuning.as_dict(),
        # Apart from the rest, so that two files can be compared without them.
        timing={"solve_time": elapsed, "time_to_best": chosen.found_at},
    )
    return SolveResult(
        status=status,
        objective=problem.result_objective,
        schedule=schedule,
        value=value,
        bound=bound,
        gap=gap,
        solve_time=elapsed,
        time_to_first=chosen.found_at if time_to_first is None else time_to_first,
        time_to_best=chosen.found_at,
        searched=searched,
        starting_point=None if start is None else start.named_value,
        smallest_feasible_limit=value if problem.minimize_memory and optimal else None,
        resolution=resolution,
        stopped_by=stopped_by,
        reason=reason,
        tuning=problem.tuning,
    )


def no_schedule(
    problem: Problem,
    status: Status,
    clock: float,
    stopped_by: StopReason,
    reason: str,
    infeasibility: Infeasibility | None = None,
    smallest_feasible_limit: float | None = None,
) -> SolveResult:
    """A result without a schedule (infeasible, unknown, or interrupted before any was found)."""
    return SolveResult(
        status=status,
        objective=problem.result_objective,
        solve_time=time.monotonic() - clock,
        smallest_feasible_limit=smallest_feasible_limit,
        infeasibility=infeasibility,
        stopped_by=stopped_by,
        reason=reason,
        tuning=problem.tuning,
    )


def meets(value: float, bound: float, gap: float) -> bool:
    """Whether `value` is optimal or within the relative `gap` of `bound`."""
    return fits(value, bound) or relative_gap(value, bound) <= gap
