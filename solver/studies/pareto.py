"""Pareto: the best makespan (or max span) against the memory limit.

Two ways. `pareto_sweep` solves a grid of limits from the smallest up, each solve starting from the
previous point's schedule (it fits every larger limit), so the frontier never rises as the limit
grows. `pareto_frontier` finds the trade-off's breakpoints themselves, from the tight end up, so
that a short budget has the lean end, where the choice is hard, first: the least memory M of any
schedule, then the least time T under the limit M (the breakpoint (M, T): at every limit from M up
to the next breakpoint's memory the best time is T), then the least memory of a schedule faster than
T, and so on until no faster schedule exists. Solutions go along: the time solve starts from the
memory solve's schedule. Each breakpoint carries the proof of both solves.

An instance that knows its GPU (`pipesat instance from-model` with a GPU memory: its limits are each
device's activation budget) bounds both: no limit above what the roomiest device holds
(`device_budget`). A total `time_budget` (seconds) caps the whole study beside each solve's
`time_limit`; when it runs out, or a solve is interrupted (Ctrl-C, SIGTERM), the points so far are
the result and `ended` says why. Rows that are not on the frontier (a point no faster than one with
less memory: a solve that ran out of time short of its optimum) are left out, so equal times appear
once, at their least memory.

Where the instance has a host link and the objective is the makespan (docs/offload.md), the study
gains the offload axis: beside the points without offload, a series solved with offload allowed
(`ParetoResult.offloaded`), each starting from the schedule without offload at its limit, so it is
never slower; a sweep solves it at the sweep's limits, a frontier at its breakpoints' memory and
below them, down to the least limit with offload (`least_offload_limits`), which the breakpoints
cannot reach: the least-memory search does not offload. The handwritten positions then include the
offload schedules (PipeOffload's, `solver.heuristics.pipe_offload`).
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pipesat.models import Instance, InstanceError, Minimize, Objective, Schedule, Status
from pipesat.models.instance import parse_limit_value
from pipesat.models.objective import time_objective
from pipesat.models.solve_result import SolveResult
from pipesat.models.tolerance import fits, same, slack
from pipesat.solver.evaluate.bounds import least_offload_limits
from pipesat.solver.evaluate.metrics import compute_metrics
from pipesat.solver.evaluate.retime import retimed_for
from pipesat.solver.evaluate.validator import validate
from pipesat.solver.heuristics import handwritten_schedules
from pipesat.solver.solve import solve

MAX_POINTS = 200


# The next breakpoint's time cap: this fraction below the last breakpoint's time (above float noise
# and CP-SAT's whole-tick noise, `solver.cpsat.scale.WHOLE_TICK_NOISE`, so that the cap excludes the
# last time; far below the differences of op times).
BELOW = 1e-5


OUT_OF_TIME = "the time budget ran out"
INTERRUPTED = "interrupted"
NO_ANSWER = "a solve found no schedule within its time limit"
"""Why a study ended before its last point (`ParetoResult.ended`)."""


@dataclass(frozen=True)
class ParetoResult:
    """A study's points and how it ended.

    Attributes
    ----------
    objective
        The time objective, makespan or max span.
    points
        (memory limit, solve result) by increasing limit, in the instance's `memory_unit`; for a
        frontier the limit is the breakpoint's memory (the least that reaches its time).
    heuristics
        (name, peak memory, objective value) of every applicable handwritten schedule without a
        limit, to show where each sits.
    memory
        For a frontier, each point's least-memory solve (its value is the point's memory, its bound
        that memory's proof), in the order of `points`; empty for a grid sweep.
    ceiling
        The most memory a device holds (`device_budget`): no point above it; None when the instance
        does not know its GPU.
    ended
        Why the study stopped short (`OUT_OF_TIME`, `INTERRUPTED`, `NO_ANSWER`); "" when it is complete.
    left_out
        The limits of a sweep above `ceiling`, not solved.
    offloaded
        (memory limit, solve result) with offload allowed, by increasing limit (the module notes);
        empty where the study has no offload axis (`offload_axis`).
    """

    objective: Objective
    points: list[tuple[float, SolveResult]]
    heuristics: list[tuple[str, float, float]]
    memory: list[SolveResult] = dataclasses.field(default_factory=list)
    ceiling: float | None = None
    ended: str = ""
    left_out: list[float] = dataclasses.field(default_factory=list)
    offloaded: list[tuple[float, SolveResult]] = dataclasses.field(default_factory=list)


def offload_axis(instance: Instance, objective: Objective) -> bool:
    """Whether a study of `instance` gains the offload axis: a host link, and the makespan (a solve
    offloads for the makespan only)."""
    return instance.host_link_bandwidth is not None and objective == Objective.MAKESPAN


def device_budget(instance: Instance) -> float | None:
    """The most activation memory a device of `instance` holds, when the instance knows its GPU: the
    largest of its limits when `from-model` made them from a GPU memory (its metadata's
    `hardware.gpu_memory`); None otherwise (an instance's own limit does not bound a study)."""
    hardware = instance.metadata.get("hardware")
    knows_gpu = isinstance(hardware, dict) and bool(hardware.get("gpu_memory"))
    return max(instance.memory_limit) if knows_gpu and instance.memory_limit is not None else None


class _Clock:
    """A study's total time budget (seconds; None: none), handed out to its solves."""

    def __init__(self, budget: float | None, per_solve: float) -> None:
        self.deadline = None if budget is None else time.monotonic() + budget
        self.per_solve = per_solve

    def seconds(self) -> float | None:
        """The next solve's time limit, None when the budget is spent."""
        if self.deadline is None:
            return self.per_solve
        left = self.deadline - time.monotonic()
        return min(self.per_solve, left) if left > MIN_SOLVE_SECONDS else None


MIN_SOLVE_SECONDS = 0.1
"""A solve is not started with less of the total budget left than this."""


def parse_limits(spec: str, instance: Instance) -> list[float]:
    """Absolute limits from a comma-separated list of limits ("1.5,2,3"; "0.5x,1x" relative to the
    1F1B peak) and ranges "start:stop:step" such as "0.33x:2x:0.1x" (stop included).

    Parameters
    ----------
    spec
        The limits as `pipesat pareto` takes them.
    instance
        The instance the limits are for (its 1F1B peak and memory unit).

    Returns
    -------
    list[float]
        The limits in the instance's memory unit, as written.

    Raises
    ------
    InstanceError
        A limit or range that is not one, or more than MAX_POINTS limits.
    """
    parts = [part.strip() for part in spec.split(",")]
    if not any(parts):
        raise InstanceError("no memory limits given; write a list like '0.5x,1x,2x' or a range like '0.5x:2x:0.25x'")
    limits: list[float] = []
    for part in parts:
        limits += _range(part, instance) if ":" in part else [_limit(part, instance)]
    if len(limits) > MAX_POINTS:
        raise InstanceError(f"{len(limits)} memory limits in {spec!r}; give at most {MAX_POINTS}")
    return limits


def _range(text: str, instance: Instance) -> list[float]:
    pieces = text.split(":")
    if len(pieces) != 3:
        raise InstanceError(f"memory limit range {text!r} must be start:stop:step, such as 0.5x:2x:0.25x")
    start, stop, step = (_limit(piece, instance) for piece in pieces)
    if stop < start:
        raise InstanceError(f"memory limit range {text!r} ends before it starts; swap start and stop")
    steps = (stop - start) / step
    count = math.floor(steps + slack(steps)) + 1
    if count > MAX_POINTS:
        raise InstanceError(
            f"memory limit range {text!r} has {count} points; use a step that gives at most {MAX_POINTS}"
        )
    return [start + i * step for i in range(count)]


def _limit(text: str, instance: Instance) -> float:
    if text.strip().lower() in ("", "none", "null"):
        raise InstanceError(
            f"{text!r} is not a memory limit; write a number, an amount like 12GiB or a factor like 0.5x"
        )
    return parse_limit_value(text.strip(), instance)


def pareto_sweep(
    instance: Instance,
    limits: Sequence[float],
    objective: Objective | str = Objective.MAKESPAN,
    time_limit_per_point: float = 10.0,
    time_budget: float | None = None,
    **solve_kwargs: Any,
) -> ParetoResult:
    """The best schedule at each memory limit, the twin of `pipesat pareto` given its limits.

    Parameters
    ----------
    instance
        What is scheduled; its own memory limit is replaced by each of `limits`.
    limits
        Absolute limits in the instance's `memory_unit` (`parse_limits` reads "0.5x:2x:0.25x"); sorted,
        duplicates dropped, those above the device's budget (`device_budget`) left out.
    objective
        `makespan` or `span`.
    time_limit_per_point
        Seconds CP-SAT may search at each limit.
    time_budget
        Seconds for the whole sweep (None: no total); the limits not reached are not solved.
    **solve_kwargs
        `solve`'s other options (workers, seed, progress, ...).

    Returns
    -------
    ParetoResult
        One point per limit solved, by increasing limit.
    """
    objective = time_objective(objective)
    ceiling = device_budget(instance)
    clock = _Clock(time_budget, time_limit_per_point)
    previous: list[Schedule] = []
    points: list[tuple[float, SolveResult]] = []
    ended = ""
    chosen = sorted(set(limits))
    left_out = [limit for limit in chosen if ceiling is not None and not fits(limit, ceiling)]
    for limit in chosen[: len(chosen) - len(left_out)]:
        seconds = clock.seconds()
        if seconds is None:
            ended = OUT_OF_TIME
            break
        limited = instance.with_limit(limit)
        result = solve(limited, objective=objective, time_limit=seconds, starts=previous, **solve_kwargs)
        points.append((limit, result))
        if result.status == Status.INTERRUPTED:
            ended = INTERRUPTED
            break
        if result.schedule is not None:
            previous = [result.schedule.with_source(name=f"solution at limit {limit:g}")]
    offloaded: list[tuple[float, SolveResult]] = []
    if not ended and offload_axis(instance, objective):
        offloaded, ended = _offload_series(instance, points, clock, solve_kwargs)
    positions = heuristic_positions(instance, objective)
    return ParetoResult(objective, points, positions, [], ceiling, ended, left_out, offloaded)


def pareto_frontier(
    instance: Instance,
    objective: Objective | str = Objective.MAKESPAN,
    time_limit_per_solve: float = 10.0,
    time_budget: float | None = None,
    **solve_kwargs: Any,
) -> ParetoResult:
    """Every breakpoint of the time/memory trade-off, from the tight end up (the module notes); the
    twin of `pipesat pareto` without limits.

    Parameters
    ----------
    instance
        What is scheduled; its own memory limit bounds the frontier only when it is the device's
        budget (`device_budget`).
    objective
        `makespan` or `span`.
    time_limit_per_solve
        Seconds CP-SAT may search in each solve (two a breakpoint).
    time_budget
        Seconds for the whole frontier (None: no total).
    **solve_kwargs
        `solve`'s other options (workers, seed, progress, ...).

    Returns
    -------
    ParetoResult
        The breakpoints by increasing memory, each faster than the one before; `memory` holds each
        one's least-memory solve, `ended` why the frontier stopped short.
    """
    objective = time_objective(objective)
    ceiling = device_budget(instance)
    study = _Solves(instance, objective, _Clock(time_budget, time_limit_per_solve), solve_kwargs)
    breakpoints: list[tuple[float, SolveResult, SolveResult]] = []  # (memory, fastest, leanest)
    cap: float | None = None  # a schedule of the next breakpoint is faster than this
    ended = ""
    try:
        while len(breakpoints) < MAX_POINTS:
            leanest = study.leanest(cap, breakpoints[-1][2] if breakpoints else None)
            if leanest.schedule is None or leanest.value is None:
                ended = _why_none(leanest)
                break
            if ceiling is not None and not fits(leanest.value, ceiling):
                break  # what is faster does not fit the device
            fastest = study.fastest(leanest.value, [leanest.schedule])
            if fastest.schedule is None or fastest.value is None:  # only when interrupted: it starts from one
                ended = _why_none(fastest)
                break
            if breakpoints and not fastest.value < breakpoints[-1][1].value:  # type: ignore[operator]
                break  # the cap did not bite (times within BELOW of each other): no faster breakpoint
            breakpoints.append((leanest.value, fastest, leanest))
            if Status.INTERRUPTED in (fastest.status, leanest.status):
                ended = INTERRUPTED
                break
            cap = fastest.value * (1 - BELOW)
    except _OutOfTime:
        ended = OUT_OF_TIME
    kept = _on_the_frontier(breakpoints)
    points = [(memory, fastest) for memory, fastest, _ in kept]
    leanest_solves = [leanest for _, _, leanest in kept]
    offloaded: list[tuple[float, SolveResult]] = []
    if not ended and offload_axis(instance, objective):
        # Below the leanest breakpoint (or the device's budget, when no order fits it): the least limit
        # with offload and the middle of the way up.
        least, first = max(least_offload_limits(instance)), points[0][0] if points else ceiling
        leaner = [] if first is None else [(limit, None) for limit in (least, (least + first) / 2) if limit < first]
        offloaded, ended = _offload_series(instance, [*leaner, *points], study.clock, solve_kwargs)
    positions = heuristic_positions(instance, objective)
    return ParetoResult(objective, points, positions, leanest_solves, ceiling, ended, [], offloaded)


def _offload_series(
    instance: Instance,
    points: Sequence[tuple[float, SolveResult | None]],
    clock: _Clock,
    options: dict[str, Any],
) -> tuple[list[tuple[float, SolveResult]], str]:
    """The makespan with offload allowed at each of `points`' limits (by increasing limit), each solve
    starting from the point's schedule without offload and the last one with it, which fit the
    limit; and why the series stopped short ("" when it did not)."""
    series: list[tuple[float, SolveResult]] = []
    previous: list[Schedule] = []
    for limit, without in points:
        seconds = clock.seconds()
        if seconds is None:
            return series, OUT_OF_TIME
        starts = [*previous, *([] if without is None or without.schedule is None else [without.schedule])]
        limited = instance.with_limit(limit)
        result = solve(limited, time_limit=seconds, starts=starts, offload=True, **options)
        series.append((limit, result))
        if result.status == Status.INTERRUPTED:
            return series, INTERRUPTED
        if result.schedule is not None:
            previous = [result.schedule.with_source(name=f"offload solution at limit {limit:g}")]
    return series, ""


class _OutOfTime(Exception):
    """The study's total time budget is spent."""


class _Solves:
    """A frontier's two kinds of solve, each given what is left of the total budget."""

    def __init__(self, instance: Instance, objective: Objective, clock: _Clock, options: dict[str, Any]) -> None:
        self.instance, self.objective, self.clock, self.options = instance, objective, clock, options

    def _seconds(self) -> float:
        seconds = self.clock.seconds()
        if seconds is None:
            raise _OutOfTime
        return seconds

    def fastest(self, limit: float, starts: Sequence[Schedule] = (), share: float = 1.0) -> SolveResult:
        """The least time under `limit` on every device, in `share` of a solve's time limit."""
        limited = self.instance.with_limit(limit)
        seconds = self._seconds() * share
        return solve(limited, objective=self.objective, time_limit=seconds, starts=starts, **self.options)

    def _least_memory(self, cap: float | None, below: SolveResult | None, starts: Sequence[Schedule]) -> SolveResult:
        return solve(
            self.instance.with_limit(None),
            objective=self.objective,
            minimize=Minimize.MEMORY,
            makespan_cap=cap,
            time_limit=self._seconds(),
            starts=starts,
            known_bound=None if below is None else below.bound,  # a faster schedule needs no less memory
            **self.options,
        )

    def leanest(self, cap: float | None, below: SolveResult | None) -> SolveResult:
        """The least memory of a schedule within `cap` (None: any), `below` the last breakpoint's
        least-memory solve. When the search stops short of its proof it is refined: a bisection of
        the limits between its bound and its value by the fastest schedule under each (memory-gated
        handwritten schedules start a solve under a limit, none a search under a time cap), the upper
        end down to the peak of one within the cap, else the lower end up; at most `REFINEMENTS`
        limits, each in `PROBE_SHARE` of a solve's time, then one more search from the leanest
        schedule found within the cap."""
        leanest = self._least_memory(cap, below, ())
        if leanest.status != Status.FEASIBLE or leanest.value is None or leanest.bound is None:
            return leanest
        low, high, found = leanest.bound, leanest.value, None
        for _ in range(REFINEMENTS):
            middle = (low + high) / 2
            probe = self.fastest(middle, share=PROBE_SHARE)
            if probe.schedule is None or probe.value is None or (cap is not None and not fits(probe.value, cap)):
                low = middle  # nothing found within the cap under this limit: look above it
            else:
                found, high = probe.schedule, compute_metrics(probe.schedule).max_peak_memory
        if found is None:
            return leanest
        better = self._least_memory(cap, below, [found])
        return better if better.value is not None and better.value < leanest.value else leanest


REFINEMENTS = 4
"""How many limits refine a least-memory search stopped short of its proof (`_Solves.leanest`)."""
PROBE_SHARE = 1 / 3
"""The share of a solve's time limit each of those limits gets: a probe needs a schedule, not a proof."""


def _why_none(result: SolveResult) -> str:
    """Why a solve ended a frontier without a schedule: none exists (the frontier is complete), an
    interruption, or its time limit."""
    if result.status == Status.INFEASIBLE:
        return ""
    return INTERRUPTED if result.status == Status.INTERRUPTED else NO_ANSWER


def _on_the_frontier(
    breakpoints: Sequence[tuple[float, SolveResult, SolveResult]],
) -> list[tuple[float, SolveResult, SolveResult]]:
    """The breakpoints, by memory, that no other beats: each strictly faster than every one with less
    memory (equal times: the least memory). Solves proven optimal never make one that is not; one
    stopped by its time limit can."""
    kept: list[tuple[float, SolveResult, SolveResult]] = []
    for point in sorted(breakpoints, key=lambda item: (item[0], item[1].value or 0.0)):
        value = point[1].value
        if value is not None and all(
            value < other[1].value and not same(value, other[1].value) for other in kept if other[1].value is not None
        ):
            kept.append(point)
    return kept


def heuristic_positions(instance: Instance, objective: Objective) -> list[tuple[str, float, float]]:
    """(name, peak memory, objective value) of each applicable heuristic, without a memory limit
    (the max span after re-timing for it, as the solver measures); the offload schedules too where
    the study has the offload axis (`offload_axis`)."""
    unlimited = instance.with_limit(None)
    positions = []
    for name, schedule in handwritten_schedules(unlimited, offload=offload_axis(instance, objective)):
        timed = retimed_for(objective, schedule)
        if validate(timed):
            continue
        metrics = compute_metrics(timed)
        positions.append((name, metrics.max_peak_memory, metrics.objective(objective)))
    return positions
