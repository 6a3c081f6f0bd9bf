"""Pictures: a schedule's Gantt chart with memory panels, and the Pareto plot of a memory sweep.

The Gantt chart has one row per device (device 0 on top). F, B and W have distinct Okabe-Ito
colours (safe for colour-blind readers); later chunks on a device are lighter shades of the same
colour; idle time is the grey background, so p2p latency shows as a grey gap. Every op's microbatch
number is written in its box, in a smaller font where it must be; where even the smallest does not
fit, numbers go on white chips in a lane per kind and chunk, for every k-th microbatch, and a note
says which. Below it, one memory-over-time panel per device, with the memory limit drawn. A window
(START, END) draws only that time range of both. Titles wrap to fit the figure. The file format
(PNG, SVG, PDF) follows the file's extension.
"""

from __future__ import annotations

import itertools
import math
import textwrap
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import to_rgb
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from matplotlib.text import Text
from matplotlib.transforms import Bbox

from models import InputError, Objective, Op, Schedule
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
KINDS = ("F", "B", "W")
# The margins left and right of the Gantt chart and memory panels (the device names, the ticks).
LEFT_INCHES, RIGHT_INCHES = 0.85, 0.2
# A device's row is ROW_INCHES high, its bar BAR_HEIGHT of that; taller when chips need more lanes.
ROW_INCHES = 0.42
BAR_HEIGHT = 0.8
LANE_INCHES = 0.095
# Microbatch numbers: DejaVu Sans digits are 0.636 em wide; a number keeps LABEL_PAD pixels free in
# its box; MIN_FONT points is the smallest drawn. Numbers that spill over their box sit on a chip.
DIGIT_EM = 0.64
LABEL_PAD = 3.0
MIN_FONT = 5.0
CHIP_PAD = 0.15
CHIP_STYLE = {"boxstyle": f"round,pad={CHIP_PAD}", "facecolor": "white", "edgecolor": "none", "alpha": 0.85}
MEMORY_FONT = 7.0
# Titles wrap at their separators, to no fewer than MIN_WRAP characters a line.
SEPARATOR = "  ·  "
MIN_WRAP = 20
# Where a Pareto point's label may go (points from the point, nearest first), and a marker's size.
LABEL_OFFSETS = ((5, 3), (5, -3), (-5, 3), (-5, -3), (5, 13), (5, -13), (-5, 13), (-5, -13), (5, 23), (-5, 23))
MARK_PIXELS = 10.0

Window = tuple[float, float]
"""A time range (START, END) from the schedule's first start, in the instance's time unit."""


def picture_format(path: str | Path) -> str:
    """The picture format of a file name, or an `InputError` saying which suffixes work."""
    suffix = Path(path).suffix.lower()
    if suffix not in PICTURE_SUFFIXES:
        raise InputError(f"{path}: cannot draw a {suffix or 'suffix-less'} file; name it .png, .svg or .pdf")
    return suffix[1:]


def new_figure(width: float, height: float) -> Figure:
    """A figure (inches) on an Agg canvas, whose one renderer measures text while the figure is laid out
    (a bare figure makes a new full-size renderer for each measurement)."""
    figure = Figure(figsize=(width, height), dpi=DPI)
    FigureCanvasAgg(figure)
    return figure


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


def schedule_title(schedule: Schedule, objective: Objective = "makespan", window: Window | None = None) -> str:
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
    objective_name = "makespan" if objective == "makespan" else "max span"
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


def _origin(schedule: Schedule) -> float:
    return min((op.start for op in schedule.ops), default=0.0)


def _end(schedule: Schedule) -> float:
    return max((op.end for op in schedule.ops), default=1.0)


class _Box(NamedTuple):
    """An op as drawn: its bar's start and length on the time axis, cut to the window shown, and the
    whole op's centre and duration, which its label is centred on and fitted to (a label of an op the
    window cuts is cut with it)."""

    op: Op
    chunk: int
    start: float
    length: float
    centre: float
    duration: float

    @property
    def label(self) -> str:
        return str(self.op.microbatch)


def _boxes(schedule: Schedule, shown: Window) -> list[_Box]:
    """The ops that reach into the shown time range."""
    instance, origin = schedule.instance, _origin(schedule)
    chunk_of = {s: instance.stages_of(instance.placement[s]).index(s) for s in range(instance.num_stages)}
    boxes = []
    for op in schedule.ops:
        start, end = max(op.start - origin, shown[0]), min(op.end - origin, shown[1])
        if end > start:
            centre = (op.start + op.end) / 2 - origin
            boxes.append(_Box(op, chunk_of[op.stage], start, end - start, centre, op.end - op.start))
    return boxes


def _figure_width(boxes: Sequence[_Box], shown: Window) -> float:
    """Inches: about 0.22 inch for the shortest op shown, room for a two-digit number, within 10 to 26."""
    span = shown[1] - shown[0]
    return float(np.clip(0.22 * span / min((box.duration for box in boxes), default=span), 10.0, 26.0))


def schedule_figure(schedule: Schedule, objective: Objective = "makespan", window: Window | None = None) -> Figure:
    """The Gantt chart and memory panels of a schedule, as a matplotlib figure; `window` (START, END
    in time from the schedule's start) zooms both to that time range."""
    p = schedule.instance.num_devices
    shown = shown_window(schedule, window)
    boxes = _boxes(schedule, shown)
    width = _figure_width(boxes, shown)
    gantt_pixels = (width - LEFT_INCHES - RIGHT_INCHES) * DPI
    plan = label_plan(boxes, gantt_pixels / (shown[1] - shown[0]), 8.0 if p <= 8 else 7.0)
    gantt_height = p * max(ROW_INCHES, len(plan.lanes) * LANE_INCHES / BAR_HEIGHT)
    memory_height = 0.55 if p <= 8 else 0.4
    body = gantt_height + 0.45 + memory_height * p + 0.5
    figure = new_figure(width, body + 1.3)
    left, right = LEFT_INCHES / width, 1 - RIGHT_INCHES / width
    title = figure.suptitle(schedule_title(schedule, objective, None if window is None else shown), fontsize=12, x=left, ha="left", va="top")
    fit_text(title, (width - LEFT_INCHES - RIGHT_INCHES / 2) * DPI)
    # The title, a gap, and the legend (a row per chunk).
    top = title.get_window_extent().height / DPI + 0.15 + 0.3 + 0.16 * schedule.instance.chunks
    figure.set_size_inches(width, body + top)
    title.set_y(1 - 0.12 / figure.get_figheight())
    grid = figure.add_gridspec(
        p + 2,
        1,
        height_ratios=[gantt_height, 0.45] + [memory_height] * p,
        hspace=0.12,
        left=left,
        right=right,
        top=1 - top / figure.get_figheight(),
        bottom=0.45 / figure.get_figheight(),
    )
    gantt = figure.add_subplot(grid[0])
    figure.add_subplot(grid[1]).set_visible(False)
    memory_axes = [figure.add_subplot(grid[2 + d], sharex=gantt) for d in range(p)]
    _draw_gantt(gantt, schedule, boxes, shown, plan)
    _draw_memory(memory_axes, schedule)
    return figure


def _draw_gantt(axes: Any, schedule: Schedule, boxes: Sequence[_Box], shown: Window, plan: LabelPlan) -> None:
    instance = schedule.instance
    p, v = instance.num_devices, instance.chunks
    for device in range(p):
        axes.broken_barh([shown], (device - BAR_HEIGHT / 2, BAR_HEIGHT), facecolors=IDLE_COLOUR, edgecolor="none")
    groups: dict[tuple[str, int], list[_Box]] = {}
    for box in boxes:
        groups.setdefault((box.op.kind, box.chunk), []).append(box)
    for (kind, chunk), members in sorted(groups.items()):
        rgb = shade(KIND_COLOURS[kind], chunk, v)
        for device in range(p):
            bars = [(box.start, box.length) for box in members if box.op.device == device]
            if bars:
                axes.broken_barh(
                    bars, (device - BAR_HEIGHT / 2, BAR_HEIGHT), facecolors=rgb, edgecolor="white", linewidth=0.6
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
    kinds = [kind for kind in KINDS if kind in {k for k, _ in groups}]
    _draw_legend(axes, kinds, v, kind_names(schedule.split_backward))


class Chip(NamedTuple):
    """A microbatch number on a white chip, in its row's `lane` (one per kind and chunk, F chunk 0 on
    top), centred on its box, or on a run of its boxes that lie side by side there."""

    device: int
    lane: int
    microbatch: int
    centre: float

    @property
    def label(self) -> str:
        return str(self.microbatch)


class LabelPlan(NamedTuple):
    """How the Gantt chart writes microbatch numbers: in `font` points inside each box; or, where they
    do not fit, as `chips` in `lanes` (kind, chunk) for the `labelled` microbatches (every step-th of
    those shown)."""

    font: float
    chips: Sequence[Chip] = ()
    labelled: range = range(0)
    lanes: Sequence[tuple[str, int]] = ()

    def note(self) -> str:
        """`labels: every 5th microbatch (0, 5, 10, …)`, for the figure."""
        examples = ", ".join(str(mb) for mb in self.labelled[:3]) + (", …" if len(self.labelled) > 3 else "")
        return f"labels: every {ordinal(self.labelled.step)} microbatch ({examples})"


def ordinal(n: int) -> str:
    """`1st`, `2nd`, `5th`, `12th`, `22nd`."""
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def label_plan(boxes: Sequence[_Box], pixels_per_time: float, font: float) -> LabelPlan:
    """The largest font from `font` down to MIN_FONT at which every number fits inside its box; when
    none does, MIN_FONT chips for the fewest microbatches (every 2nd, 5th, 10th, ...) that none of
    them touch another in its lane."""
    fitting = min(
        ((box.duration * pixels_per_time - LABEL_PAD) / _text_pixels(box.label, 1.0) for box in boxes),
        default=font,
    )
    if fitting >= MIN_FONT:
        return LabelPlan(min(font, math.floor(fitting * 2) / 2))
    lanes = sorted({(box.op.kind, box.chunk) for box in boxes}, key=lambda lane: (KINDS.index(lane[0]), lane[1]))
    first, last = min(box.op.microbatch for box in boxes), max(box.op.microbatch for box in boxes)
    labellings = (range(first, last + 1, step) for step in _label_steps())
    # One microbatch alone always has room (its chips side by side are one), so some labelling fits.
    chips, labelled = next(
        (chips, labelled)
        for labelled in labellings
        if (chips := _chips(boxes, labelled, lanes, pixels_per_time)) is not None
    )
    return LabelPlan(MIN_FONT, chips, labelled, lanes)


def _label_steps() -> Iterator[int]:
    """1, 2, 5, 10, 20, 50, 100, ..."""
    for power in itertools.count():
        for first in (1, 2, 5):
            yield first * 10**power


def _text_pixels(text: str, font: float) -> float:
    return font * DIGIT_EM * len(text) * DPI / 72


def _chips(
    boxes: Sequence[_Box], labelled: range, lanes: Sequence[tuple[str, int]], pixels_per_time: float
) -> list[Chip] | None:
    """The chips of the `labelled` microbatches, one for boxes of a microbatch side by side in a lane;
    None when two chips would touch."""
    rows: dict[tuple[int, int], list[Chip]] = {}
    for box in sorted(boxes, key=lambda box: box.centre):
        if box.op.microbatch not in labelled:
            continue
        lane = lanes.index((box.op.kind, box.chunk))
        row = rows.setdefault((box.op.device, lane), [])
        row.append(Chip(box.op.device, lane, box.op.microbatch, box.centre))
        while len(row) > 1 and _touch(row[-2], row[-1], pixels_per_time):
            if row[-2].microbatch != row[-1].microbatch:
                return None
            last = row.pop()
            row[-1] = last._replace(centre=(row[-1].centre + last.centre) / 2)
    return [chip for row in rows.values() for chip in row]


def _touch(left: Chip, right: Chip, pixels_per_time: float) -> bool:
    """Whether two chips in a lane (`left` first) touch."""
    widths = sum(_text_pixels(chip.label, MIN_FONT) + 2 * CHIP_PAD * MIN_FONT * DPI / 72 for chip in (left, right))
    return (right.centre - left.centre) * pixels_per_time < widths / 2 + 1


def _draw_labels(axes: Any, boxes: Sequence[_Box], plan: LabelPlan, chunks: int) -> None:
    for chip in plan.chips:
        y = chip.device - BAR_HEIGHT / 2 + BAR_HEIGHT * (chip.lane + 0.5) / len(plan.lanes)
        axes.text(
            chip.centre, y, chip.label, ha="center", va="center", fontsize=plan.font, bbox=CHIP_STYLE, clip_on=True
        )
    if plan.chips:
        return
    for box in boxes:
        colour = _text_colour(shade(KIND_COLOURS[box.op.kind], box.chunk, chunks))
        axes.text(
            box.centre,
            box.op.device,
            box.label,
            ha="center",
            va="center",
            fontsize=plan.font,
            color=colour,
            clip_on=True,
        )


def _draw_legend(axes: Any, kinds: Sequence[str], chunks: int, names: dict[str, str]) -> None:
    """One legend column per kind, one row per chunk (matplotlib fills legends column by column)."""
    handles = []
    for kind in kinds:
        for chunk in range(chunks):
            first = f"{kind}: {names[kind]}" + (", chunk 0" if chunks > 1 else "")
            label = f"{kind}, chunk {chunk}" if chunk else first
            handles.append(Patch(facecolor=shade(KIND_COLOURS[kind], chunk, chunks), label=label))
    handles.append(Patch(facecolor=IDLE_COLOUR, label="idle"))
    handles += [Patch(visible=False, label=" ")] * (chunks - 1)
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
        levels = units.memory_value(profile.memory[last_at_time])
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


def fit_text(text: Text, width: float) -> None:
    """Wrap `text` (at its `  ·  ` separators first, then between words) until it is at most `width`
    pixels wide; shrink its font when one word alone is wider."""
    lines = text.get_text().splitlines()
    columns = max((len(line) for line in lines), default=0)
    while text.get_window_extent().width > width and columns > MIN_WRAP:
        columns = max(MIN_WRAP, int(columns * min(0.95, width / text.get_window_extent().width)))
        text.set_text("\n".join(wrapped for line in lines for wrapped in _wrap(line, columns)))
    while text.get_window_extent().width > width and text.get_fontsize() > MIN_FONT:
        text.set_fontsize(text.get_fontsize() - 0.5)


def _wrap(line: str, columns: int) -> list[str]:
    """A line in lines of at most `columns` characters, broken at `  ·  ` where it can be."""
    parts = line.split(SEPARATOR)
    packed = [parts[0]]
    for part in parts[1:]:
        joined = packed[-1] + SEPARATOR + part
        packed[-1:] = [joined] if len(joined) <= columns else [packed[-1], part]
    return [wrapped for piece in packed for wrapped in textwrap.wrap(piece, columns, break_long_words=False)]


def save_figure(figure: Figure, path: str | Path) -> Path:
    """Write a figure in the format of the path's extension, atomically."""
    fmt = picture_format(path)
    return write_atomically(path, lambda temporary: figure.savefig(temporary, format=fmt, dpi=DPI))


def plot_schedule(
    schedule: Schedule, path: str | Path, objective: Objective = "makespan", window: Window | None = None
) -> Path:
    """Draw a schedule (Gantt chart and memory panels; only `window`'s time range if given) to a PNG,
    SVG or PDF file."""
    picture_format(path)
    return save_figure(schedule_figure(schedule, objective, window), path)


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
    figure = new_figure(9, 5.5)
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
    for peak, value in labels:
        axes.plot(peak, value, "D", color=KIND_COLOURS["B"], markersize=6)
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
    legend = figure.legend(handles=handles, loc="lower center", ncol=2, fontsize=8, frameon=False)
    axes.grid(alpha=0.3)
    for side in ("top", "right"):
        axes.spines[side].set_visible(False)
    if reference:
        top = axes.secondary_xaxis("top", functions=(lambda x: x / reference, lambda x: x * reference))
        top.set_xlabel("memory limit (x of the 1F1B peak)")
    axes.set_title(title or f"{objective_name} against memory limit", fontsize=11)
    fit_text(axes.title, 0.9 * figure.bbox.width)
    figure.tight_layout(rect=(0, legend.get_window_extent().height / figure.bbox.height, 1, 1))
    marks = [(limit, result.value) for limit, result in solved] + [(limit, 0.0) for limit in infeasible]
    place_labels(axes, [(peak, value, ", ".join(names)) for (peak, value), names in labels.items()], marks)
    return figure


def place_labels(axes: Any, points: Sequence[tuple[float, float, str]], others: Sequence[tuple[float, float]]) -> None:
    """Write each point's text beside it, at the first of LABEL_OFFSETS where it stays in the axes and
    clear of the other labels and of every mark (the points and `others`); the first offset when none is."""
    taken = [_mark_box(axes, x, y) for x, y in [*others, *((x, y) for x, y, _ in points)]]
    for x, y, text in sorted(points):
        label = axes.annotate(text, (x, y), xytext=LABEL_OFFSETS[0], textcoords="offset points", fontsize=9)
        fits = (offset for offset in LABEL_OFFSETS if _fits_at(label, offset, axes, taken))
        _offset(label, next(fits, LABEL_OFFSETS[0]))
        taken.append(label.get_window_extent())


def _offset(label: Any, offset: tuple[float, float]) -> None:
    """Put an annotation's text `offset` points from its point, on that side of it."""
    label.xyann = offset
    label.set_horizontalalignment("left" if offset[0] >= 0 else "right")
    label.set_verticalalignment("bottom" if offset[1] >= 0 else "top")


def _fits_at(label: Any, offset: tuple[float, float], axes: Any, taken: Sequence[Bbox]) -> bool:
    """Moves the label to `offset`: whether it is inside the axes there and clear of every box `taken`."""
    _offset(label, offset)
    box = label.get_window_extent()
    inside = axes.bbox.x0 <= box.x0 and box.x1 <= axes.bbox.x1 and axes.bbox.y0 <= box.y0 and box.y1 <= axes.bbox.y1
    return inside and not any(box.overlaps(other) for other in taken)


def _mark_box(axes: Any, x: float, y: float) -> Bbox:
    """The pixels a marker at data point (x, y) covers."""
    centre_x, centre_y = axes.transData.transform((x, y))
    half = MARK_PIXELS / 2
    return Bbox.from_extents(centre_x - half, centre_y - half, centre_x + half, centre_y + half)
