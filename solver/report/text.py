"""The lines commands print about an instance, a schedule and the files they write."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pipesat.models import Instance, Objective, Schedule
from pipesat.solver.evaluate.metrics import compute_metrics, link_busy
from pipesat.solver.report.tables import format_number, format_percent
from pipesat.solver.report.units import Units, units_of

LABEL_WIDTH = 16


def field_line(label: str, value: str) -> str:
    """`label:  value`, values aligned in one column."""
    return f"{label + ':':<{LABEL_WIDTH}}{value}"


def describe(instance: Instance) -> str:
    """`name: 4 devices, 8 microbatches, ...`: the instance in one line, amounts with their units."""
    units = units_of(instance)
    parts = [f"{instance.num_devices} devices", f"{instance.num_microbatches} microbatches"]
    if instance.chunks > 1:
        parts.append(f"{instance.chunks} chunks ({instance.placement_name()})")
    parts.append("split backward" if instance.split_backward else "fused backward")
    if instance.p2p_time:
        parts.append(f"p2p {units.with_time(format_number(instance.p2p_time))}")
    if instance.memory_limit is not None:
        parts.append(limit_text(instance))
    return (f"{instance.name}: " if instance.name else "") + ", ".join(parts)


def limit_text(instance: Instance) -> str:
    """`memory limit 20 GiB (0.53x)`, or `memory limits 12, 13, 13, 14 GiB` when devices differ."""
    units, limits = units_of(instance), instance.memory_limit or ()
    if len(set(limits)) > 1:
        return f"memory limits {units.with_memory(memory_list(limits, units))}"
    limit = limits[0]
    reference = instance.one_f_one_b_peak()
    relative = f" ({limit / reference:.3g}x)" if reference > 0 else ""
    return f"memory limit {units.with_memory(format_number(units.memory_value(limit)))}{relative}"


def memory_list(amounts: Sequence[float], units: Units) -> str:
    """`12, 13.5, 14`: amounts in the shown memory unit."""
    return ", ".join(format_number(units.memory_value(amount)) for amount in amounts)


def metrics_lines(schedule: Schedule, objective: Objective, skip: str | None = None) -> list[str]:
    """The schedule's makespan, max span, bubble rate and peak memory (and what it offloads, if
    anything), less the field labelled `skip`."""
    metrics = compute_metrics(schedule)
    units = units_of(schedule.instance)
    per_device = memory_list(metrics.peak_memory, units)
    limits = schedule.instance.memory_limit
    of_limit = ""
    if limits is not None:
        of_limit = (
            f"; limit {units.with_memory(memory_list(limits[:1], units))}"
            if len(set(limits)) == 1
            else f"; limits {units.with_memory(memory_list(limits, units))}"
        )
    peak = units.with_memory(format_number(units.memory_value(metrics.max_peak_memory)))
    fields = {
        "makespan": units.with_time(format_number(metrics.makespan)),
        "max span": units.with_time(format_number(metrics.max_span)),
        "bubble rate": f"{format_percent(metrics.bubble_rate_for(objective))} (of the {objective.label})",
        "peak memory": f"{peak} (per device: {units.with_memory(per_device)}{of_limit})",
    }
    if schedule.transfers:
        instance = schedule.instance
        passes = sum(len(instance.microbatches_at(s)) for s in range(instance.num_stages))
        busy = units.with_time(", ".join(format_number(t) for t in link_busy(schedule)))
        fields["offloads"] = (
            f"{len(schedule.transfers) // 2} of {passes} (stage, microbatch)s; host links busy {busy} "
            "(per device, both directions)"
        )
    return [field_line(label, value) for label, value in fields.items() if label != skip]


def saved_files_text(count: int, directory: Path, not_saved: int = 0) -> str:
    """`3 files in DIR`, and how many schedules over the memory limit were left out."""
    left_out = f" ({not_saved} over the memory limit not saved)" if not_saved else ""
    return f"{count} files in {directory}{left_out}"


def torch_csv_lines(path: Path, schedule: Schedule) -> list[str]:
    """What the export to torch's CSV wrote, and how torch reads it."""
    return [
        field_line("torch CSV", f"{path} ({schedule.instance.num_devices} ranks, {len(schedule.ops)} actions)"),
        "load it with _PipelineScheduleRuntime._load_csv(path, format='compute_only') (torch 2.13)",
    ]


def chrome_trace_line(path: Path) -> str:
    """What the export to a Chrome trace wrote."""
    return field_line("Chrome trace", f"{path} (one track per device, memory counters; 1 time unit = 1 ms)")
