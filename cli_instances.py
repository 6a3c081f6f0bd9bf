"""The instance commands: show an instance, and make one from a transformer description, how it is
trained and its hardware. Registered on the `pipesat` group by `cli.py`."""

from __future__ import annotations

import json
from typing import Any

import click

from pipesat.cli_keys import key_options
from pipesat.cli_options import (
    MODEL_OPTIONS,
    PipesatGroup,
    check_writes,
    dataclass_from_options,
    instance_options,
    options,
)
from pipesat.cli_output import emit_instance
from pipesat.models import Instance
from pipesat.solver.instances.cost_model import Hardware, Pipeline, Training, Transformer
from pipesat.solver.instances.explain import command_line, explain
from pipesat.solver.instances.from_model import Description, derive


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
@options(*key_options(Pipeline, "layers_per_stage", "balance"), *key_options(Training), *key_options(Hardware))
@click.option("--explain", is_flag=True, help="Print how every number was derived.")
def instance_from_model(**options: Any) -> None:
    """An instance from a transformer, how it is trained and its hardware (docs/cost-model.md; ms and MiB)."""
    check_writes(options["force"], {"--save-instance": options["output"]})
    description = Description(
        dataclass_from_options(Transformer, options),
        dataclass_from_options(Training, options),
        dataclass_from_options(Hardware, options),
        dataclass_from_options(Pipeline, options),
    )
    derivation = derive(description, name=options["name"])
    lines = explain(description, derivation)
    # Words go to standard error when standard output holds the instance file.
    if options["explain"]:
        click.echo("\n".join(lines), err=options["output"] is None)
    elif options["balance"]:
        click.echo(next(line for line in lines if line.startswith("pipeline:")), err=options["output"] is None)
    emit_instance(derivation.instance, [command_line(description), "", *lines], options["output"])
