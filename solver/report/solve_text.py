"""The words for a solve: how it ended, why there is no schedule, its summary and its progress line."""

from __future__ import annotations

from models import Objective, Status
from models.solve_result import Infeasibility, InfeasibleReason, SolveResult
from solver.evaluate.metrics import relative_gap
from solver.report.tables import format_number, format_percent, heuristic_title


def outcome_text(result: SolveResult) -> str:
    """How the solve ended, in one line: `optimal`, `feasible, gap 2.1%`, `optimal (1f1b meets the
    lower bound)`, `infeasible: memory limit 0.9 is too small; ...`, `unknown: no schedule found in 3 s`."""
    if result.schedule is None:
        return _no_schedule_outcome(result)
    text = str(result.status)
    if result.status != Status.OPTIMAL:
        text += f", gap {_percent(result.gap or 0.0)}"
    if not result.searched and result.starting_point is not None:
        name = result.starting_point.name
        text += f" ({name} meets the lower bound)" if result.proven_optimal else f" ({name} is within the gap)"
    return text


def no_schedule_text(result: SolveResult) -> str:
    """Why the solve returned no schedule, as an error line: the smallest feasible memory limit when
    the limit is too small, else the reason, or a hint to search longer."""
    why = result.infeasibility
    if result.status == Status.INFEASIBLE and why is not None:
        if why.reason == InfeasibleReason.MEMORY_LIMIT and why.limit is not None and why.least is not None:
            return (
                f"no schedule fits the memory limit {format_number(why.limit)}; "
                f"the smallest feasible limit is {format_number(why.least)}"
            )
        return f"no schedule fits: {infeasibility_text(why)}"
    return f"the solver found no schedule ({result.status}) ({outcome_text(result)}); raise --time-limit"


def infeasibility_text(why: Infeasibility) -> str:
    """Why no schedule exists, with the numbers."""
    objective = why.time_objective.value
    if why.reason == InfeasibleReason.MEMORY_LIMIT:
        return f"memory limit {why.limit:g} is too small; the smallest feasible limit is {why.least:g}"
    if why.reason == InfeasibleReason.TIME_CAP:
        return f"no schedule has a {objective} within {why.limit:g}; the lower bound is {why.least:g}"
    searched_for = "one" if why.limit is None else f"a {objective} within {why.limit:g}"
    return f"no schedule fits; searched for {searched_for}"


def summary_fields(result: SolveResult) -> list[tuple[str, str]]:
    """(label, value) lines of a solve with a schedule: status, value, bound, gap, the best
    handwritten schedule and how much slower it is, the starting point when the search started
    elsewhere (the periodic start), and the times."""
    fields = [
        ("status", _status_text(result)),
        (result.objective.title, number_or_dash(result.value)),
        ("lower bound", number_or_dash(result.bound)),
        ("gap", "-" if result.gap is None else f"{format_percent(result.gap)} over the lower bound"),
    ]
    best = result.best_heuristic
    if best is None:
        fields.append(("best heuristic", "no handwritten schedule fits this instance and limit"))
    else:
        slower = ""
        if result.value is not None:
            slower = f", {format_percent(relative_gap(best.value, result.value))} {_more(result.objective)}"
        fields.append(("best heuristic", f"{heuristic_title(best.name)} = {number_or_dash(best.value)}{slower}"))
    start = result.starting_point
    if start is not None and (best is None or start.name != best.name):
        fields.append(("started from", f"{heuristic_title(start.name)} = {number_or_dash(start.value)}"))
    first = "" if result.time_to_first is None else f", first schedule at {result.time_to_first:.2f} s"
    best_at = "" if result.time_to_best is None else f", best at {result.time_to_best:.2f} s"
    fields.append(("solve time", f"{result.solve_time:.2f} s{first}{best_at}"))
    return fields


def goal_text(objective: Objective, minimize: str, cap: float | None) -> str:
    """What a solve looks for: `least max span`, `least peak memory with makespan <= 40`."""
    if minimize != "memory":
        return f"least {objective.title}"
    capped = "" if cap is None else f" with {objective.title} <= {cap:g}"
    return f"least peak memory{capped}"


def progress_text(elapsed: float, best: float | None, bound: float | None) -> str:
    """The live progress line: elapsed seconds, best value, bound and gap."""
    text = f"{elapsed:7.1f}s  best {number_or_dash(best):>10}  bound {number_or_dash(bound):>10}"
    if best is not None and bound is not None:
        text += f"  gap {format_percent(relative_gap(best, bound))}"
    return text


def _status_text(result: SolveResult) -> str:
    """`optimal (proven by CP-SAT)`, with the time resolution when the proof is at the model's ticks."""
    if result.status != Status.OPTIMAL:
        return str(result.status)
    if result.resolution is not None:
        return f"optimal (proven by CP-SAT for times rounded down to {result.resolution:g})"
    return "optimal (proven by CP-SAT)"


def _more(objective: Objective) -> str:
    """How a larger value reads: `slower` for a time, `more memory` for memory."""
    return "more memory" if objective == Objective.MEMORY else "slower"


def number_or_dash(value: float | None) -> str:
    return "-" if value is None else format_number(value)


def _no_schedule_outcome(result: SolveResult) -> str:
    if result.status == Status.INFEASIBLE and result.infeasibility is not None:
        return f"infeasible: {infeasibility_text(result.infeasibility)}"
    if result.status == Status.INTERRUPTED:
        return "interrupted before any schedule was found"
    return f"unknown: no schedule found in {result.solve_time:.3g} s"


def _percent(fraction: float) -> str:
    """A percentage with three significant digits, never rounded to zero."""
    return f"{100 * fraction:.3g}%"
