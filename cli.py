"""The pipesat command line: parses options, calls `solver`, prints. No scheduling logic lives here."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from cli_options import (
    ASCII_OPTION,
    EXIT_INVALID,
    FILE,
    FORCE_OPTION,
    FORMAT_OPTION,
    LIMIT_OPTIONS,
    MODEL_OPTIONS,
    NUMBER,
    OBJECTIVE_OPTION,
    PICTURE_OPTIONS,
    SAVE_ALL_OPTION,
    SCHEDULE_FILE,
    SOLVER_OPTIONS,
    FiniteFloat,
    PipesatGroup,
    check_writes,
    dataclass_from_options,
    defaults_from_csv,
    exit_without_torch,
    instance_options,
    live_progress,
    output_option,
    reads,
    stop_on_sigterm,
)
from cli_output import (
    echo_aside,
    echo_field,
    echo_metrics,
    echo_schedule,
    emit_instance,
    emit_schedule,
    limit_name,
    save_schedules,
    saved_files,
)
from models import Instance, Objective, expected_op_keys
from models.errors import InstanceError, ScheduleError
from models.limits import check_model_size, set_max_ops
from solver.evaluate.retime import retimed_for
from solver.evaluate.validator import check_memory, ensure_valid, validate
from solver.heuristics import NotApplicable, all_heuristics, get_heuristic, run_heuristic
from solver.instances.cost_model import Hardware, Pipeline, Transformer, command_line, explain, model_instance
from solver.instances.from_options import parse_layer_counts
from solver.io.chrome_trace import export_chrome_trace
from solver.io.schedule_file import load_schedule
from solver.report.plots import pareto_figure, save_figure
from solver.report.solve_text import goal_text, no_schedule_text, summary_fields
from solver.report.study_text import comparison_columns, comparison_text, pareto_text, pareto_title
from solver.report.tables import format_rows, heuristic_title
from solver.report.text import chrome_trace_line, describe, torch_csv_lines
from solver.solve import solve as run_solver
from solver.studies.compare import SOLVER_NAME, compare, with_torch_rows
from solver.studies.pareto import pareto_frontier, pareto_sweep, parse_limits
from solver.torch import import_schedule as torch_import
from solver.torch.export import export_torch_csv
from solver.torch.profile import ProfileSpec, profile_instance, profile_lines
from solver.torch.run import format_result, torch_run


@click.group(cls=PipesatGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--debug", is_flag=True, help="Show the full traceback on errors.")
@LIMIT_OPTIONS
@click.version_option(package_name="pipesat")
def cli(debug: bool, max_ops: int, max_model_ops: int) -> None:
    """pipesat: optimal pipeline-parallel training schedules with CP-SAT."""
    set_max_ops(max_ops, max_model_ops)


@cli.group(cls=PipesatGroup)
def instance() -> None:
    """Inspect and make instance files."""


@instance.command("show")
@instance_options
def instance_show(instance: Instance) -> None:
    """Print the fully normalised instance."""
    click.echo(json.dumps(instance.to_dict(), indent=1))


@cli.command()
@SCHEDULE_FILE
def check(schedule_file: Path) -> None:
    """Validate a schedule file; list every violation (exit 1 when invalid)."""
    schedule = load_schedule(schedule_file)
    violations = validate(schedule)
    if violations:
        for violation in violations:
            click.echo(str(violation))
        raise ScheduleError(f"{schedule_file}: {len(violations)} violation(s)")
    click.echo(f"{schedule_file}: valid ({len(schedule.ops)} ops)")


@cli.command("schedule", epilog="Schedules: " + ", ".join(h.name for h in all_heuristics()) + ".")
@click.argument("name")
@instance_options
@OBJECTIVE_OPTION
@output_option("Picture file (.png, .svg, .pdf); default: the config's output_file, else pipeline_NAME.png.")
@click.option("--no-visualization", is_flag=True, help="Do not draw the picture.")
@PICTURE_OPTIONS
@FORCE_OPTION
def schedule_command(
    name: str,
    instance: Instance,
    objective: Objective,
    output: Path | None,
    no_visualization: bool,
    save: Path | None,
    show_ascii: bool,
    force: bool,
) -> None:
    """Run the handwritten schedule NAME: its metrics, picture and schedule file.

    The earlier tool's command line works: pipesat schedule 1f1b -s 4 -b 8
    """
    heuristic = get_heuristic(name)
    picture = None if no_visualization else output or Path(instance.output_file or f"pipeline_{heuristic.name}.png")
    check_writes(force, {"--save": save, "the picture": picture})
    try:
        schedule = run_heuristic(name, instance)
    except NotApplicable as error:
        raise InstanceError(str(error)) from None
    schedule = retimed_for(objective, schedule)
    over = check_memory(schedule)
    if over:
        raise ScheduleError(
            f"{schedule.name} does not fit the memory limit ({over[0]}); "
            "raise --memory-limit or run `pipesat solve` with this limit"
        )
    echo_schedule(heuristic.title, schedule, objective, save, picture, show_ascii)


@cli.command()
@SCHEDULE_FILE
@OBJECTIVE_OPTION
@output_option("Picture file (.png, .svg, .pdf); default: SCHEDULE_FILE with .png, unless --ascii.")
@ASCII_OPTION
@FORCE_OPTION
def render(schedule_file: Path, objective: Objective, output: Path | None, show_ascii: bool, force: bool) -> None:
    """Draw a schedule file, or print it with --ascii; it must pass the validator."""
    picture = output if output is not None or show_ascii else schedule_file.with_suffix(".png")
    reads(**{"schedule file": schedule_file})
    check_writes(force, {"the picture": picture})
    schedule = load_schedule(schedule_file)
    if validate(schedule):
        raise ScheduleError(f"{schedule_file} is not a valid schedule; `pipesat check {schedule_file}` lists why")
    emit_schedule(schedule, objective, None, picture, show_ascii)


@cli.command()
@instance_options
@OBJECTIVE_OPTION
@click.option(
    "--minimize",
    type=click.Choice(["time", "memory"]),
    default="time",
    show_default=True,
    help="time: the objective under the memory limit; memory: the peak memory (under --makespan-cap).",
)
@click.option(
    "--makespan-cap",
    type=FiniteFloat(min=0, min_open=True),
    help="With --minimize memory: the largest makespan (or max span) allowed.",
)
@SOLVER_OPTIONS
@click.option(
    "--gap",
    type=FiniteFloat(0),
    default=0.0,
    show_default=True,
    help="Stop once the value is at most this fraction over the lower bound (0.05: 5% slower at most).",
)
@output_option("Picture file (.png, .svg, .pdf).")
@PICTURE_OPTIONS
@FORCE_OPTION
def solve(
    instance: Instance,
    objective: str,
    minimize: str,
    makespan_cap: float | None,
    time_limit: float,
    workers: int,
    seed: int,
    deterministic: bool,
    gap: float,
    output: Path | None,
    save: Path | None,
    show_ascii: bool,
    progress: bool | None,
    force: bool,
) -> None:
    """Find the best schedule with CP-SAT, warm-started from every handwritten schedule that fits."""
    check_writes(force, {"--save": save, "-o": output})
    check_model_size(len(expected_op_keys(instance, instance.split_backward)))  # before the header
    goal = goal_text(Objective(objective), minimize, makespan_cap)
    click.echo(f"CP-SAT ({goal}) on {describe(instance)}, {time_limit:g} s, {workers} worker(s)")
    with live_progress(progress) as line:
        result = run_solver(
            instance,
            objective=objective,
            minimize=minimize,
            time_limit=time_limit,
            workers=workers,
            seed=seed,
            deterministic=deterministic,
            gap=gap,
            makespan_cap=makespan_cap,
            progress=line,
        )
    if result.schedule is None:
        raise ScheduleError(no_schedule_text(result))
    for label, value in summary_fields(result):
        echo_field(label, value)
    echo_metrics(result.schedule, objective, skip=result.objective.title)
    emit_schedule(result.schedule, objective, save, output, show_ascii)


@cli.command("compare")
@instance_options
@OBJECTIVE_OPTION
@SOLVER_OPTIONS
@click.option("--no-solve", is_flag=True, help="Only the handwritten schedules (no CP-SAT run).")
@FORMAT_OPTION
@click.option("--with-torch", is_flag=True, help="Add torch's built-in schedules as rows (needs torch).")
@SAVE_ALL_OPTION
@FORCE_OPTION
def compare_command(
    instance: Instance,
    objective: Objective,
    no_solve: bool,
    fmt: str,
    with_torch: bool,
    save_dir: Path | None,
    force: bool,
    **search: Any,
) -> None:
    """Every handwritten schedule and the solver side by side, on one instance and memory limit."""
    if with_torch:
        exit_without_torch()
    names = [SOLVER_NAME, *(h.name for h in all_heuristics())]
    names += [f"torch:{name}" for name in torch_import.TORCH_SCHEDULES] if with_torch else []
    check_writes(force, saved_files(save_dir, names))
    with live_progress(search.pop("progress")) as line:
        comparison = compare(instance, objective, solve=not no_solve, progress=line, **search)
    if with_torch:
        comparison = with_torch_rows(comparison)
    columns = comparison_columns(
        objective, instance.memory_limit, comparison.reference_kind, machine=fmt in ("csv", "json")
    )
    table = format_rows(columns, [row.as_dict() for row in comparison.rows], fmt)
    bound = comparison.reference if comparison.reference_kind == "bound" else None
    click.echo(comparison_text(instance, table, fmt, bound))
    if save_dir is not None:
        made = [row for row in comparison.rows if row.schedule is not None]
        fitting = [(row.name, row.schedule) for row in made if row.fits is not False]
        save_schedules(fitting, save_dir, fmt, not_saved=len(made) - len(fitting))
    if comparison.solve_result is not None and comparison.solve_result.status == "infeasible":
        raise ScheduleError(no_schedule_text(comparison.solve_result))


@cli.command()
@instance_options
@OBJECTIVE_OPTION
@click.option(
    "--limits",
    help="Memory limits: START:STOP:STEP or a comma-separated list; numbers, or relative like 0.5x. "
    "Without it: every breakpoint of the trade-off, each proven (--time-limit per solve, two solves each).",
)
@SOLVER_OPTIONS
@output_option("Plot file; default pareto.png.")
@click.option("--no-visualization", is_flag=True, help="Do not draw the plot.")
@FORMAT_OPTION
@SAVE_ALL_OPTION
@FORCE_OPTION
def pareto(
    instance: Instance,
    objective: Objective,
    limits: str,
    output: Path | None,
    no_visualization: bool,
    fmt: str,
    save_dir: Path | None,
    force: bool,
    **search: Any,
) -> None:
    """The fastest schedule at each memory limit: the frontier table and its plot."""
    values, per_point = None if limits is None else parse_limits(limits, instance), search.pop("time_limit")
    picture = None if no_visualization else output or Path("pareto.png")
    files = saved_files(save_dir, [limit_name(limit) for limit in values] if values else None)
    check_writes(force, {"the plot": picture, **files})
    with live_progress(search.pop("progress")) as line:
        if values is None:
            sweep = pareto_frontier(instance, objective, time_limit_per_solve=per_point, progress=line, **search)
        else:
            sweep = pareto_sweep(instance, values, objective, time_limit_per_point=per_point, progress=line, **search)
    for _, result in sweep.points:
        if result.schedule is not None:
            ensure_valid(result.schedule)
    click.echo(pareto_text(instance, sweep.points, sweep.heuristics, objective, fmt, sweep.memory))
    if picture is not None:
        heuristics = [(heuristic_title(name), peak, value) for name, peak, value in sweep.heuristics]
        reference = instance.one_f_one_b_peak()
        title = pareto_title(instance, objective)
        figure = pareto_figure(sweep.points, heuristics, objective, reference, title, open_ended=values is None)
        echo_aside("picture", str(save_figure(figure, picture)), fmt)
    if save_dir is not None:
        solved = [(limit_name(limit), result.schedule) for limit, result in sweep.points if result.schedule]
        save_schedules(solved, save_dir, fmt)


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


@cli.command("profile")
@MODEL_OPTIONS
@click.option("--vocab", type=int, default=256, show_default=True, help="Vocabulary V of the output head.")
@click.option("--repeats", type=int, default=5, show_default=True, help="Samples per round (rounds until stable).")
@click.option("--device", type=click.Choice(["cpu", "cuda"]), default="cpu", show_default=True)
def profile_command(**options: Any) -> None:
    """Measure F, B, W and memory per stage of a small GPT-like model with torch (the torch extra)."""
    check_writes(options["force"], {"-o": options["output"]})
    instance = profile_instance(dataclass_from_options(ProfileSpec, options), name=options["name"])
    lines = profile_lines(instance)
    click.echo("\n".join(lines), err=options["output"] is None)
    emit_instance(instance, ["measured by: pipesat profile", *lines], options["output"])


@cli.command("export")
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


@cli.group("import", cls=PipesatGroup)
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
    echo_schedule(schedule.name, schedule, objective, save, None, show_ascii)


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
    echo_schedule(schedule.name, schedule, objective, save, None, show_ascii)


@cli.command("torch-run")
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


def main() -> None:
    stop_on_sigterm()
    cli(prog_name="pipesat")


if __name__ == "__main__":
    sys.exit(main())
