"""`pipesat plan SPEC`: the best way to train a model on a cluster (docs/plan.md). Registered on the
`pipesat` group by `cli.py`."""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from pipesat.commands.checks import check_writes, reads
from pipesat.commands.frame import PipesatCommand, exit_if_interrupted
from pipesat.commands.keys import spec_overrides
from pipesat.commands.launch import write_launch
from pipesat.commands.options import (
    CPSAT_OPTIONS,
    FILE,
    FORCE_OPTION,
    FORMAT_OPTION,
    PROGRESS_OPTION,
    WORKER_COUNT,
    dataclass_from_options,
    options,
    output_option,
)
from pipesat.commands.output import give_stdout_to_data, say
from pipesat.commands.progress import live_progress
from pipesat.commands.values import FiniteFloat
from pipesat.models.errors import ScheduleError
from pipesat.models.plan_result import Configuration, PlanResult
from pipesat.models.schedule import Schedule
from pipesat.solver.cpsat.processes import available_cores
from pipesat.solver.instances.calibration import Calibration, coverage_line, load_calibration
from pipesat.solver.instances.explain import explain
from pipesat.solver.instances.from_model import derive
from pipesat.solver.instances.gpus import memory_choice
from pipesat.solver.io.schedule_file import save_schedule
from pipesat.solver.plan.executors import RAY_TIMEOUT, make_executor
from pipesat.solver.plan.measure import iteration_lines
from pipesat.solver.plan.runtimes import iterates_on_span
from pipesat.solver.plan.space import PlanLimits, description, enumerate_space
from pipesat.solver.plan.spec import PlanSpec, load_spec
from pipesat.solver.report.current_text import current_document, current_lines
from pipesat.solver.report.plan_text import (
    no_best_text,
    plan_columns,
    plan_document,
    plan_rows,
    plan_summary,
    progress_text,
)
from pipesat.solver.report.predict_text import predict_document, predict_lines
from pipesat.solver.report.tables import format_rows

if TYPE_CHECKING:
    from pipesat.solver.plan.current import CurrentRun
    from pipesat.solver.plan.progress import PlanProgress

OVERRIDES = (
    "cluster.gpus",
    "cluster.gpu",
    "cluster.gpu_memory",
    "cluster.gpus_per_node",
    "cluster.tflops",
    "cluster.efficiency",
    "cluster.bandwidth",
    "cluster.latency",
    "cluster.node_bandwidth",
    "training.global_batch",
    "training.tensor_parallel",
    "training.expert_parallel",
    "training.schedules",
    "training.current",
    "training.runtime",
)
"""The spec keys an option overrides (`--gpus` for `cluster.gpus`)."""
LIMITS = {
    "max_gpus": "GPUs (cluster.gpus)",
    "max_global_batch": "sequences an iteration (training.global_batch)",
    "max_layers": "layers (model.layers)",
    "max_configurations": "configurations",
}
"""What each of the plan's caps (`PlanLimits`, an option `--max-...` each) counts."""
MAX_LIMIT = 2**40
"""The most a cap may be raised to: a number up to 2^40 is factorised (trial division) in a tenth of a second."""


def _limit_options() -> list[Any]:
    return [
        click.option(
            "--" + field.name.replace("_", "-"),
            type=click.IntRange(1, MAX_LIMIT),
            default=field.default,
            show_default=True,
            help=f"Refuse a plan of more {LIMITS[field.name]} than this.",
        )
        for field in dataclasses.fields(PlanLimits)
    ]


@click.command("plan", cls=PipesatCommand)
@click.argument("spec_file", metavar="SPEC", type=FILE)
@options(*spec_overrides(OVERRIDES))
@click.option("--top", type=click.IntRange(min=1), default=10, show_default=True, help="Rows of the ranked table.")
@click.option(
    "--breakdown",
    is_flag=True,
    help="Show where each row's iteration goes (compute, recompute, TP, DP and PP comm, bubble, optimizer; ms) "
    "in place of its throughput, memory and outcome.",
)
@click.option(
    "--explain",
    is_flag=True,
    help="Print how every number of the best configuration was derived: its instance and its iteration.",
)
@click.option(
    "--predict",
    metavar="CONFIGURATION",
    help="Predict this one configuration as it runs, its handwritten schedule as configured, no search "
    "(`t4 p2 d8 interleaved v2 b1 m16 full-recompute zero1 [SCHEDULE]`, as the table writes it; docs/plan.md).",
)
@FORMAT_OPTION
@output_option("Picture file (.png, .svg, .pdf): throughput against memory per GPU.")
@click.option("--save-best", type=FILE, help="Write the best configuration's schedule file (JSON).")
@click.option(
    "--launch",
    type=FILE,
    help="Write the best configuration in its runtime's own terms (--runtime's, else the first that runs it): "
    "Megatron-LM flags as a script, and files beside it (docs/runtimes/).",
)
@click.option(
    "--calibration",
    type=FILE,
    help="Calibration file (`pipesat calibrate`): a layer whose shape it has costs what was measured.",
)
@click.option(
    "--time-budget",
    type=FiniteFloat(min=0, min_open=True),
    default=120.0,
    show_default=True,
    help="Seconds for the whole plan, shared by the solves, most promising first.",
)
@click.option("--jobs", type=WORKER_COUNT, help="Solves at a time (default: this machine's cores for both executors).")
@click.option(
    "--workers",
    type=WORKER_COUNT,
    help="CP-SAT search workers of each solve (default: the cores / --jobs, at least 1).",
)
@click.option("--seed", type=click.IntRange(0, 2**31 - 1), default=0, show_default=True, help="CP-SAT random seed.")
@click.option("--executor", type=click.Choice(["local", "ray"]), default="local", show_default=True)
@click.option("--ray-address", help="A running Ray cluster's head, HEAD:6379 (with --executor ray).")
@click.option(
    "--ray-timeout",
    type=FiniteFloat(min=0, min_open=True),
    default=RAY_TIMEOUT,
    show_default=True,
    help="Seconds to reach the Ray cluster at --ray-address.",
)
@options(*_limit_options())
@PROGRESS_OPTION
@CPSAT_OPTIONS
@FORCE_OPTION
def plan_command(spec_file: Path, **options: Any) -> None:
    """Rank every way to train SPEC's model on its cluster: parallel degrees, placement, microbatch size
    and the best schedule of each, by tokens/s (docs/plan.md)."""
    started = time.monotonic()
    reads(**{"spec file": spec_file, "calibration file": options["calibration"]})
    check_writes(
        options["force"], {"-o": options["output"], "--save-best": options["save_best"], "--launch": options["launch"]}
    )
    overrides = {dotted: options[dotted.split(".")[1]] for dotted in OVERRIDES}
    spec = load_spec(spec_file, overrides)
    if (choice := memory_choice(spec.cluster.gpu, spec.cluster.gpu_memory)) is not None:
        click.echo(f"note: cluster.gpu_memory {choice}", err=True)
    calibration = None if options["calibration"] is None else load_calibration(options["calibration"])
    if calibration is not None:
        calibration.check_training(spec.training)
    if options["predict"] is not None:
        _predict(spec, options, calibration)
        return
    from pipesat.solver.plan.current import compare_current, predict_current  # the cost model, once read

    current = predict_current(spec, calibration)  # refused before any search when it does not fit
    space = enumerate_space(spec, dataclass_from_options(PlanLimits, options))
    fmt = options["fmt"]
    if fmt == "json":
        give_stdout_to_data()
    from pipesat.solver.plan.search import PlanOptions, plan  # OR-Tools, once the inputs are read

    cores = available_cores()
    parallel = options["jobs"] or cores
    cpsat_workers = options["workers"] or max(1, cores // parallel)
    executor = make_executor(
        options["executor"], parallel, cpsat_workers, options["ray_address"], options["ray_timeout"]
    )
    try:
        with live_progress(options["progress"]) as line:

            def progress(state: PlanProgress) -> None:
                line.show(progress_text(state.phase, state.done, state.total, state.best_ms, state.elapsed, state.left))

            plan_options = PlanOptions(
                time_budget=options["time_budget"],
                seed=options["seed"],
                cpsat_workers=cpsat_workers,
                cpsat_params=options["cpsat_params"],
                calibration=calibration,
                tuning=options["tuning"],
            )
            result = plan(spec, executor, plan_options, space=space, started=started, progress=progress)
        notes = [] if calibration is None else [_measured_line(spec, result, calibration)]
        if options["explain"] and result.best is not None and result.best_schedule is not None:
            on_span = iterates_on_span(spec.runtime, result.best.made_by, spec.training.bytes_per_value)
            notes += _explain_best(spec, result.best.config, result.best_schedule, calibration, on_span)
        _report(spec, result, options, notes, None if current is None else compare_current(current, result))
    finally:
        executor.close()  # after the report: a Ray started here takes a third of a second to stop


def _predict(spec: PlanSpec, options: dict[str, Any], calibration: Calibration | None) -> None:
    """`--predict`: the configuration as it runs, in lines or its JSON document (`--explain`: how its
    instance was derived and its iteration); `--save-best` writes its schedule."""
    from pipesat.solver.plan.predict import parse_configuration, predict  # the cost model, once the inputs are read

    config, schedule = parse_configuration(options["predict"])
    prediction = predict(spec, config, schedule, calibration=calibration)
    if options["fmt"] == "json":
        give_stdout_to_data()
        click.echo(json.dumps(predict_document(prediction), indent=1))
    else:
        for line in predict_lines(prediction):
            click.echo(line)
    if options["explain"]:
        described = description(spec, config)
        lines = [
            f"how {config.label} was derived:",
            *explain(described, prediction.derivation),
            *iteration_lines(spec, config, prediction.derivation, prediction.schedule, on_span=prediction.on_span),
        ]
        click.echo("\n".join(lines), err=options["fmt"] == "json")
    if options["save_best"] is not None:
        save_schedule(prediction.schedule, options["save_best"])
        click.echo(f"schedule: {options['save_best']}", err=options["fmt"] == "json")
    if options["launch"] is not None:
        from pipesat.solver.plan.runtime_bests import runs_on

        running = runs_on(config, prediction.made_by, prediction.measure.iteration_ms, ())
        line = write_launch(
            spec,
            config,
            prediction.schedule,
            prediction.made_by,
            running,
            {},
            options["launch"],
            options["force"],
            _outputs(options),
        )
        click.echo(line, err=options["fmt"] == "json")


def _outputs(options: dict[str, Any]) -> dict[str, Path | None]:
    """The files the command writes besides the launch files, as `check_writes` takes them."""
    return {"-o": options["output"], "--save-best": options["save_best"]}


def _measured_line(spec: PlanSpec, result: PlanResult, calibration: Calibration) -> str:
    """Which configurations' layers the calibration measured, and which are the model's."""
    layers = {}
    for item in result.results:
        configured = description(spec, item.config)
        layers[item.config.label] = calibration.measured(configured.model, configured.training)
    return coverage_line(calibration, layers)


def _explain_best(
    spec: PlanSpec, config: Configuration, schedule: Schedule, calibration: Calibration | None, on_span: bool
) -> list[str]:
    """`--explain`: the best configuration's instance as `instance from-model --explain` derives it,
    then its iteration and where the time goes."""
    described = description(spec, config)
    derivation = derive(described, config.label, calibration)
    return [
        f"how the best, {config.label}, was derived:",
        *explain(described, derivation),
        *iteration_lines(spec, config, derivation, schedule, on_span=on_span),
    ]


def _report(
    spec: PlanSpec, result: PlanResult, options: dict[str, Any], notes: list[str], current: CurrentRun | None
) -> None:
    """Print the ranking and the summary (and `notes` after it, then the current run against the
    plan), save the best schedule, draw the picture; then end with the exit code that says how the
    plan ended (interrupted, or with no configuration that fits)."""
    fmt = options["fmt"]
    if current is not None:
        notes = [*notes, *current_lines(current)]
    if fmt == "json":
        document = plan_document(result, options["top"])
        if current is not None:
            document["current"] = current_document(current)
        click.echo(json.dumps(document, indent=1))
    else:
        experts = any(item.config.expert_parallel > 1 for item in result.results)
        offload = any(item.config.offload != "none" for item in result.results)
        columns = plan_columns(options["breakdown"], machine=fmt == "csv", experts=experts, offload=offload)
        click.echo(format_rows(columns, plan_rows(result, options["top"]), fmt))
    for summary in [*plan_summary(result), *notes]:
        if fmt in ("text", "markdown"):
            say(summary if fmt == "text" else f"\n{summary}")
        else:
            click.echo(summary, err=True)
    if options["save_best"] is not None and result.best_schedule is not None:
        save_schedule(result.best_schedule, options["save_best"])
        click.echo(f"best schedule: {options['save_best']}", err=fmt != "text")
    best = result.best
    if options["launch"] is not None and best is not None and result.best_schedule is not None:
        own = {item.runtime: item.made_by for item in result.runtime_bests if item.config == best.config}
        line = write_launch(
            spec,
            best.config,
            result.best_schedule,
            best.made_by,
            result.best_runs_on,
            own,
            options["launch"],
            options["force"],
            _outputs(options),
        )
        click.echo(line, err=fmt != "text")
    if options["output"] is not None:
        from pipesat.solver.report.plan_plot import plot_plan  # matplotlib, imported to draw

        plot_plan(result, options["output"])
        click.echo(f"picture: {options['output']}", err=fmt != "text")
    exit_if_interrupted(result.interrupted)
    if result.best_schedule is None:
        raise ScheduleError(no_best_text(result))
