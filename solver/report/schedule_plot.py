"""A schedule's picture: its Gantt chart with memory panels.

The Gantt chart has one row per device (device 0 on top), an op's box in its kind's colour, later
chunks on a device in lighter shades; idle time is the grey background, so p2p latency shows as a
grey gap. An overlapped pair is one outlined box, its F in the upper half and its B in the lower
(a W inside the pair is part of that B). Every op's microbatch number is written in or on its box (`labels.py` places them). Below
it, one memory-over-time panel per device, with the memory limit drawn. A window (START, END) draws
only that time range of both. Without one, a schedule too long to draw every op readably (its
shortest op a sliver, under `SLIVER_INCHES`, in the widest picture) shows its first part, as much
as draws it `READABLE_OP_INCHES` wide (`readable_window`); `ALL` draws all of it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from pipesat.models import KINDS, InputError, Kind, Objective, OpKey, Schedule
from pipesat.models.ops import TRANSFER_KINDS
from pipesat.solver.evaluate.metrics import compute_metrics, memory_profiles
from pipesat.solver.report.figures import (
    DPI,
    IDLE_COLOUR,
    KIND_COLOURS,
    LIMIT_COLOUR,
    MEMORY_COLOUR,
    fit_text,
    new_figure,
    picture_format,
    save_figure,
    shade,
    text_colour,
)
from pipesat.solver.report.labels import CHIP_STYLE, Box, LabelPlan, label_plan
from pipesat.solver.report.tables import display_name, format_number, format_percent
from pipesat.solver.report.text import limit_text
from pipesat.solver.report.units import units_of

# The margins left and right of the Gantt chart and memory panels (the device names, the ticks).
LEFT_INCHES, RIGHT_INCHES = 0.85, 0.2
# A device's row is ROW_INCHES high, its bar BAR_HEIGHT of that; taller when chips need more lanes.
ROW_INCHES = 0.42
BAR_HEIGHT = 0.8
LANE_INCHES = 0.095
MEMORY_FONT = 7.0
# The host links' lane (only with transfers): a row per device, offloads over reloads.
LINK_ROW_INCHES = 0.3
LINK_COLOURS = {Kind.O: "#7f5a3c", Kind.R: "#3c6e7f"}
LINK_NAMES = {Kind.O: "offload (device to host)", Kind.R: "reload (host to device)"}

# The parts of a device's bar an overlapped pair's F and B fill, from the top.
PAIR_BANDS = ((0.0, 0.5), (0.5, 1.0))
PAIR_OUTLINE = "#333333"

Window = tuple[float, float]
"""A time range (START, END) from the schedule's first start, in the instance's time unit."""

ALL: Window = (0.0, math.inf)
"""The window of the whole schedule, however long."""

# The widest picture (inches); the width an op needs to read as a box, a two-digit label in it at the
# label's font; and below which it is a sliver (the whole schedule is then not the default).
MAX_WIDTH_INCHES = 26.0
READABLE_OP_INCHES = 0.11
SLIVER_INCHES = 0.055


def kind_names(split_backward: bool) -> dict[Kind, str]:
    backward = "backward (inputs)" if split_backward else "backward"
    return {Kind.F: "forward", Kind.B: backward, Kind.W: "weight gradient"}


def schedule_title(schedule: Schedule, objective: Objective = Objective.MAKESPAN, window: Window | None = None) -> str:
    """Two title lines: what the schedule is (and the time `window` shown), then its objective, bubble
    rate and peak memory."""
    instance, metrics = schedule.instance, compute_metrics(schedule)
    name = display_name(schedule)
    shape = f"p={instance.num_devices}, m={instance.num_microbatches}"
    if instance.chunks > 1:
        shape += f", v={instance.chunks} ({instance.placement_name()})"
    units = units_of(instance)
    if window is not None:
        shown = f"{format_number(window[0])} to {format_number(window[1])}"
        shape += f"  ·  time {units.with_time(shown)} of {units.with_time(format_number(metrics.makespan))}"
    memory = f"peak memory {units.with_memory(format_number(units.memory_value(metrics.max_peak_memory)))}"
    if instance.memory_limit is not None:
        memory += f"  ·  {limit_text(instance).removeprefix('memory ')}"
    objective_name = "makespan" if objective == Objective.MAKESPAN else "max span"
    return (
        f"{name}  ·  {shape}\n"
        f"{objective_name} {units.with_time(format_number(metrics.objective(objective)))}  ·  "
        f"bubble rate {format_percent(metrics.bubble_rate_for(objective))}  ·  {memory}"
    )


def shown_window(schedule: Schedule, window: Window | None) -> Window:
    """The time range a picture shows, from the schedule's first start: all of it, or `window` cut
    to the schedule's end (an `InputError` when nothing of the schedule is left in it)."""
    length = _end(schedule) - _origin(schedule)
    if window is None:
        return (0.0, length)
    start, end = window
    if start >= length:
        raise InputError(
            f"the window {format_number(start)}:{format_number(end)} starts after the schedule ends "
            f"(at {format_number(length)}); give a START below that"
        )
    return (start, min(end, length))


def readable_window(schedule: Schedule) -> Window | None:
    """The first part of the schedule whose shortest op is `READABLE_OP_INCHES` wide in the widest
    picture, when the whole would draw it as a sliver (under `SLIVER_INCHES`); None otherwise (a
    picture without a window draws this)."""
    shortest = min((op.end - op.start for op in schedule.ops if op.end > op.start), default=0.0)
    length = _end(schedule) - _origin(schedule)
    gantt_inches = MAX_WIDTH_INCHES - LEFT_INCHES - RIGHT_INCHES
    if shortest <= 0 or shortest / length * gantt_inches >= SLIVER_INCHES:
        return None
    readable = shortest * gantt_inches / READABLE_OP_INCHES
    step = 10.0 ** (math.floor(math.log10(readable)) - 1)  # a round end: two significant digits, down
    return (0.0, math.floor(readable / step) * step)


def _origin(schedule: Schedule) -> float:
    return min((op.start for op in schedule.ops), default=0.0)


def _end(schedule: Schedule) -> float:
    return max((op.end for op in schedule.ops), default=1.0)


def _boxes(schedule: Schedule, shown: Window) -> list[Box]:
    """The ops that reach into the shown time range (a W inside a pair is drawn as part of its B)."""
    instance, origin = schedule.instance, _origin(schedule)
    chunk_of = {s: instance.stages_of(instance.placement[s]).index(s) for s in range(instance.num_stages)}
    bands: dict[OpKey, tuple[float, float] | None] = {}
    for pair in schedule.pairs:
        bands[pair.forward], bands[pair.backward] = PAIR_BANDS
        bands.update((key, None) for key in pair.op_keys()[2:])
    boxes = []
    for op in schedule.ops:
        band = bands.get(op.key, (0.0, 1.0))
        start, end = max(op.start - origin, shown[0]), min(op.end - origin, shown[1])
        if end > start and band is not None:
            centre = (op.start + op.end) / 2 - origin
            boxes.append(Box(op, chunk_of[op.stage], start, end - start, centre, op.end - op.start, band))
    return boxes


def _figure_width(boxes: Sequence[Box], shown: Window) -> float:
    """Inches: about 0.22 inch for the shortest op shown, room for a two-digit number, within 10 to 26."""
    span = shown[1] - shown[0]
    return float(np.clip(0.22 * span / min((box.duration for box in boxes), default=span), 10.0, MAX_WIDTH_INCHES))


def schedule_figure(
    schedule: Schedule, objective: Objective = Objective.MAKESPAN, window: Window | None = None
) -> Figure:
    """The Gantt chart and memory panels of a schedule, as a matplotlib figure; `window` (START, END
    in time from the schedule's start) zooms both to that time range (None: `readable_window`; `ALL`:
    the whole schedule)."""
    p = schedule.instance.num_devices
    window = readable_window(schedule) if window is None else window
    shown = shown_window(schedule, window)
    boxes = _boxes(schedule, shown)
    links = p * LINK_ROW_INCHES if schedule.transfers else 0.0
    width = _figure_width(boxes, shown)
    gantt_pixels = (width - LEFT_INCHES - RIGHT_INCHES) * DPI
    plan = label_plan(boxes, gantt_pixels / (shown[1] - shown[0]), 8.0 if p <= 8 else 7.0)
    gantt_height = p * max(ROW_INCHES, len(plan.lanes) * LANE_INCHES / BAR_HEIGHT)
    memory_height = 0.55 if p <= 8 else 0.4
    body = gantt_height + links + 0.45 + memory_height * p + 0.5
    figure = new_figure(width, body + 1.3)
    left, right = LEFT_INCHES / width, 1 - RIGHT_INCHES / width
    title = figure.suptitle(
        schedule_title(schedule, objective, None if window is None or shown == shown_window(schedule, ALL) else shown),
        fontsize=12,
        x=left,
        ha="left",
        va="top",
    )
    fit_text(title, (width - LEFT_INCHES - RIGHT_INCHES / 2) * DPI)
    # The title, a gap, and the legend (a row per chunk).
    top = title.get_window_extent().height / DPI + 0.15 + 0.3 + 0.16 * schedule.instance.chunks
    figure.set_size_inches(width, body + top)
    title.set_y(1 - 0.12 / figure.get_figheight())
    link_rows = [0.45, links] if links else []
    grid = figure.add_gridspec(
        p + 2 + len(link_rows),
        1,
        height_ratios=[gantt_height, *link_rows, 0.45] + [memory_height] * p,
        hspace=0.12,
        left=left,
        right=right,
        top=1 - top / figure.get_figheight(),
        bottom=0.45 / figure.get_figheight(),
    )
    gantt = figure.add_subplot(grid[0])
    if link_rows:
        figure.add_subplot(grid[1]).set_visible(False)
        _draw_links(figure.add_subplot(grid[2], sharex=gantt), schedule, shown)
    figure.add_subplot(grid[1 + len(link_rows)]).set_visible(False)
    memory_axes = [figure.add_subplot(grid[2 + len(link_rows) + d], sharex=gantt) for d in range(p)]
    _draw_gantt(gantt, schedule, boxes, shown, plan)
    _draw_memory(memory_axes, schedule)
    return figure


def _draw_gantt(axes: Any, schedule: Schedule, boxes: Sequence[Box], shown: Window, plan: LabelPlan) -> None:
    instance = schedule.instance
    p, v = instance.num_devices, instance.chunks
    for device in range(p):
        axes.broken_barh([shown], (device - BAR_HEIGHT / 2, BAR_HEIGHT), facecolors=IDLE_COLOUR, edgecolor="none")
    groups: dict[tuple[Kind, int, tuple[float, float]], list[Box]] = {}
    for box in boxes:
        groups.setdefault((box.op.kind, box.chunk, box.band), []).append(box)
    for (kind, chunk, band), members in sorted(groups.items()):
        rgb = shade(KIND_COLOURS[kind], chunk, v)
        top, height = BAR_HEIGHT * band[0], BAR_HEIGHT * (band[1] - band[0])
        for device in range(p):
            bars = [(box.start, box.length) for box in members if box.op.device == device]
            if bars:
                axes.broken_barh(
                    bars, (device - BAR_HEIGHT / 2 + top, height), facecolors=rgb, edgecolor="white", linewidth=0.6
                )
    for device in range(p):
        pairs = [(box.start, box.length) for box in boxes if box.op.device == device and box.band == PAIR_BANDS[0]]
        if pairs:
            axes.broken_barh(
                pairs, (device - BAR_HEIGHT / 2, BAR_HEIGHT), facecolors="none", edgecolor=PAIR_OUTLINE, linewidth=0.9
            )
    _draw_labels(axes, boxes, plan, v)
    axes.set_ylim(p - 0.5, -0.5)
    axes.set_yticks(range(p), [f"GPU {d}" for d in range(p)])
    axes.set_xlim(*shown)
    axes.tick_params(axis="y", length=0)
    for side in ("top", "right", "left"):
        axes.spines[side].set_visible(False)
    if plan.labelled.step > 1:
        axes.text(1.0, 1.02, plan.note(), transform=axes.transAxes, ha="right", fontsize=8)
    kinds = [kind for kind in KINDS if kind in {k for k, _, _ in groups}]
    _draw_legend(axes, kinds, v, kind_names(schedule.split_backward), schedule.has_pairs)


def _draw_links(axes: Any, schedule: Schedule, shown: Window) -> None:
    """The host links' lane (docs/offload.md): per device, its offloads (device to host) in the upper
    half of its row and its reloads (host to device) in the lower half, labelled by stage and microbatch
    where they fit."""
    p, origin = schedule.instance.num_devices, _origin(schedule)
    scale = (axes.get_window_extent().width or 1) / (shown[1] - shown[0])
    for device in range(p):
        axes.broken_barh([shown], (device - BAR_HEIGHT / 2, BAR_HEIGHT), facecolors=IDLE_COLOUR, edgecolor="none")
    for band, kind in enumerate(TRANSFER_KINDS):
        top = BAR_HEIGHT / 2 * band
        for device in range(p):
            ops = [op for op in schedule.transfers if op.kind == kind and op.device == device]
            if not ops:
                continue
            device_top = device - BAR_HEIGHT / 2 + top
            bars = [(op.start - origin, op.end - op.start) for op in ops]
            axes.broken_barh(
                bars, (device_top, BAR_HEIGHT / 2), facecolors=LINK_COLOURS[kind], edgecolor="white", linewidth=0.5
            )
            for op in ops:
                if (op.end - op.start) * scale > 7 * (len(f"{op.stage}.{op.microbatch}") + 1):
                    centre = (op.start + op.end) / 2 - origin
                    axes.text(
                        centre,
                        device_top + BAR_HEIGHT / 4,
                        f"{op.stage}.{op.microbatch}",
                        ha="center",
                        va="center",
                        fontsize=6.5,
                        color="white",
                        clip_on=True,
                    )
    axes.set_ylim(p - 0.5, -0.5)
    axes.set_yticks(range(p), [f"GPU {d} link" for d in range(p)])
    axes.tick_params(axis="y", length=0, labelsize=8)
    axes.tick_params(axis="x", labelbottom=False)
    for side in ("top", "right", "left"):
        axes.spines[side].set_visible(False)
    handles = [Patch(facecolor=LINK_COLOURS[kind], label=name) for kind, name in LINK_NAMES.items()]
    axes.legend(
        handles=handles,
        loc="lower left",
        bbox_to_anchor=(0.0, 1.0),
        ncol=2,
        fontsize=7,
        frameon=False,
        borderaxespad=0.1,
    )


def _draw_labels(axes: Any, boxes: Sequence[Box], plan: LabelPlan, chunks: int) -> None:
    for chip in plan.chips:
        y = chip.device - BAR_HEIGHT / 2 + BAR_HEIGHT * (chip.lane + 0.5) / len(plan.lanes)
        axes.text(
            chip.centre, y, chip.label, ha="center", va="center", fontsize=plan.font, bbox=CHIP_STYLE, clip_on=True
        )
    if plan.chips:
        return
    for box in boxes:
        colour = text_colour(shade(KIND_COLOURS[box.op.kind], box.chunk, chunks))
        axes.text(
            box.centre,
            box.op.device - BAR_HEIGHT / 2 + BAR_HEIGHT * (box.band[0] + box.band[1]) / 2,
            box.label,
            ha="center",
            va="center",
            fontsize=plan.font,
            color=colour,
            clip_on=True,
        )


def _draw_legend(axes: Any, kinds: Sequence[Kind], chunks: int, names: dict[Kind, str], pairs: bool = False) -> None:
    """One legend column per kind, one row per chunk (matplotlib fills legends column by column), and
    the pair's outline when there are pairs."""
    handles = []
    for kind in kinds:
        for chunk in range(chunks):
            first = f"{kind}: {names[kind]}" + (", chunk 0" if chunks > 1 else "")
            label = f"{kind}, chunk {chunk}" if chunk else first
            handles.append(Patch(facecolor=shade(KIND_COLOURS[kind], chunk, chunks), label=label))
    handles.append(Patch(facecolor=IDLE_COLOUR, label="idle"))
    handles += [Patch(visible=False, label=" ")] * (chunks - 1)
    if pairs:
        handles.append(Patch(facecolor="none", edgecolor=PAIR_OUTLINE, label="overlapped pair: F above, B below"))
        handles += [Patch(visible=False, label=" ")] * (chunks - 1)
    axes.legend(
        handles=handles,
        loc="lower left",
        bbox_to_anchor=(0, 1.0),
        ncol=len(kinds) + 1 + pairs,
        frameon=False,
        fontsize=8,
        handlelength=1.2,
        columnspacing=1.0,
    )


def memory_ticks(peak: float, top: float, panel_pixels: float, font: float) -> list[float]:
    """The memory panel's ticks: 0 and the peak, or only the peak when the two labels would touch."""
    if peak <= 0:
        return [0.0]
    if peak / top * panel_pixels < 1.2 * font * DPI / 72:
        return [peak]
    return [0.0, peak]


def tick_text(amount: float) -> str:
    """A memory tick's label: three significant digits, whole numbers from 100."""
    return f"{amount:.0f}" if abs(amount) >= 100 else f"{amount:.3g}"


def _draw_memory(axes_list: list[Any], schedule: Schedule) -> None:
    instance = schedule.instance
    units = units_of(instance)
    profiles = memory_profiles(schedule)
    limits = [units.memory_value(limit) for limit in instance.memory_limit or ()]
    top = max([units.memory_value(profile.peak) for profile in profiles] + limits + [0.0]) * 1.15 or 1.0
    origin, end = _origin(schedule), _end(schedule)
    for device, (axes, profile) in enumerate(zip(axes_list, profiles, strict=True)):
        # Several events at one time: draw only the level after the last of them (no zero-width spikes).
        last_at_time = np.append(np.diff(profile.times) > 0, True)
        times = np.concatenate([[0.0], profile.times[last_at_time] - origin, [end - origin]])
        levels = profile.memory[last_at_time] * units.memory_factor  # in the shown unit
        memory = np.concatenate([[0.0], levels, [levels[-1]]])
        axes.fill_between(times, memory, step="post", color=MEMORY_COLOUR, alpha=0.25, linewidth=0)
        axes.step(times, memory, where="post", color=MEMORY_COLOUR, linewidth=1.0)
        if limits:
            axes.axhline(limits[device], color=LIMIT_COLOUR, linestyle="--", linewidth=1.0)
        axes.set_ylim(0, top)
        ticks = memory_ticks(units.memory_value(profile.peak), top, axes.get_window_extent().height, MEMORY_FONT)
        axes.set_yticks(ticks, [tick_text(tick) for tick in ticks], fontsize=MEMORY_FONT)
        axes.set_ylabel(f"GPU {device}", rotation=0, ha="right", va="center", fontsize=8)
        for side in ("top", "right"):
            axes.spines[side].set_visible(False)
        if device < len(axes_list) - 1:
            axes.tick_params(axis="x", labelbottom=False)
    title = units.memory_header("activation memory held per device")
    if limits:
        title += "; dashed: " + (
            "each device's limit" if len(set(limits)) > 1 else limit_text(instance).removeprefix("memory ")
        )
    fit_text(axes_list[0].set_title(title, fontsize=9, loc="left"), axes_list[0].get_window_extent().width)
    axes_list[-1].set_xlabel(units.time_header("time"))


def plot_schedule(
    schedule: Schedule, path: str | Path, objective: Objective = Objective.MAKESPAN, window: Window | None = None
) -> Path:
    """Draw a schedule: its Gantt chart and memory panels, to a picture file.

    Parameters
    ----------
    schedule
        A valid schedule (`validate` it first).
    path
        The picture file; its extension picks the format (.png, .svg, .pdf).
    objective
        The objective the title reports, `makespan` or `span`.
    window
        The time range (START, END) from the schedule's start to draw; None: the whole schedule, or
        its first part when the whole would draw its ops as slivers (`readable_window`); `ALL`: all
        of it.

    Returns
    -------
    Path
        The file written.

    Raises
    ------
    InputError
        An extension that is not a picture format, or a window that starts after the schedule ends.
    """
    picture_format(path)
    return save_figure(schedule_figure(schedule, objective, window), path)
