"""The plan's picture: throughput against memory per GPU for every configuration with a schedule,
and where the time of the top rows' iterations goes.

One mark per configuration: its shape says the placement, a filled mark was solved (CP-SAT or its
lower bound proved the schedule), a hollow one pruned by bound (its handwritten schedule). The best
is ringed and labelled; a dashed line marks the memory a GPU may use (its memory less the reserve).
Below, one bar for each of the top rows, in rank order: its iteration split into its parts (compute,
recompute, TP, DP and PP communication, bubble, optimizer step), so a faster layout shows what it
saves.
"""

from __future__ import annotations

from pathlib import Path

from matplotlib.axes import Axes
from matplotlib.figure import Figure

from pipesat.models import Kind
from pipesat.models.plan_result import MEMORY_ERROR, ConfigResult, MemoryFit, Outcome, PlanResult
from pipesat.models.units import GIB
from pipesat.solver.report.figures import KIND_COLOURS, LIMIT_COLOUR, fit_text, new_figure, place_labels, save_figure

MARKERS = {"linear": "o", "interleaved": "s", "vshape": "^", "bidirectional": "D"}
PIPELINE_COLOURS = ("#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860", "#da8bc3", "#8c8c8c")
BREAKDOWN_ROWS = 8
"""The top rows whose iterations the bars below the marks break down."""
PART_COLOURS = ("#0072B2", "#56B4E9", "#E69F00", "#D55E00", "#CC79A7", "#009E73", "#F0E442", "#E4E4E4", "#555555")
"""One colour a part of an iteration, in `Breakdown`'s order."""
BAR_HEIGHT = 0.32
"""Inches the picture grows by for each bar."""


def plan_figure(result: PlanResult, title: str = "") -> Figure:
    """Tokens/s against GiB per GPU; colour by pipeline depth p, shape by placement."""
    feasible = result.feasible
    ranked = feasible[:BREAKDOWN_ROWS]
    bars = 1.2 + BAR_HEIGHT * len(ranked) if ranked else 0.0
    figure = new_figure(9, 5.5 + bars)
    grid = figure.add_gridspec(2 if ranked else 1, 1, height_ratios=[5.5, bars] if ranked else [1])
    axes = figure.add_subplot(grid[0])
    depths = sorted({item.config.pipeline for item in feasible})
    colour = {p: PIPELINE_COLOURS[i % len(PIPELINE_COLOURS)] for i, p in enumerate(depths)}
    for item in feasible:
        assert item.measure is not None
        x, y = item.measure.memory_per_gpu / GIB, item.measure.tokens_per_s
        filled = item.outcome == Outcome.SOLVED
        axes.plot(
            x,
            y,
            MARKERS.get(item.config.placement, "o"),
            color=colour[item.config.pipeline],
            markerfacecolor=colour[item.config.pipeline] if filled else "white",
            markersize=7,
            alpha=0.9,
        )
    best = result.best
    labels = []
    if best is not None and best.measure is not None:
        x, y = best.measure.memory_per_gpu / GIB, best.measure.tokens_per_s
        axes.plot(x, y, "o", markersize=16, markerfacecolor="none", color=KIND_COLOURS[Kind.B], linewidth=1.5)
        labels.append((x, y, f"best: {best.config.label}" + (" (tight)" if best.memory_fit is MemoryFit.TIGHT else "")))
    usable = (feasible[0].usable_memory if feasible else 0.0) / GIB
    tight = any(item.memory_fit is MemoryFit.TIGHT for item in feasible)
    if usable > 0:
        axes.axvline(usable, color=LIMIT_COLOUR, linestyle="--", linewidth=1.0)
        if tight:  # the edge of the error bar: a tight row lies between the two lines
            axes.axvline(usable / (1 - MEMORY_ERROR), color=LIMIT_COLOUR, linestyle=":", linewidth=1.0)
    axes.set_xlim(0, max([usable, *(i.measure.memory_per_gpu / GIB for i in feasible if i.measure)]) * 1.08 or 1)
    top = max((i.measure.tokens_per_s for i in feasible if i.measure), default=1.0)
    axes.set_ylim(0, top * 1.12)
    axes.set_xlabel("memory per GPU (GiB): model state + peak activations")
    axes.set_ylabel("throughput (tokens/s)")
    axes.grid(alpha=0.3)
    for side in ("top", "right"):
        axes.spines[side].set_visible(False)
    handles = [axes.plot([], [], "o", color=colour[p], label=f"p = {p}")[0] for p in depths]
    placements = sorted({item.config.placement for item in feasible}, key=list(MARKERS).index)
    handles += [axes.plot([], [], MARKERS[name], color="grey", label=name)[0] for name in placements]
    handles.append(axes.plot([], [], "o", color="grey", label="solved")[0])
    if any(item.outcome == Outcome.PRUNED for item in feasible):
        handles.append(axes.plot([], [], "o", color="grey", markerfacecolor="white", label="pruned by bound")[0])
    if usable > 0:
        handles.append(axes.plot([], [], "--", color=LIMIT_COLOUR, label="usable memory")[0])
    if usable > 0 and tight:
        edge = f"usable / (1 - {MEMORY_ERROR:.0%}): tight between the lines"
        handles.append(axes.plot([], [], ":", color=LIMIT_COLOUR, label=edge)[0])
    legend = figure.legend(handles=handles, loc="lower center", ncol=min(6, len(handles)), fontsize=8, frameon=False)
    solved, pruned, refused = (result.count(outcome) for outcome in (Outcome.SOLVED, Outcome.PRUNED, Outcome.REFUSED))
    default = (
        f"throughput against memory per GPU: {len(result.results)} configurations "
        f"({solved} solved, {pruned} pruned by bound, {refused} refused by memory)"
    )
    axes.set_title(title or default, fontsize=10)
    fit_text(axes.title, 0.9 * figure.bbox.width)
    rect = (0, legend.get_window_extent().height / figure.bbox.height, 1, 1)
    if ranked:
        _breakdown_bars(figure.add_subplot(grid[1]), ranked)
        figure.tight_layout(rect=rect)  # the bars' labels narrow the marks' axes: fit the title to them
        fit_text(axes.title, axes.get_window_extent().width)
    figure.tight_layout(rect=rect)
    others = [(i.measure.memory_per_gpu / GIB, i.measure.tokens_per_s) for i in feasible if i.measure]
    place_labels(axes, labels, others)
    return figure


def _breakdown_bars(axes: Axes, ranked: list[ConfigResult]) -> None:
    """One stacked bar a row, best on top: its iteration's parts, one colour each."""
    for row, item in enumerate(ranked):
        assert item.measure is not None
        left = 0.0
        for (name, value), colour in zip(item.measure.breakdown.parts(), PART_COLOURS, strict=True):
            axes.barh(row, value, left=left, height=0.7, color=colour, label=name if row == 0 else None)
            left += value
    axes.set_yticks(range(len(ranked)), [item.config.label for item in ranked], fontsize=7)
    axes.invert_yaxis()
    axes.set_xlabel("iteration (ms): where the time goes", fontsize=9)
    axes.tick_params(axis="x", labelsize=8)
    for side in ("top", "right"):
        axes.spines[side].set_visible(False)
    axes.legend(ncol=len(PART_COLOURS) // 2, fontsize=7, frameon=False, loc="lower left", bbox_to_anchor=(0, 1))


def plot_plan(result: PlanResult, path: str | Path, title: str = "") -> Path:
    """Draw the plan's picture to a PNG, SVG or PDF file (atomically)."""
    return save_figure(plan_figure(result, title), path)
