"""Pictures: a schedule's Gantt chart with memory panels, and the Pareto plot of a memory sweep.

The Gantt chart has one row per device (device 0 on top). F, B and W have distinct Okabe-Ito
colours (safe for colour-blind readers); later chunks on a device are lighter shades of the same
colour; the microbatch number is written in a box when it fits; idle time is the grey background,
so p2p latency shows as a grey gap. Below it, one memory-over-time panel per device, with the
memory limit drawn. The file format (PNG, SVG, PDF) follows the file's extension.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.colors import to_rgb
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from models import InputError, Objective, Schedule
from models.document import write_atomically
from solver.evaluate.metrics import compute_metrics, memory_profiles
from solver.report.tables import display_name, format_number, format_percent
from solver.report.text import limit_text
from solver.report.units import Units, units_of

# Okabe-Ito: blue, orange, reddish purple (their light shades stay apart too); vermillion for limits.
KIND_COLOURS = {"F": "#0072B2", "B": "#E69F00", "W": "#CC79A7"}
LIMIT_COLOUR = "#D55E00"
IDLE_COLOUR = "#E4E4E4"
MEMORY_COLOUR = "#555555"
PICTURE_SUFFIXES = (".png", ".svg", ".pdf")
DPI = 110


def picture_format(path: str | Path) -> str:
    """The picture format of a file name, or an `InputError` saying which suffixes work."""
    suffix = Path(path).suffix.lower()
    if suffix not in PICTURE_SUFFIXES:
        raise InputError(f"{path}: cannot draw a {suffix or 'suffix-less'} file; name it .png, .svg or .pdf")
    return suffix[1:]


def shade(colour: str, chunk: int, chunks: int) -> tuple[float, float, float]:
    """The colour of an op of `chunk`: chunk 0 is the full colour, later chunks blend towards white."""
    lightness = 0.0 if chunks <= 1 else 0.6 * chunk / (chunks - 1)
    return tuple(c + (1.0 - c) * lightness for c in to_rgb(colour))


def _text_colour(rgb: tuple[float, float, float]) -> str:
    luminance = 0.2126 * rgb[0] + 0.7152 * rgb[1] + 0.0722 * rgb[2]
    return "black" if luminance > 0.5 else "white"


def kind_names(split_backward: bool) -> dict[str, str]:
    backward = "backward (inputs)" if split_backward else "backward"
    return {"F": "forward", "B": backward, "W": "weight gradient"}


def schedule_title(schedule: Schedule, objective: Objective = "makespan") -> str:
    """Two title lines: what the schedule is, then its objective, bubble rate and peak memory."""
    instance, metrics = schedule.instance, compute_metrics(schedule)
    name = display_name(schedule)
    shape = f"p={instance.num_devices}, m={instance.num_microbatches}"
    if instance.chunks > 1:
        shape += f", v={instance.chunks} ({instance.placement_name()})"
    units = units_of(instance)
    memory = f"peak memory {units.with_memory(format_number(units.memory_value(metrics.max_peak_memory)))}"
    if instance.memory_limit is not None:
        memory += f"  ·  {limit_text(instance).removeprefix('memory ')}"
    objective_name = "makespan" if objective == "makespan" else "max span"
    return (
        f"{name}  ·  {shape}\n"
        f"{objective_name} {units.with_time(format_number(metrics.objective(objective)))}  ·  "
        f"bubble rate {format_percent(metrics.bubble_rate_for(objective))}  ·  {memory}"
    )


def schedule_figure(schedule: Schedule, objective: Objective = "makespan") -> Figure:
    """The Gantt chart and memory panels of a schedule, as a matplotlib figure."""
    instance = schedule.instance
    p = instance.num_devices
    # About 0.22 inch for the shortest op, room for a two-digit microbatch number, within 10 to 26 inches.
    durations = [op.end - op.start for op in schedule.ops if op.end > op.start]
    span = max((op.end for op in schedule.ops), default=1.0) - min((op.start for op in schedule.ops), default=0.0)
    width = float(np.clip(0.22 * span / min(durations, default=span or 1.0), 10.0, 26.0))
    gantt_height = 0.42 * p
    memory_height = 0.55 if p <= 8 else 0.4
    figure = Figure(figsize=(width, 1.3 + gantt_height + 0.45 + memory_height * p + 0.5), dpi=DPI)
    grid = figure.add_gridspec(
        p + 2, 1, height_ratios=[gantt_height, 0.45] + [memory_height] * p, hspace=0.12, left=0.07, right=0.985
    )
    gantt = figure.add_subplot(grid[0])
    figure.add_subplot(grid[1]).set_visible(False)
    memory_axes = [figure.add_subplot(grid[2 + d], sharex=gantt) for d in range(p)]
    figure.subplots_adjust(top=1 - 1.1 / figure.get_figheight(), bottom=0.45 / figure.get_figheight())

    origin = min((op.start for op in schedule.ops), default=0.0)
    end = max((op.end for op in schedule.ops), default=1.0)
    _draw_gantt(gantt, schedule, origin, end, width * (0.985 - 0.07) * DPI)
    _draw_memory(memory_axes, schedule, origin, end)
    figure.suptitle(
        schedule_title(schedule, objective),
        fontsize=12,
        x=0.07,
        y=1 - 0.12 / figure.get_figheight(),
        ha="left",
        va="top",
    )
    return figure


def _draw_gantt(axes: Any, schedule: Schedule, origin: float, end: float, axes_pixels: float) -> None:
    instance = schedule.instance
    p, v = instance.num_devices, instance.chunks
    chunk_of = {s: instance.stages_of(instance.placement[s]).index(s) for s in range(instance.num_stages)}
    pixels_per_time = axes_pixels / max(end - origin, 1e-12)
    font_size = 8 if p <= 8 else 7
    for device in range(p):
        axes.broken_barh([(0, end - origin)], (device - 0.4, 0.8), facecolors=IDLE_COLOUR, edgecolor="none")
    groups: dict[tuple[str, int], list[tuple[float, float, int]]] = {}
    for op in schedule.ops:
        groups.setdefault((op.kind, chunk_of[op.stage]), []).append((op.start - origin, op.end - op.start, op.device))
    for (kind, chunk), boxes in sorted(groups.items()):
        rgb = shade(KIND_COLOURS[kind], chunk, v)
        for device in range(p):
            bars = [(start, length) for start, length, d in boxes if d == device]
            if bars:
                axes.broken_barh(bars, (device - 0.4, 0.8), facecolors=rgb, edgecolor="white", linewidth=0.6)
    for op in schedule.ops:
        label = str(op.microbatch)
        box_pixels = (op.end - op.start) * pixels_per_time
        if box_pixels >= font_size * 0.62 * len(label) * DPI / 72 + 3:
            rgb = shade(KIND_COLOURS[op.kind], chunk_of[op.stage], v)
            axes.text(
                (op.start + op.end) / 2 - origin,
                op.device,
                label,
                ha="center",
                va="center",
                fontsize=font_size,
                color=_text_colour(rgb),
            )
    axes.set_ylim(p - 0.5, -0.5)
    axes.set_yticks(range(p), [f"GPU {d}" for d in range(p)])
    axes.set_xlim(0, end - origin)
    axes.tick_params(axis="y", length=0)
    for side in ("top", "right", "left"):
        axes.spines[side].set_visible(False)
    names = kind_names(schedule.split_backward)
    # One legend column per kind, one row per chunk (matplotlib fills legends column by column).
    kinds = [kind for kind in ("F", "B", "W") if kind in {k for k, _ in groups}]
    handles = []
    for kind in kinds:
        for chunk in range(v):
            label = f"{kind}, chunk {chunk}" if chunk else f"{kind}: {names[kind]}" + (", chunk 0" if v > 1 else "")
            handles.append(Patch(facecolor=shade(KIND_COLOURS[kind], chunk, v), label=label))
    handles.append(Patch(facecolor=IDLE_COLOUR, label="idle"))
    handles += [Patch(visible=False, label=" ")] * (v - 1)
    axes.legend(
        handles=handles,
        loc="lower left",
        bbox_to_anchor=(0, 1.0),
        ncol=len(kinds) + 1,
        frameon=False,
        fontsize=8,
        handlelength=1.2,
        columnspacing=1.0,
    )


def _draw_memory(axes_list: list[Any], schedule: Schedule, origin: float, end: float) -> None:
    instance = schedule.instance
    units = units_of(instance)
    profiles = memory_profiles(schedule)
    limits = [units.memory_value(limit) for limit in instance.memory_limit or ()]
    top = max([units.memory_value(profile.peak) for profile in profiles] + limits + [0.0]) * 1.15 or 1.0
    for device, (axes, profile) in enumerate(zip(axes_list, profiles, strict=True)):
        # Several events at one time: draw only the level after the last of them (no zero-width spikes).
        last_at_time = np.append(np.diff(profile.times) > 0, True)
        times = np.concatenate([[0.0], profile.times[last_at_time] - origin, [end - origin]])
        levels = units.memory_value(profile.memory[last_at_time])
        memory = np.concatenate([[0.0], levels, [levels[-1]]])
        axes.fill_between(times, memory, step="post", color=MEMORY_COLOUR, alpha=0.25, linewidth=0)
        axes.step(times, memory, where="post", color=MEMORY_COLOUR, linewidth=1.0)
        if limits:
            axes.axhline(limits[device], color=LIMIT_COLOUR, linestyle="--", linewidth=1.0)
        peak = units.memory_value(profile.peak)
        axes.set_ylim(0, top)
        axes.set_yticks([0, peak] if peak > 0 else [0])
        axes.set_yticklabels(["0", format_number(peak)][: 2 if peak > 0 else 1], fontsize=7)
        axes.set_ylabel(f"GPU {device}", rotation=0, ha="right", va="center", fontsize=8)
        for side in ("top", "right"):
            axes.spines[side].set_visible(False)
        if device < len(axes_list) - 1:
            axes.tick_params(axis="x", labelbottom=False)
    title = units.memory_header("activation memory held per device")
    if instance.memory_limit is not None:
        title += f"; dashed: {limit_text(instance).removeprefix('memory ')}"
    axes_list[0].set_title(title, fontsize=9, loc="left")
    axes_list[-1].set_xlabel(units.time_header("time"))


def save_figure(figure: Figure, path: str | Path) -> Path:
    """Write a figure in the format of the path's extension, atomically."""
    fmt = picture_format(path)
    return write_atomically(path, lambda temporary: figure.savefig(temporary, format=fmt, dpi=DPI))


def plot_schedule(schedule: Schedule, path: str | Path, objective: Objective = "makespan") -> Path:
    """Draw a schedule (Gantt chart and memory panels) to a PNG, SVG or PDF file."""
    picture_format(path)
    return save_figure(schedule_figure(schedule, objective), path)


def pareto_figure(
    points: Sequence[tuple[float, Any]],
    heuristics: Sequence[tuple[str, float, float]],
    objective: Objective = "makespan",
    reference: float | None = None,
    title: str = "",
    open_ended: bool = False,
    units: Units = Units(),  # noqa: B008 (a frozen dataclass: the default is never changed)
) -> Figure:
    """Objective against memory limit: the solver's frontier and each heuristic as a labelled point.

    `points` are (limit, SolveResult); a proven optimum is a filled dot, a feasible value a hollow
    one with a bar down to its bound, an infeasible limit a cross on the axis. `reference` (the 1F1B
    peak) adds a top axis in multiples of it. `open_ended` (a frontier of breakpoints) carries the last
    point's value on to the right edge: more memory than the last breakpoint buys no more speed. Memory
    amounts (the limits, the heuristics' peaks, `reference`) are in the instance's unit and drawn in
    `units`' shown one.
    """
    figure = Figure(figsize=(9, 5.5), dpi=DPI)
    axes = figure.add_subplot()
    shown = units.memory_factor
    points = [(limit * shown, result) for limit, result in points]
    heuristics = [(name, peak * shown, value) for name, peak, value in heuristics]
    reference = None if reference is None else reference * shown
    solved = [(limit, result) for limit, result in points if result.value is not None]
    if solved:
        limits = [limit for limit, _ in solved]
        values = [result.value for _, result in solved]
        if open_ended:
            right = max([limits[-1] * 1.1, *(peak for _, peak, _ in heuristics)])
            limits, values = [*limits, right], [*values, values[-1]]
        axes.step(limits, values, where="post", color=KIND_COLOURS["F"], linewidth=1.2, alpha=0.6)
        for limit, result in solved:
            optimal = result.status == "optimal"
            axes.plot(
                limit,
                result.value,
                "o",
                color=KIND_COLOURS["F"],
                markerfacecolor=KIND_COLOURS["F"] if optimal else "white",
                markersize=6,
            )
            if not optimal and result.bound is not None:
                axes.vlines(limit, result.bound, result.value, color=KIND_COLOURS["F"], linewidth=1.0)
    infeasible = [limit for limit, result in points if result.status == "infeasible"]
    for limit in infeasible:
        axes.plot(limit, 0, "x", color=LIMIT_COLOUR, markersize=7, clip_on=False)
    # Heuristics at the same point share one marker and one label.
    labels: dict[tuple[float, float], list[str]] = {}
    for name, peak, value in heuristics:
        labels.setdefault((peak, value), []).append(name)
    for (peak, value), names in labels.items():
        axes.plot(peak, value, "D", color=KIND_COLOURS["B"], markersize=6)
        axes.annotate(", ".join(names), (peak, value), textcoords="offset points", xytext=(5, 5), fontsize=9)
    all_values = [r.value for _, r in solved] + [value for _, _, value in heuristics]
    if all_values:
        axes.set_ylim(0, max(all_values) * 1.1)
    objective_name = "makespan" if objective == "makespan" else "max span"
    axes.set_xlabel(
        units.memory_header("memory limit per device")
        if units.memory
        else "memory limit per device (activation memory units)"
    )
    axes.set_ylabel(units.time_header(objective_name))
    # A legend entry for each kind of mark the plot holds.
    statuses = {result.status for _, result in solved}
    entries = [
        ("optimal" in statuses, "o", {"color": KIND_COLOURS["F"]}, "solver: optimal"),
        (
            bool(statuses - {"optimal"}),
            "o",
            {"color": KIND_COLOURS["F"], "markerfacecolor": "white"},
            "solver: feasible, bar to bound",
        ),
        (bool(heuristics), "D", {"color": KIND_COLOURS["B"]}, "handwritten schedule (at its peak memory)"),
        (bool(infeasible), "x", {"color": LIMIT_COLOUR}, "no schedule fits"),
    ]
    handles = [axes.plot([], [], marker, label=label, **style)[0] for shown, marker, style, label in entries if shown]
    axes.legend(handles=handles, loc="upper right", fontsize=8)
    axes.grid(alpha=0.3)
    for side in ("top", "right"):
        axes.spines[side].set_visible(False)
    if reference:
        top = axes.secondary_xaxis("top", functions=(lambda x: x / reference, lambda x: x * reference))
        top.set_xlabel("memory limit (x of the 1F1B peak)")
    axes.set_title(title or f"{objective_name} against memory limit", fontsize=11)
    figure.tight_layout()
    return figure
