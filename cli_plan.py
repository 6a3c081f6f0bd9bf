"""`pipesat plan SPEC`: the best way to train a model on a cluster (docs/plan.md). Registered on the
`pipesat` group by `cli.py`."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from pipesat.cli_options import FILE, FORCE_OPTION, FORMAT_OPTION, FiniteFloat, check_writes, picture_path, reads
from pipesat.cli_output import give_stdout_to_data, say
from pipesat.models.errors import ScheduleError
from pipesat.solver.cpsat.search import available_cores
from pipesat.solver.io.schedule_file import save_schedule
from pipesat.solver.plan.executors import make_executor
from pipesat.solver.plan.search import PlanProgress, plan
from pipesat.solver.plan.spec import load_spec
from pipesat.solver.report.plan_plot import plot_plan
from pipesat.solver.report.plan_text import plan_columns, plan_document, plan_rows, plan_summary, progress_text
from pipesat.solver.report.tables import format_rows

OVERRIDES = {
    "gpus": "cluster.gpus",
    "gpu_memory": "cluster.gpu_memory",
    "gpus_per_node": "cluster.gpus_per_node",
    "tflops": "cluster.tflops",
    "efficiency": "cluster.efficiency",
    "bandwidth": "cluster.bandwidth",
    "latency": "cluster.latency",
    "node_bandwidth": "cluster.node_bandwidth",
    "global_batch": "training.global_batch",
    "tensor_parallel": "training.tensor_parallel",
}


def _degrees(ctx: click.Context, param: click.Parameter, value: str | None) -> list[int] | None:
    if value is None:
        return None
    try:
        return [int(part) for part in value.replace(",", " ").split()]
    except ValueError:
        raise click.BadParameter(f"{value!r}: give whole numbers such as 1,2,4") from None


@click.command("plan")
@click.argument("spec_file", metavar="SPEC", type=FILE)
@click.option("--gpus", type=int, help="GPUs in the cluster (overrides cluster.gpus).")
@click.option("--gpu-memory", help="Memory of one GPU, such as 40GiB (overrides cluster.gpu_memory).")
@click.option("--gpus-per-node", type=int, help="GPUs a node (overrides cluster.gpus_per_node).")
@click.option("--tflops", type=FiniteFloat(min=0, min_open=True), help="Peak TFLOP/s of one GPU.")
@click.option("--efficiency", type=FiniteFloat(min=0, min_open=True, max=1), help="Fraction of peak reached.")
@click.option("--bandwidth", type=FiniteFloat(min=0, min_open=True), help="Link between nodes, GB/s.")
@click.option("--latency", type=FiniteFloat(min=0), help="Link latency between nodes, microseconds.")
@click.option("--node-bandwidth", type=FiniteFloat(min=0, min_open=True), help="Link within a node, GB/s.")
@click.option("--global-batch", type=int, help="Sequences an iteration (overrides training.global_batch).")
@click.option("--tensor-parallel", callback=_degrees, help="Tensor-parallel degrees to try, such as 1,2.")
@click.option("--top", type=click.IntRange(min=1), default=10, show_default=True, help="Rows of the ranked table.")
@FORMAT_OPTION
@click.option("-o", "--output", type=FILE, callback=picture_path, help="Picture: throughput against memory per GPU.")
@click.option("--save-best", type=FILE, help="Write the best configuration's schedule file (JSON).")
@click.option(
    "--time-budget",
    type=FiniteFloat(min=0, min_open=True),
    default=120.0,
    show_default=True,
    help="Seconds for the whole plan, shared by the solves, most promising first.",
)
@click.option(
    "--workers", type=click.IntRange(min=1), help="Solves at a time (default: this machine's cores for both executors)."
)
@click.option(
    "--cpsat-workers",
    type=click.IntRange(min=1),
    help="CP-SAT workers a solve (default: cores / --workers, at least 1).",
)
@click.option("--seed", type=click.IntRange(0, 2**31 - 1), default=0, show_default=True, help="CP-SAT random seed.")
@click.option("--executor", type=click.Choice(["local", "ray"]), default="local", show_default=True)
@click.option("--ray-address", help="A running Ray cluster's head, HEAD:6379 (with --executor ray).")
@click.option("--progress/--no-progress", default=None, help="The progress line (default: on a terminal).")
@FORCE_OPTION
def plan_command(spec_file: Path, **options: Any) -> None:
    """Rank every way to train SPEC's model on its cluster: parallel degrees, placement, microbatch size
    and the best schedule of each, by tokens/s (docs/plan.md)."""
    reads(**{"spec file": spec_file})
    check_writes(options["force"], {"-o": options["output"], "--save-best": options["save_best"]})
    overrides = {dotted: options[name] for name, dotted in OVERRIDES.items()}
    spec = load_spec(spec_file, overrides)
    fmt = options["fmt"]
    if fmt == "json":
        give_stdout_to_data()
    cores = available_cores()
    parallel = options["workers"] or cores
    cpsat_workers = options["cpsat_workers"] or max(1, cores // parallel)
    executor = make_executor(options["executor"], parallel, cpsat_workers, options["ray_address"])
    show = sys.stderr.isatty() if options["progress"] is None else options["progress"]
    shown = False

    def progress(state: PlanProgress) -> None:
        nonlocal shown
        if show:
            text = progress_text(state.phase, state.done, state.total, state.best_ms, state.elapsed, state.left)
            click.echo("\r" + text.ljust(96), nl=False, err=True)
            shown = True

    try:
        result = plan(spec, executor, options["time_budget"], options["seed"], cpsat_workers, progress)
    finally:
        executor.close()
        if shown:
            click.echo("\r" + " " * 96 + "\r", nl=False, err=True)
    if fmt == "json":
        click.echo(json.dumps(plan_document(result, options["top"]), indent=1))
    else:
        click.echo(format_rows(plan_columns(), plan_rows(result, options["top"]), fmt))
    for line in plan_summary(result):
        if fmt in ("table", "markdown"):
            say(line if fmt == "table" else f"\n{line}")
        else:
            click.echo(line, err=True)
    if options["output"] is not None:
        plot_plan(result, options["output"])
        click.echo(f"picture: {options['output']}", err=fmt != "table")
    if options["save_best"] is not None:
        if result.best_schedule is None:
            raise ScheduleError("no configuration fits the GPUs' memory, so there is no schedule to save")
        save_schedule(result.best_schedule, options["save_best"])
        click.echo(f"best schedule: {options['save_best']}", err=fmt != "table")
