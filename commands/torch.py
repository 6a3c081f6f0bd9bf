"""The PyTorch commands (the torch extra): profile, calibrate, import torch and torch-run. Registered
on the `pipesat` group by `cli.py`, import torch on `files.import_group` by `commands.files`."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import click

from pipesat.commands.checks import check_writes, exit_without_torch, reads
from pipesat.commands.frame import EXIT_INVALID, PipesatCommand
from pipesat.commands.keys import spec_overrides
from pipesat.commands.options import (
    FILE,
    FORCE_OPTION,
    MODEL_OPTIONS,
    OBJECTIVE_OPTION,
    PICTURE_OPTIONS,
    SCHEDULE_FILE,
    dataclass_from_options,
    instance_options,
    options,
)
from pipesat.commands.output import emit_instance, emit_schedule
from pipesat.commands.values import FiniteFloat
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
from pipesat.solver.io.schedule_file import load_schedule
from pipesat.solver.plan.space import description, enumerate_space
from pipesat.solver.plan.spec import PlanSpec, load_spec
from pipesat.solver.torch import import_schedule as torch_import
from pipesat.solver.torch.profile import calibrate, profile_instance
from pipesat.solver.torch.profile_report import calibration_table, profile_lines
from pipesat.solver.torch.profile_spec import DTYPES, ProfileSpec
from pipesat.solver.torch.run import format_result, torch_run

MAX_REPEATS = 1000
"""The most samples a round takes (a round of 1,000 samples of a large layer already takes minutes)."""
REPEATS_OPTION = click.option(
    "--repeats",
    type=click.IntRange(1, MAX_REPEATS),
    default=5,
    show_default=True,
    help="Samples per round (rounds until stable).",
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


@click.command("profile", cls=PipesatCommand)
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


@click.command("calibrate", cls=PipesatCommand)
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
    configs, skipped, _ = enumerate_space(spec)
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


@click.command("torch", cls=PipesatCommand, epilog="Schedules: " + ", ".join(torch_import.TORCH_SCHEDULES) + ".")
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


@click.command("torch-run", cls=PipesatCommand)
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
