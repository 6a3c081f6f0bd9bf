"""The PyTorch commands (the torch extra): profile, export, import and torch-run. Registered on the
`pipesat` group by `cli.py`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from pipesat.cli_options import (
    EXIT_INVALID,
    FILE,
    FORCE_OPTION,
    MODEL_OPTIONS,
    OBJECTIVE_OPTION,
    PICTURE_OPTIONS,
    SCHEDULE_FILE,
    FiniteFloat,
    PipesatGroup,
    check_writes,
    dataclass_from_options,
    defaults_from_csv,
    exit_without_torch,
    instance_options,
    reads,
)
from pipesat.cli_output import emit_instance, emit_schedule
from pipesat.models import Instance, Objective
from pipesat.models.errors import InstanceError
from pipesat.solver.heuristics import NotApplicable
from pipesat.solver.io.chrome_trace import export_chrome_trace
from pipesat.solver.io.schedule_file import load_schedule
from pipesat.solver.report.text import chrome_trace_line, torch_csv_lines
from pipesat.solver.torch import import_schedule as torch_import
from pipesat.solver.torch.export import export_torch_csv
from pipesat.solver.torch.profile import DTYPES, ProfileSpec, profile_instance, profile_lines
from pipesat.solver.torch.run import format_result, torch_run


@click.command("profile")
@MODEL_OPTIONS
@click.option("--repeats", type=int, default=5, show_default=True, help="Samples per round (rounds until stable).")
@click.option("--device", type=click.Choice(["cpu", "cuda"]), default="cpu", show_default=True)
@click.option(
    "--dtype", type=click.Choice(list(DTYPES)), help="What the model runs in (default: bf16 on cuda, fp32 on cpu)."
)
def profile_command(**options: Any) -> None:
    """Measure F, B, W and memory per stage of a small GPT-like model with torch (the torch extra)."""
    check_writes(options["force"], {"--save-instance": options["output"]})
    instance = profile_instance(dataclass_from_options(ProfileSpec, options), name=options["name"])
    lines = profile_lines(instance)
    click.echo("\n".join(lines), err=options["output"] is None)
    emit_instance(instance, ["measured by: pipesat profile", *lines], options["output"])


@click.command("export")
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


@click.group("import", cls=PipesatGroup)
def import_group() -> None:
    """Time PyTorch's schedules on an instance: torch's built-ins, or any torch schedule CSV."""


@import_group.command("torch", epilog="Schedules: " + ", ".join(torch_import.TORCH_SCHEDULES) + ".")
@click.argument("name")
@instance_options
@OBJECTIVE_OPTION
@PICTURE_OPTIONS
@FORCE_OPTION
def import_torch_command(
    name: str, instance: Instance, objective: Objective, save: Path | None, show_ascii: bool, force: bool
) -> None:
    """Torch's built-in schedule NAME, timed with the instance's durations and validated (needs torch).

    Multi-stage schedules take --chunks; ZBVZeroBubble and DualPipeV need --placement vshape.
    """
    check_writes(force, {"--save": save})
    exit_without_torch()
    try:
        schedule = torch_import.import_torch_schedule(name, instance)
    except NotApplicable as error:
        raise InstanceError(str(error)) from None
    emit_schedule(schedule, objective, save, None, show_ascii, title=schedule.name)


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


@click.command("torch-run")
@SCHEDULE_FILE
@click.option("--timeout", type=FiniteFloat(min=1), default=300.0, show_default=True, help="Seconds to wait.")
def torch_run_command(schedule_file: Path, timeout: float) -> None:
    """Run one training step of the schedule in PyTorch (gloo, CPU, one process per device) and
    check the gradients against plain training (needs torch)."""
    schedule = load_schedule(schedule_file)
    exit_without_torch()
    result = torch_run(schedule, timeout_s=timeout)
    click.echo("\n".join(format_result(result)))
    if not result.passed:
        click.get_current_context().exit(EXIT_INVALID)
