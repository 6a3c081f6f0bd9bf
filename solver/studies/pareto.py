"""Pareto: the best makespan (or max span) against the memory limit.

Two ways. `pareto_sweep` solves a grid of limits from the smallest up, each solve starting from the
previous point's schedule (it fits every larger limit), so the frontier never rises as the limit
grows. `pareto_frontier` finds the trade-off's breakpoints themselves, from the most memory down:
the least time T at the current limit, then the least memory M that reaches T (the breakpoint
(M, T): at every limit from M up to the previous breakpoint's memory the best time is T), then the
next limit just below M, until no schedule fits. Bounds go down: T is a lower bound on the time at
every smaller limit. Solutions go along: the memory solve starts from the time solve's schedule.
Each breakpoint carries the proof of both solves. A solve interrupted (Ctrl-C, SIGTERM) ends either
way: the points so far are the result.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pipesat.models import Instance, InstanceError, Minimize, Objective, Schedule, Status
from pipesat.models.instance import parse_limit_value
from pipesat.models.objective import time_objective
from pipesat.models.solve_result import SolveResult
from pipesat.models.tolerance import slack
from pipesat.solver.evaluate.metrics import compute_metrics
from pipesat.solver.evaluate.retime import retimed_for
from pipesat.solver.evaluate.validator import validate
from pipesat.solver.heuristics import handwritten_schedules
from pipesat.solver.solve import solve

MAX_POINTS = 200


# The next limit of the frontier: this fraction below the last breakpoint's memory (far above float
# noise, far below any difference of memory amounts).
BELOW = 1e-6


@dataclass(frozen=True)
class ParetoResult:
    """`points`: (memory limit, solve result) by increasing limit. `heuristics`: (name, peak memory,
    objective value) of every applicable heuristic without a limit, to show where each sits.
    `memory`: for a frontier, each point's least-memory solve (its value is the point's memory, its
    bound that memory's proof), in the order of `points`; empty for a grid sweep."""

    objective: Objective
    points: list[tuple[float, SolveResult]]
    heuristics: list[tuple[str, float, float]]
    memory: list[SolveResult] = dataclasses.field(default_factory=list)


def parse_limits(spec: str, instance: Instance) -> list[float]:
    """Absolute limits from a comma-separated list of limits ("1.5,2,3"; "0.5x,1x" relative to the
    1F1B peak) and ranges "start:stop:step" such as "0.33x:2x:0.1x" (stop included)."""
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
    time_limit_per_point: float = 5.0,
    **solve_kwargs: Any,
) -> ParetoResult:
    """Solve `instance` at each memory limit (sorted, duplicates dropped) with `solve`'s options."""
    objective = time_objective(objective)
    previous: list[Schedule] = []
    points: list[tuple[float, SolveResult]] = []
    for limit in sorted(set(limits)):
        limited = instance.with_limit(limit)
        result = solve(limited, objective=objective, time_limit=time_limit_per_point, starts=previous, **solve_kwargs)
        points.append((limit, result))
        if result.status == Status.INTERRUPTED:
            break
        if result.schedule is not None:
            previous = [result.schedule.with_source(name=f"solution at limit {limit:g}")]
    return ParetoResult(objective, points, heuristic_positions(instance, objective))


def pareto_frontier(
    instance: Instance,
    objective: Objective | str = Objective.MAKESPAN,
    time_limit_per_solve: float = 5.0,
    **solve_kwargs: Any,
) -> ParetoResult:
    """Every breakpoint of the time/memory trade-off, from the most memory down (see the module notes)."""
    objective = time_objective(objective)
    breakpoints: list[tuple[float, SolveResult, SolveResult]] = []  # (memory, fastest, leanest)
    limit: float | None = None
    known: float | None = None
    while len(breakpoints) < MAX_POINTS:
        limited = instance.with_limit(limit)
        fastest = solve(
            limited, objective=objective, time_limit=time_limit_per_solve, known_bound=known, **solve_kwargs
        )
        if fastest.schedule is None or fastest.value is None:
            break
        leanest = solve(
            limited,
            objective=objective,
            minimize=Minimize.MEMORY,
            makespan_cap=fastest.value,
            time_limit=time_limit_per_solve,
            starts=[fastest.schedule],
            **solve_kwargs,
        )
        if leanest.schedule is None or leanest.value is None:
            break
        breakpoints.append((leanest.value, fastest, leanest))
        if Status.INTERRUPTED in (fastest.status, leanest.status):
            break
        known = fastest.bound
        limit = leanest.value * (1 - BELOW)
    points = [
        (memory, dataclasses.replace(fastest, schedule=leanest.schedule))
        for memory, fastest, leanest in reversed(breakpoints)
    ]
    leanest_solves = [leanest for _, _, leanest in reversed(breakpoints)]
    return ParetoResult(objective, points, heuristic_positions(instance, objective), leanest_solves)


def heuristic_positions(instance: Instance, objective: Objective) -> list[tuple[str, float, float]]:
    """(name, peak memory, objective value) of each applicable heuristic, without a memory limit
    (the max span after re-timing for it, as the solver measures)."""
    unlimited = instance.with_limit(None)
    positions = []
    for name, schedule in handwritten_schedules(unlimited):
        timed = retimed_for(objective, schedule)
        if validate(timed):
            continue
        metrics = compute_metrics(timed)
        positions.append((name, metrics.max_peak_memory, metrics.objective(objective)))
    return positions
