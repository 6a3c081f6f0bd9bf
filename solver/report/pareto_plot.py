"""The Pareto picture of a memory sweep: the objective against the memory limit.

The solver's frontier is a step line, a proven optimum a filled dot, a feasible value a hollow one
with a bar down to its bound, an infeasible limit a cross on the axis; each handwritten schedule is a
labelled point at its peak memory, its label placed clear of the other labels and marks. Where the
study has the offload axis, the points solved with offload allowed are a second series, "with
offload", in their own colour, and the handwritten offload schedules are squares of that colour.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
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
    offloaded: Sequence[tuple[float, SolveResult]] = (),
    offloading: Collection[str] = (),
) -> Figure:
    """Objective against memory limit: the solver's frontier and each heuristic as a labelled point.

    `points` are (limit, SolveResult); a proven optimum is a filled dot, a feasible value a hollow
    one with a bar down to its bound, an infeasible limit a cross on the axis. `reference` (the 1F1B
    peak) adds a top axis in multiples of it. `open_ended` (a frontier of breakpoints) carries the last
    point's value on to the right edge (to `ceiling`, what a device holds, when given: a dashed line):
    more memory than the last breakpoint buys no more speed. Memory amounts (the limits, the
    heuristics' peaks, `reference`, `ceiling`) are in the instance's unit and drawn in `units`' shown one.
    `offloaded` are the (limit, SolveResult) solved with offload allowed, drawn as a second series the
    same way; the heuristics named in `offloading` offload (their marks are that series' squares).
    """
    figure = new_figure(9, 5.5)
    axes = figure.add_subplot()
    shown = units.memory_factor
    points = [(limit * shown, result) for limit, result in points]
    offloaded = [(limit * shown, result) for limit, result in offloaded]
    heuristics = [(name, peak * shown, value) for name, peak, value in heuristics]
    reference = None if reference is None else reference * shown
    ceiling = None if ceiling is None else ceiling * shown
    solved, with_offload = _solved(points), _solved(offloaded)
    lasts = [series[-1][0] * 1.1 for series in (solved, with_offload) if series]
    right = ceiling or max([*lasts, *(peak for _, peak, _ in heuristics)], default=0.0)
    for series, colour in ((solved, KIND_COLOURS[Kind.F]), (with_offload, OFFLOAD_COLOUR)):
        _draw_series(axes, series, colour, right if open_ended else None)
    infeasible = [limit for limit, result in points if result.status == Status.INFEASIBLE]
    infeasible_offloading = [limit for limit, result in offloaded if result.status == Status.INFEASIBLE]
    for limits, colour in ((infeasible, LIMIT_COLOUR), (infeasible_offloading, OFFLOAD_COLOUR)):
        for limit in limits:
            axes.plot(limit, 0, "x", color=colour, markersize=7, clip_on=False)
    # Heuristics at the same point share one marker and one label.
    labels: dict[tuple[float, float], list[str]] = {}
    for name, peak, value in heuristics:
        labels.setdefault((peak, value), []).append(name)
    offload_marks = {key for key, names in labels.items() if all(name in offloading for name in names)}
    for peak, value in labels:
        marker, colour = ("s", OFFLOAD_COLOUR) if (peak, value) in offload_marks else ("D", KIND_COLOURS[Kind.B])
        axes.plot(peak, value, marker, color=colour, markersize=6)
    if ceiling is not None:
        axes.axvline(ceiling, color=LIMIT_COLOUR, linestyle="--", linewidth=1.0)
    all_values = [value for _, value, _ in solved + with_offload] + [value for _, _, value in heuristics]
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
    offload_statuses = {result.status for _, _, result in with_offload}
    entries: list[tuple[bool, str, dict[str, Any], str]] = [
        (Status.OPTIMAL in statuses, "o", {"color": KIND_COLOURS[Kind.F]}, "solver: optimal"),
        (
            bool(statuses - {Status.OPTIMAL}),
            "o",
            {"color": KIND_COLOURS[Kind.F], "markerfacecolor": "white"},
            "solver: feasible, bar to bound",
        ),
        (Status.OPTIMAL in offload_statuses, "o", {"color": OFFLOAD_COLOUR}, "solver with offload: optimal"),
        (
            bool(offload_statuses - {Status.OPTIMAL}),
            "o",
            {"color": OFFLOAD_COLOUR, "markerfacecolor": "white"},
            "solver with offload: feasible, bar to bound",
        ),
        (
            len(offload_marks) < len(labels),
            "D",
            {"color": KIND_COLOURS[Kind.B]},
            "handwritten schedule (at its peak memory)",
        ),
        (bool(offload_marks), "s", {"color": OFFLOAD_COLOUR}, "handwritten offload schedule (at its peak memory)"),
        (bool(infeasible), "x", {"color": LIMIT_COLOUR}, "no schedule fits"),
        (bool(infeasible_offloading), "x", {"color": OFFLOAD_COLOUR}, "no schedule fits, with offload"),
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
    marks = [(limit, value) for limit, value, _ in solved + with_offload]
    marks += [(limit, 0.0) for limit in infeasible + infeasible_offloading]
    place_labels(axes, [(peak, value, ", ".join(names)) for (peak, value), names in labels.items()], marks)
    return figure


OFFLOAD_COLOUR = "#009E73"
"""The offload series and the handwritten offload schedules (Okabe-Ito's bluish green, beside F's blue)."""


def _solved(points: Sequence[tuple[float, SolveResult]]) -> list[tuple[float, float, SolveResult]]:
    """(limit, value, result) of each point with a value."""
    return [(limit, result.value, result) for limit, result in points if result.value is not None]


def _draw_series(
    axes: Any, solved: Sequence[tuple[float, float, SolveResult]], colour: str, right: float | None
) -> None:
    """One series: a step line (carried on to `right` when given), a filled dot at a proven optimum,
    a hollow one with a bar down to its bound elsewhere."""
    if not solved:
        return
    limits = [limit for limit, _, _ in solved]
    values = [value for _, value, _ in solved]
    if right is not None:
        limits, values = [*limits, max(right, limits[-1])], [*values, values[-1]]
    axes.step(limits, values, where="post", color=colour, linewidth=1.2, alpha=0.6)
    for limit, value, result in solved:
        optimal = result.status == Status.OPTIMAL
        axes.plot(limit, value, "o", color=colour, markerfacecolor=colour if optimal else "white", markersize=6)
        if not optimal and result.bound is not None:
            axes.vlines(limit, result.bound, value, color=colour, linewidth=1.0)
