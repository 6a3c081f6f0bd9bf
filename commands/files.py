"""The commands on schedule files, none of which needs torch: check, render, export (torch's CSV, a
Chrome trace) and import csv (a torch schedule CSV, timed on an instance)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from pipesat.commands.checks import check_window, check_writes, picture_output, reads
from pipesat.commands.frame import PipesatCommand
from pipesat.commands.lazy import LazyCommand, LazyGroup
from pipesat.commands.options import (
    ASCII_OPTION,
    FILE,
    FORCE_OPTION,
    OBJECTIVE_OPTION,
    PICTURE_OPTIONS,
    SCHEDULE_FILE,
    WINDOW_OPTION,
    instance_options,
    output_option,
)
from pipesat.commands.output import emit_schedule
from pipesat.models import Instance, Objective
from pipesat.models.errors import ScheduleError
from pipesat.solver.evaluate.validator import validate
from pipesat.solver.io.chrome_trace import export_chrome_trace
from pipesat.solver.io.schedule_file import load_schedule
from pipesat.solver.report.text import chrome_trace_line, torch_csv_lines
from pipesat.solver.torch import import_schedule as torch_import
from pipesat.solver.torch.export import export_torch_csv

if TYPE_CHECKING:
    from pipesat.solver.report.schedule_plot import Window


@click.command("check", cls=PipesatCommand)
@SCHEDULE_FILE
def check(schedule_file: Path) -> None:
    """Validate a schedule file; list every violation (exit 1 when invalid)."""
    schedule = load_schedule(schedule_file)
    violations = validate(schedule)
    if violations:
        for violation in violations:
            click.echo(str(violation))
        raise ScheduleError(f"{schedule_file}: {len(violations)} violation(s)")
    moved = f", {len(schedule.transfers)} host-link transfers" if schedule.transfers else ""
    click.echo(f"{schedule_file}: valid ({len(schedule.ops)} ops{moved})")


@click.command("render", cls=PipesatCommand)
@SCHEDULE_FILE
@OBJECTIVE_OPTION
@output_option("Picture file (.png, .svg, .pdf); default: SCHEDULE_FILE with .png, unless --ascii.")
@WINDOW_OPTION
@ASCII_OPTION
@FORCE_OPTION
def render(
    schedule_file: Path, objective: Objective, output: Path | None, window: Window | None, show_ascii: bool, force: bool
) -> None:
    """Draw a schedule file, or print it with --ascii; it must pass the validator."""
    picture = output if output is not None or show_ascii else schedule_file.with_suffix(".png")
    check_window(window, picture)
    reads(**{"schedule file": schedule_file})
    check_writes(force, {"the picture": picture_output(picture, output)})
    schedule = load_schedule(schedule_file)
    if validate(schedule):
        raise ScheduleError(f"{schedule_file} is not a valid schedule; `pipesat check {schedule_file}` lists why")
    emit_schedule(schedule, objective, None, picture, show_ascii, window)


def defaults_from_csv(ctx: click.Context, param: click.Parameter, value: Path) -> Any:
    """Read the CSV first (an eager argument): its rows set the devices, microbatches and placement,
    which become the defaults of the instance options (click's default_map)."""
    torch_orders = torch_import.read_torch_csv(value)
    chunks, placement = torch_import.placement_options(torch_orders.placement, torch_orders.num_devices)
    ctx.default_map = {
        "num_devices": torch_orders.num_devices,
        "num_microbatches": torch_orders.num_microbatches,
        "chunks": chunks,
        "placement": placement,
    }
    return value


@click.command("export", cls=PipesatCommand)
@SCHEDULE_FILE
@click.option(
    "--to", "target", type=click.Choice(["torch-csv", "chrome-trace"]), required=True, help="The format to write."
)
@click.argument("out", type=FILE)
@FORCE_OPTION
def export_command(schedule_file: Path, target: str, out: Path, force: bool) -> None:
    """Write a schedule file as torch's compute_only CSV or as a Chrome trace (Perfetto, chrome://tracing).

    Only a valid schedule whose order cannot deadlock is written.
    """
    reads(**{"schedule file": schedule_file})
    check_writes(force, {"OUT": out})
    schedule = load_schedule(schedule_file)
    if target == "torch-csv":
        click.echo("\n".join(torch_csv_lines(export_torch_csv(schedule, out), schedule)))
    else:
        click.echo(chrome_trace_line(export_chrome_trace(schedule, out)))


IMPORT_COMMANDS = {
    "torch": LazyCommand(
        "pipesat.commands.torch:import_torch_command",
        "Torch's built-in schedule NAME, timed with the instance's durations and validated (needs torch).",
    )
}
"""`import torch`, from the torch commands' module (`commands.lazy`)."""


@click.group("import", cls=LazyGroup, lazy_commands=IMPORT_COMMANDS)
def import_group() -> None:
    """Time PyTorch's schedules on an instance: torch's built-ins, or any torch schedule CSV."""


@import_group.command("csv")
@click.argument("csv_file", type=FILE, is_eager=True, callback=defaults_from_csv)
@instance_options
@OBJECTIVE_OPTION
@PICTURE_OPTIONS
@FORCE_OPTION
def import_csv_command(
    csv_file: Path, instance: Instance, objective: Objective, save: Path | None, show_ascii: bool, force: bool
) -> None:
    """A torch schedule CSV (one row per rank), timed with the instance's durations and validated.

    The CSV gives the devices, microbatches and placement; the instance options give the times.
    """
    reads(**{"CSV file": csv_file})
    check_writes(force, {"--save": save})
    schedule = torch_import.import_torch_csv(csv_file, instance)
    emit_schedule(schedule, objective, save, None, show_ascii, title=schedule.name)
