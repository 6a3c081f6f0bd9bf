"""The Pareto picture of a memory sweep: the objective against the memory limit.

The solver's frontier is a step line, a proven optimum a filled dot, a feasible value a hollow one
with a bar down to its bound, an infeasible limit a cross on the axis; each handwritten schedule is a
labelled point at its peak memory, its label placed clear of the other labels and marks.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from matplotlib.figure import Figure

from pipesat.models import Kind, Objective, Status
from pipesat.models.solve_result import SolveResult
from pipesat.solver.report.figures import KIND_COLOURS, LIMIT_COLOUR, fit_text, new_figure, place_labels
from pipesat.solver.report.units import Units


def pareto_figure(
    points: Sequence[tuple[float, SolveResult]],
    heuristics: Sequence[tuple[str, float, float]],
    objective: Objective = Objective.MAKESPAN,
    reference: float | None = None,
    title: str = "",
    open_ended: bool = False,
    units: Units = Units(),  # noqa: B008 (a frozen dataclass: the default is never changed)
    ceiling: float | None = None,
) -> Figure:
    """Objective against memory limit: the solver's frontier and each heuristic as a labelled point.

    `points` are (limit, SolveResult); a proven optimum is a filled dot, a feasible value a hollow
    one with a bar down to its bound, an infeasible limit a cross on the axis. `reference` (the 1F1B
    peak) adds a top axis in multiples of it. `open_ended` (a frontier of breakpoints) carries the last
    point's value on to the right edge (to `ceiling`, what a device holds, when given: a dashed line):
    more memory than the last breakpoint buys no more speed. Memory amounts (the limits, the
    heuristics' peaks, `reference`, `ceiling`) are in the instance's unit and drawn in `units`' shown one.
    """
    figure = new_figure(9, 5.5)
    axes = figure.add_subplot()
    shown = units.memory_factor
    points = [(limit * shown, result) for limit, result in points]
    heuristics = [(name, peak * shown, value) for name, peak, value in heuristics]
    reference = None if reference is None else reference * shown
    ceiling = None if ceiling is None else ceiling * shown
    solved = [(limit, result.value, result) for limit, result in points if result.value is not None]
    if solved:
        limits = [limit for limit, _, _ in solved]
        values = [value for _, value, _ in solved]
        if open_ended:
            right = ceiling or max([limits[-1] * 1.1, *(peak for _, peak, _ in heuristics)])
            limits, values = [*limits, right], [*values, values[-1]]
        axes.step(limits, values, where="post", color=KIND_COLOURS[Kind.F], linewidth=1.2, alpha=0.6)
        for limit, value, result in solved:
            optimal = result.status == Status.OPTIMAL
            axes.plot(
                limit,
                value,
                "o",
                color=KIND_COLOURS[Kind.F],
                markerfacecolor=KIND_COLOURS[Kind.F] if optimal else "white",
                markersize=6,
            )
            if not optimal and result.bound is not None:
                axes.vlines(limit, result.bound, value, color=KIND_COLOURS[Kind.F], linewidth=1.0)
    infeasible = [limit for limit, result in points if result.status == Status.INFEASIBLE]
    for limit in infeasible:
        axes.plot(limit, 0, "x", color=LIMIT_COLOUR, markersize=7, clip_on=False)
    # Heuristics at the same point share one marker and one label.
    labels: dict[tuple[float, float], list[str]] = {}
    for name, peak, value in heuristics:
        labels.setdefault((peak, value), []).append(name)
    for peak, value in labels:
        axes.plot(peak, value, "D", color=KIND_COLOURS[Kind.B], markersize=6)
    if ceiling is not None:
        axes.axvline(ceiling, color=LIMIT_COLOUR, linestyle="--", linewidth=1.0)
    all_values = [value for _, value, _ in solved] + [value for _, _, value in heuristics]
    if all_values:
        axes.set_ylim(0, max(all_values) * 1.1)
    objective_name = "makespan" if objective == Objective.MAKESPAN else "max span"
    axes.set_xlabel(
        units.memory_header("memory limit per device")
        if units.memory
        else "memory limit per device (activation memory units)"
    )
    axes.set_ylabel(units.time_header(objective_name))
    # A legend entry for each kind of mark the plot holds.
    statuses = {result.status for _, _, result in solved}
    entries: list[tuple[bool, str, dict[str, Any], str]] = [
        (Status.OPTIMAL in statuses, "o", {"color": KIND_COLOURS[Kind.F]}, "solver: optimal"),
        (
            bool(statuses - {Status.OPTIMAL}),
            "o",
            {"color": KIND_COLOURS[Kind.F], "markerfacecolor": "white"},
            "solver: feasible, bar to bound",
        ),
        (bool(heuristics), "D", {"color": KIND_COLOURS[Kind.B]}, "handwritten schedule (at its peak memory)"),
        (bool(infeasible), "x", {"color": LIMIT_COLOUR}, "no schedule fits"),
        (ceiling is not None, "--", {"color": LIMIT_COLOUR}, "what a device holds (its budget)"),
    ]
    handles = [axes.plot([], [], marker, label=label, **style)[0] for shown, marker, style, label in entries if shown]
    legend = figure.legend(handles=handles, loc="lower center", ncol=2, fontsize=8, frameon=False)
    axes.grid(alpha=0.3)
    for side in ("top", "right"):
        axes.spines[side].set_visible(False)
    if reference:
        factor = reference

        def to_multiples(x: Any) -> Any:
            return x / factor

        def from_multiples(x: Any) -> Any:
            return x * factor

        top = axes.secondary_xaxis("top", functions=(to_multiples, from_multiples))
        top.set_xlabel("memory limit (x of the 1F1B peak)")
    axes.set_title(title or f"{objective_name} against memory limit", fontsize=11)
    fit_text(axes.title, 0.9 * figure.bbox.width)
    figure.tight_layout(rect=(0, legend.get_window_extent().height / figure.bbox.height, 1, 1))
    marks = [(limit, value) for limit, value, _ in solved] + [(limit, 0.0) for limit in infeasible]
    place_labels(axes, [(peak, value, ", ".join(names)) for (peak, value), names in labels.items()], marks)
    return figure
