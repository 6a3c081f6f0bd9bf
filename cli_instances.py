"""The instance commands: show an instance, and make one from a transformer description and its
hardware. Registered on the `pipesat` group by `cli.py`."""

from __future__ import annotations

import json
from typing import Any

import click

from cli_options import MODEL_OPTIONS, NUMBER, PipesatGroup, check_writes, dataclass_from_options, instance_options
from cli_output import emit_instance
from models import Instance
from solver.instances.cost_model import Hardware, Pipeline, Transformer, command_line, explain, model_instance
from solver.instances.from_options import parse_layer_counts


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
@click.option("--vocab", type=int, default=0, show_default=True, help="Vocabulary V of the output head (0: no head).")
@click.option("--flash-attention", is_flag=True, help="Attention scores not kept (M_B without 5a·s), recomputed in B.")
@click.option("--layers-per-stage", help="Explicit layer counts, one per stage (p x chunks), for uneven splits.")
@click.option("--tflops", type=NUMBER, required=True, help="Peak device throughput in TFLOP/s.")
@click.option("--efficiency", type=NUMBER, default=0.5, show_default=True, help="Fraction of peak reached.")
@click.option("--bandwidth", type=NUMBER, default=50.0, show_default=True, help="Link bandwidth in GB/s.")
@click.option("--latency", type=NUMBER, default=10.0, show_default=True, help="Link latency in microseconds.")
@click.option("--bytes-per-value", type=NUMBER, default=2.0, show_default=True, help="Bytes per activation value.")
@click.option("--explain", is_flag=True, help="Print how every number was derived.")
def instance_from_model(**options: Any) -> None:
    """An instance from a transformer description and its hardware (ZB paper cost model; ms and MiB)."""
    check_writes(options["force"], {"-o": options["output"]})
    options["layers_per_stage"] = parse_layer_counts(options["layers_per_stage"])
    model, hardware, pipeline = (dataclass_from_options(kind, options) for kind in (Transformer, Hardware, Pipeline))
    instance = model_instance(model, hardware, pipeline, name=options["name"])
    lines = explain(model, hardware, pipeline)
    if options["explain"]:
        click.echo("\n".join(lines))
    emit_instance(instance, [command_line(model, hardware, pipeline), "", *lines], options["output"])
