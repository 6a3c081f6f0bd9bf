"""The PyTorch commands (the torch extra): profile, calibrate, export, import and torch-run. Registered
on the `pipesat` group by `cli.py`."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import click

from pipesat.cli_keys import spec_overrides
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
    options,
    reads,
)
from pipesat.cli_output import emit_instance, emit_schedule
from pipesat.models import Instance, Objective
from pipesat.models.errors import InstanceError
from pipesat.solver.heuristics import NotApplicable
from pipesat.solver.instances.calibration import (
    Calibration,
    MeasuredLayer,
    calibration_text,
    check_dtype,
    dtype_for,
    save_calibration,
    unlike_measured,
)
from pipesat.solver.instances.description import Training, Transformer
from pipesat.solver.io.chrome_trace import export_chrome_trace
from pipesat.solver.io.schedule_file import load_schedule
from pipesat.solver.plan.space import description, enumerate_space
from pipesat.solver.plan.spec import PlanSpec, load_spec
from pipesat.solver.report.text import chrome_trace_line, torch_csv_lines
from pipesat.solver.torch import import_schedule as torch_import
from pipesat.solver.torch.export import export_torch_csv
from pipesat.solver.torch.profile import calibrate, profile_instance
from pipesat.solver.torch.profile_report import calibration_table, profile_lines
from pipesat.solver.torch.profile_spec import DTYPES, ProfileSpec
from pipesat.solver.torch.run import format_result, torch_run

REPEATS_OPTION = click.option(
    "--repeats", type=int, default=5, show_default=True, help="Samples per round (rounds until stable)."
)
DEVICE_OPTION = click.option(
    "--device",
    type=click.Choice(["cpu", "cuda"]),
    default="cpu",
    show_default=True,
    help="Where to measure: the CPU or the first CUDA GPU.",
)
CALIBRATE_OVERRIDES = ("training.tensor_parallel", "training.microbatch_sizes")
"""The plan's spec keys `calibrate` takes as options, to measure fewer shapes than the plan's."""


@click.command("profile")
@MODEL_OPTIONS
@REPEATS_OPTION
@DEVICE_OPTION
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


@click.command("calibrate")
@click.argument("spec_file", metavar="SPEC", type=FILE)
@options(*spec_overrides(CALIBRATE_OVERRIDES))
@click.option(
    "--save-calibration",
    "output",
    type=FILE,
    help="Write the calibration file (YAML) here, not to standard output.",
)
@REPEATS_OPTION
@DEVICE_OPTION
@click.option(
    "--dtype",
    type=click.Choice(list(DTYPES)),
    help="What the model runs in (default: the one of the spec's training.bytes_per_value, bf16 for 2).",
)
@FORCE_OPTION
def calibrate_command(spec_file: Path, **options: Any) -> None:
    """Measure one transformer layer of each shape SPEC's plan needs with torch (each tensor-parallel
    degree, microbatch size and recomputation it tries), for `plan --calibration` (docs/calibration.md)."""
    reads(**{"spec file": spec_file})
    output = options["output"]
    check_writes(options["force"], {"--save-calibration": output})
    spec = load_spec(spec_file, {dotted: options[dotted.split(".")[1]] for dotted in CALIBRATE_OVERRIDES})
    dtype = options["dtype"] or dtype_for(spec.training)
    check_dtype(dtype, spec.training, f"--dtype {dtype}")
    layers = _plan_layers(spec)
    words = output is None  # words go to standard error when standard output holds the file

    def measured(row: MeasuredLayer) -> None:
        click.echo(f"measured t{row.tensor_parallel}: {row.label}", err=True)

    calibration = calibrate(layers, options["device"], dtype, options["repeats"], measured)
    click.echo("\n".join(calibration_table(calibration)), err=words)
    comments = _calibration_comments(spec_file, calibration)
    if output is None:
        click.echo(calibration_text(calibration, comments), nl=False)
    else:
        save_calibration(calibration, output, comments)
        click.echo(f"wrote {output}: {len(calibration.layers)} layer shape(s) measured on {calibration.device}")


def _plan_layers(spec: PlanSpec) -> list[tuple[Transformer, Training]]:
    """The model and training of each configuration the plan of `spec` considers, but those a measured
    layer cannot stand for (`unlike_measured`): their layers' shapes are what the plan needs."""
    configs, skipped = enumerate_space(spec)
    if not configs:
        why = f": {skipped[0]}" if skipped else ""
        raise InstanceError(f"the plan has no configuration to calibrate{why}")
    described = list(map(functools.partial(description, spec), configs))
    layers = [(shown.model, shown.training) for shown in described if not unlike_measured(shown.training)]
    if not layers:
        raise InstanceError(f"no layer of the plan can be measured: {unlike_measured(described[0].training)}")
    return layers


def _calibration_comments(spec_file: Path, calibration: Calibration) -> list[str]:
    return [
        f"calibrated by: pipesat calibrate {spec_file} on {calibration.device} ({calibration.dtype})",
        "one transformer layer per row, alone (no embedding, no head): its shape is what one GPU computes",
        "under tensor parallelism t: heads, kv_heads and mlp_width are the model's / t; times in ms, memory",
        "in bytes; backward_ms includes recompute_ms. The format: docs/calibration.md",
    ]


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
