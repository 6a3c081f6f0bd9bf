"""The instance commands: show an instance, and make one from a transformer description, how it is
trained and its hardware. Registered on the `pipesat` group by `cli.py`."""

from __future__ import annotations

import json
from typing import Any

import click

from pipesat.cli_options import (
    MODEL_OPTIONS,
    NUMBER,
    PipesatGroup,
    check_writes,
    dataclass_from_options,
    instance_options,
    options,
)
from pipesat.cli_output import emit_instance
from pipesat.models import Instance
from pipesat.solver.instances.cost_model import RECOMPUTE, Hardware, Pipeline, Training, Transformer
from pipesat.solver.instances.explain import command_line, explain
from pipesat.solver.instances.from_model import Description, derive
from pipesat.solver.instances.from_options import parse_gpu_memory, parse_layer_counts, parse_reserve


@click.group(cls=PipesatGroup)
def instance() -> None:
    """Inspect and make instance files."""


@instance.command("show")
@instance_options
def instance_show(instance: Instance) -> None:
    """Print the fully normalised instance."""
    click.echo(json.dumps(instance.to_dict(), indent=1))


TRAINING_OPTIONS = options(
    click.option("--vocab", type=int, default=0, show_default=True, help="Vocabulary V (embedding and head; 0: none)."),
    click.option(
        "--flash-attention/--no-flash-attention",
        default=True,
        show_default=True,
        help="Attention scores recomputed in B, not kept.",
    ),
    click.option("--causal/--no-causal", default=True, show_default=True, help="Causal attention (flash skips half)."),
    click.option("--dropout", is_flag=True, help="Count dropout masks (today's LLMs train without dropout)."),
    click.option(
        "--recompute", type=click.Choice(RECOMPUTE), default="none", show_default=True, help="Activation recomputation."
    ),
    click.option("--tensor-parallel", type=int, default=1, show_default=True, help="GPUs t per pipeline device."),
    click.option("--sequence-parallel", is_flag=True, help="Split the layer inputs and norms over the t GPUs too."),
    click.option("--data-parallel", type=int, default=1, show_default=True, help="Replicas (for --zero1)."),
    click.option("--zero1", is_flag=True, help="Shard the optimizer state over the data-parallel replicas."),
    click.option("--bytes-per-value", type=NUMBER, default=2.0, show_default=True, help="Bytes per activation value."),
    click.option("--weight-bytes", type=NUMBER, default=2.0, show_default=True, help="Bytes per weight."),
    click.option("--grad-bytes", type=NUMBER, default=4.0, show_default=True, help="Bytes per gradient."),
    click.option(
        "--optimizer-bytes", type=NUMBER, default=12.0, show_default=True, help="Optimizer bytes per parameter (Adam)."
    ),
)

HARDWARE_OPTIONS = options(
    click.option("--tflops", type=NUMBER, required=True, help="Peak throughput of one GPU in TFLOP/s."),
    click.option("--efficiency", type=NUMBER, default=0.5, show_default=True, help="Fraction of peak reached."),
    click.option("--bandwidth", type=NUMBER, default=50.0, show_default=True, help="Pipeline link in GB/s."),
    click.option("--latency", type=NUMBER, default=10.0, show_default=True, help="Pipeline link latency in us."),
    click.option(
        "--tp-bandwidth", type=NUMBER, default=0.0, help="Tensor-parallel link in GB/s, to time the all-reduces."
    ),
    click.option(
        "--gpu-memory", help="Memory of one GPU (80GiB): writes each device's activation budget as its limit."
    ),
    click.option(
        "--reserve", default="10%", show_default=True, help="Kept back from --gpu-memory: a percentage or an amount."
    ),
)


@instance.command("from-model")
@MODEL_OPTIONS
@TRAINING_OPTIONS
@HARDWARE_OPTIONS
@click.option("--layers-per-stage", help="Explicit layer counts, one per stage (p x chunks), for uneven splits.")
@click.option("--balance", is_flag=True, help="Choose the layers per stage that make the slowest stage fastest.")
@click.option("--explain", is_flag=True, help="Print how every number was derived.")
def instance_from_model(**options: Any) -> None:
    """An instance from a transformer, how it is trained and its hardware (docs/cost-model.md; ms and MiB)."""
    check_writes(options["force"], {"-o": options["output"]})
    options["layers_per_stage"] = parse_layer_counts(options["layers_per_stage"])
    options["gpu_memory"] = parse_gpu_memory(options["gpu_memory"])
    options["reserve"] = parse_reserve(options["reserve"])
    description = Description(
        *(dataclass_from_options(kind, options) for kind in (Transformer, Training, Hardware, Pipeline))
    )
    derivation = derive(description, name=options["name"])
    lines = explain(description, derivation)
    # Words go to standard error when standard output holds the instance file.
    if options["explain"]:
        click.echo("\n".join(lines), err=options["output"] is None)
    elif options["balance"]:
        click.echo(next(line for line in lines if line.startswith("pipeline:")), err=options["output"] is None)
    emit_instance(derivation.instance, [command_line(description), "", *lines], options["output"])
