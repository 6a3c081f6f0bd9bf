"""The instance commands: show an instance, and make one from a transformer description, how it is
trained and its hardware. Registered on the `pipesat` group by `cli.py`."""

from __future__ import annotations

import json
from typing import Any

import click

from pipesat.commands.checks import check_writes, reads
from pipesat.commands.frame import PipesatGroup
from pipesat.commands.keys import key_options
from pipesat.commands.options import FILE, MODEL_OPTIONS, dataclass_from_options, instance_options, options
from pipesat.commands.output import emit_instance
from pipesat.models import Instance
from pipesat.models.limits import DEFAULT_MAX_LAYERS, check_cap
from pipesat.solver.instances.calibration import calibration_lines, load_calibration
from pipesat.solver.instances.description import MOE_KEYS, Hardware, Pipeline, Training, Transformer
from pipesat.solver.instances.explain import command_line, explain
from pipesat.solver.instances.from_model import Description, derive
from pipesat.solver.instances.gpus import memory_choice


@click.group(cls=PipesatGroup)
def instance() -> None:
    """Inspect and make instance files."""


@instance.command("show")
@instance_options
def instance_show(instance: Instance) -> None:
    """Print the fully normalised instance."""
    click.echo(json.dumps(instance.to_dict(), indent=1))


@instance.command("from-model")
@MODEL_OPTIONS
@options(
    *key_options(Transformer, *MOE_KEYS),
    *key_options(Pipeline, "layers_per_stage", "balance"),
    *key_options(Training),
    *key_options(Hardware),
)
@click.option(
    "--calibration",
    type=FILE,
    help="Calibration file (`pipesat calibrate`): a layer whose shape it has costs what was measured.",
)
@click.option("--explain", is_flag=True, help="Print how every number was derived.")
@click.option(
    "--max-layers",
    type=click.IntRange(min=1),
    default=DEFAULT_MAX_LAYERS,
    show_default=True,
    help="Refuse a model of more layers than this.",
)
def instance_from_model(**options: Any) -> None:
    """An instance from a transformer, how it is trained and its hardware (docs/cost-model.md; ms and MiB)."""
    reads(**{"calibration file": options["calibration"]})
    check_writes(options["force"], {"--save-instance": options["output"]})
    check_cap("model.layers", options["layers"], options["max_layers"], "max_layers")
    description = Description(
        dataclass_from_options(Transformer, options),
        dataclass_from_options(Training, options),
        dataclass_from_options(Hardware, options),
        dataclass_from_options(Pipeline, options),
    )
    calibration = None if options["calibration"] is None else load_calibration(options["calibration"])
    derivation = derive(description, options["name"], calibration)
    if (choice := memory_choice(description.hardware.gpu, description.hardware.gpu_memory)) is not None:
        click.echo(f"note: --gpu-memory {choice}", err=True)
    lines = explain(description, derivation)
    command, measured = command_line(description), []
    if calibration is not None:
        measured = calibration_lines(calibration, description.model, description.training)
        lines += measured
        command += f" --calibration {options['calibration']}"
    # Words go to standard error when standard output holds the instance file.
    if options["explain"]:
        click.echo("\n".join(lines), err=options["output"] is None)
    else:
        balance = [next(line for line in lines if line.startswith("pipeline:"))] if options["balance"] else []
        for line in [*balance, *measured[:1]]:
            click.echo(line, err=options["output"] is None)
    emit_instance(derivation.instance, [command, "", *lines], options["output"])
