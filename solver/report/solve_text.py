"""The words for a solve: how it ended, why there is no schedule, its summary and its progress line."""

from __future__ import annotations

from pipesat.models import Instance, Minimize, Objective, Status
from pipesat.models.solve_result import Infeasibility, InfeasibleReason, SolveResult, StopReason
from pipesat.models.tolerance import fits
from pipesat.solver.evaluate.bounds import minimum_memory_limits
from pipesat.solver.evaluate.metrics import relative_gap
from pipesat.solver.report.tables import format_number, format_percent, heuristic_title
from pipesat.solver.report.units import Units, units_of


def outcome_text(result: SolveResult, units: Units = Units()) -> str:  # noqa: B008 (frozen)
    """How the solve ended, in one line: `optimal`, `feasible, gap 2.1%`, `optimal (1f1b meets the
    lower bound)`, `infeasible: memory limit 0.9 is too small; ...`, `unknown: no schedule found in 3 s`;
    amounts in `units`."""
    if result.schedule is None:
        return _no_schedule_outcome(result, units)
    text = str(result.status)
    if result.status != Status.OPTIMAL:
        text += f", gap {_percent(result.gap or 0.0)}"
    if not result.searched and result.starting_point is not None:
        name = result.starting_point.name
        text += f" ({name} meets the lower bound)" if result.proven_optimal else f" ({name} is within the gap)"
    return text


def no_schedule_text(result: SolveResult, units: Units = Units()) -> str:  # noqa: B008 (frozen)
    """Why the solve returned no schedule, as an error line: the smallest feasible memory limit when
    the limit is too small (in `units`), else the reason, with a hint to search longer when time ran out."""
    why = result.infeasibility
    if result.status == Status.INFEASIBLE and why is not None:
        if why.reason == InfeasibleReason.MEMORY_LIMIT and why.limit is not None and why.least is not None:
            limit, least = _memory(why.limit, units), _memory(why.least, units)
            if why.device is None:
                return f"no schedule fits the memory limit {limit}; the smallest feasible limit is {least}"
            return f"no schedule fits device {why.device}'s memory limit of {limit}; it needs at least {least}"
        return f"no schedule fits: {infeasibility_text(why, units)}"
    longer = result.stopped_by in (None, StopReason.TIME_LIMIT, StopReason.WALL_CLOCK)
    hint = "; raise `time_limit`" if longer else ""
    return f"the solver found no schedule ({result.status}) ({outcome_text(result, units)}){hint}"


def limit_too_small_text(instance: Instance) -> str | None:
    """The error line of a memory limit that no schedule fits, without a solve (the exact smallest
    feasible limit, `minimum_memory_limits`); None when some schedule can fit."""
    if instance.memory_limit is None:
        return None
    units = units_of(instance)
    least = minimum_memory_limits(instance)
    short = [
        d for d, (limit, need) in enumerate(zip(instance.memory_limit, least, strict=True)) if not fits(need, limit)
    ]
    if not short:
        return None
    if len(set(instance.memory_limit)) == 1:
        limit, smallest = _memory(instance.memory_limit[0], units), _memory(max(least), units)
        return f"no schedule fits the memory limit {limit}; the smallest feasible limit is {smallest}"
    d = short[0]
    limit, need = _memory(instance.memory_limit[d], units), _memory(least[d], units)
    return f"no schedule fits device {d}'s memory limit of {limit}; it needs at least {need}"


def infeasibility_text(why: Infeasibility, units: Units = Units()) -> str:  # noqa: B008 (frozen)
    """Why no schedule exists, with the numbers in `units`."""
    objective = why.time_objective.value
    if why.reason == InfeasibleReason.MEMORY_LIMIT and why.limit is not None and why.least is not None:
        limit, least = _memory(why.limit, units), _memory(why.least, units)
        if why.device is None:
            return f"memory limit {limit} is too small; the smallest feasible limit is {least}"
        return f"device {why.device}'s memory limit {limit} is too small; it needs at least {least}"
    if why.reason == InfeasibleReason.TIME_CAP and why.limit is not None and why.least is not None:
        cap, bound = (units.with_time(format_number(x)) for x in (why.limit, why.least))
        return f"no schedule has a {objective} within {cap}; the lower bound is {bound}"
    searched_for = "one" if why.limit is None else f"a {objective} within {units.with_time(format_number(why.limit))}"
    return f"no schedule fits; searched for {searched_for}"


def _memory(amount: float, units: Units) -> str:
    return units.with_memory(format_number(units.memory_value(amount)))


def summary_fields(result: SolveResult, units: Units = Units()) -> list[tuple[str, str]]:  # noqa: B008 (frozen)
    """(label, value) lines of a solve with a schedule: status, value, bound, gap, the best
    handwritten schedule and how much slower it is, the starting point when the search started
    elsewhere (the periodic start), and the times; amounts in `units`."""

    def amount(value: float | None) -> str:
        if value is None:
            return "-"
        if result.objective == Objective.MEMORY:
            return units.with_memory(format_number(units.memory_value(value)))
        return units.with_time(format_number(value))

    fields = [
        ("status", _status_text(result)),
        (result.objective.label, amount(result.value)),
        ("lower bound", amount(result.bound)),
        ("gap", "-" if result.gap is None else f"{format_percent(result.gap)} over the lower bound"),
    ]
    best = result.best_heuristic
    if best is None:
        fields.append(("best heuristic", "no handwritten schedule fits this instance and limit"))
    else:
        slower = ""
        if result.value is not None:
            slower = f", {format_percent(relative_gap(best.value, result.value))} {_more(result.objective)}"
        fields.append(("best heuristic", f"{heuristic_title(best.name)} = {amount(best.value)}{slower}"))
    start = result.starting_point
    if start is not None and (best is None or start.name != best.name):
        fields.append(("started from", f"{heuristic_title(start.name)} = {amount(start.value)}"))
    first = "" if result.time_to_first is None else f", first schedule at {result.time_to_first:.2f} s"
    best_at = "" if result.time_to_best is None else f", best at {result.time_to_best:.2f} s"
    fields.append(("solve time", f"{result.solve_time:.2f} s{first}{best_at}"))
    return fields


def goal_text(objective: Objective, minimize: Minimize, cap: float | None) -> str:
    """What a solve looks for: `least max span`, `least peak memory with makespan <= 40`."""
    if minimize != Minimize.MEMORY:
        return f"least {objective.label}"
    capped = "" if cap is None else f" with {objective.label} <= {cap:g}"
    return f"least peak memory{capped}"


def progress_text(elapsed: float, best: float | None, bound: float | None) -> str:
    """The live progress line: elapsed seconds, best value, bound and gap."""
    text = f"{elapsed:7.1f}s  best {number_or_dash(best):>10}  bound {number_or_dash(bound):>10}"
    if best is not None and bound is not None:
        text += f"  gap {format_percent(relative_gap(best, bound))}"
    return text


def _status_text(result: SolveResult) -> str:
    """The status and why: `optimal (proven by CP-SAT)`, `feasible (the time limit ran out)`, with the
    time resolution when the proof is at the model's ticks."""
    if result.reason is None:
        return str(result.status)
    if result.status == Status.OPTIMAL and result.resolution is not None:
        return f"optimal ({result.reason} for times rounded down to {result.resolution:g})"
    return f"{result.status} ({result.reason})"


def _more(objective: Objective) -> str:
    """How a larger value reads: `slower` for a time, `more memory` for memory."""
    return "more memory" if objective == Objective.MEMORY else "slower"


def number_or_dash(value: float | None) -> str:
    return "-" if value is None else format_number(value)


def _no_schedule_outcome(result: SolveResult, units: Units) -> str:
    if result.status == Status.INFEASIBLE and result.infeasibility is not None:
        return f"infeasible: {infeasibility_text(result.infeasibility, units)}"
    if result.status == Status.INTERRUPTED:
        return "interrupted before any schedule was found"
    why = "" if result.reason is None else f" ({result.reason})"
    return f"unknown: no schedule found in {result.solve_time:.3g} s{why}"


def _percent(fraction: float) -> str:
    """A percentage with three significant digits, never rounded to zero."""
    return f"{100 * fraction:.3g}%"
