"""The commands that make schedules on an instance: a handwritten one (schedule), the best (solve),
all of them side by side (compare) and the fastest at each memory limit (pareto)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from pipesat.commands.checks import check_window, check_writes, exit_without_torch, picture_output
from pipesat.commands.frame import PipesatCommand, exit_if_interrupted
from pipesat.commands.options import (
    DOCUMENT_OPTION,
    FORCE_OPTION,
    FORMAT_OPTION,
    OBJECTIVE_OPTION,
    PICTURE_OPTIONS,
    PLACEMENTS_OPTION,
    SAVE_DIR_OPTION,
    SOLVER_OPTIONS,
    WINDOW_OPTION,
    enum_option,
    instance_options,
    output_option,
)
from pipesat.commands.output import (
    data_out,
    echo_aside,
    echo_field,
    echo_metrics,
    emit_schedule,
    limit_name,
    save_schedules,
    saved_files,
    say,
)
from pipesat.commands.progress import live_progress
from pipesat.commands.values import FiniteFloat
from pipesat.models import Instance, Minimize, Objective, OptionError, Status, Tuning, expected_op_keys
from pipesat.models.errors import InstanceError, ScheduleError
from pipesat.models.host_link import check_offload
from pipesat.models.limits import check_model_size
from pipesat.solver.evaluate.retime import retimed_for
from pipesat.solver.evaluate.validator import check_memory, ensure_valid
from pipesat.solver.heuristics import NotApplicable, all_heuristics, get_heuristic, run_heuristic
from pipesat.solver.report.documents import comparison_document, pareto_document, schedule_document, solve_document
from pipesat.solver.report.solve_text import goal_text, limit_too_small_text, no_schedule_text, summary_fields
from pipesat.solver.report.study_text import (
    comparison_columns,
    comparison_text,
    pareto_notes,
    pareto_text,
    pareto_title,
)
from pipesat.solver.report.tables import format_rows, heuristic_title
from pipesat.solver.report.text import describe
from pipesat.solver.report.units import units_of
from pipesat.solver.torch import import_schedule as torch_import

if TYPE_CHECKING:
    from pipesat.solver.report.schedule_plot import Window


@click.command("schedule", cls=PipesatCommand, epilog="Schedules: " + ", ".join(h.name for h in all_heuristics()) + ".")
@click.argument("name")
@instance_options
@OBJECTIVE_OPTION
@output_option("Picture file (.png, .svg, .pdf); default: the config's output_file, else pipeline_NAME.png.")
@click.option("--no-visualization", is_flag=True, help="Do not draw the picture.")
@WINDOW_OPTION
@PICTURE_OPTIONS
@DOCUMENT_OPTION
@FORCE_OPTION
def schedule_command(
    name: str,
    instance: Instance,
    objective: Objective,
    output: Path | None,
    no_visualization: bool,
    window: Window | None,
    save: Path | None,
    show_ascii: bool,
    fmt: str,
    force: bool,
) -> None:
    """Run the handwritten schedule NAME: its metrics, picture and schedule file.

    The earlier tool's command line works: pipesat schedule 1f1b -s 4 -b 8
    """
    heuristic = get_heuristic(name)
    picture = None if no_visualization else output or Path(instance.output_file or f"pipeline_{heuristic.name}.png")
    check_window(window, picture)
    check_writes(force, {"--save": save, "the picture": picture_output(picture, output)})
    data_out(fmt, save)
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
    emit_schedule(schedule, objective, save, picture, show_ascii, window, title=heuristic.title)
    if fmt == "json":
        click.echo(json.dumps(schedule_document(schedule, objective), indent=1))


@click.command("solve", cls=PipesatCommand)
@instance_options
@OBJECTIVE_OPTION
@enum_option(
    "--minimize",
    Minimize,
    Minimize.TIME,
    "time: the objective under the memory limit; memory: the peak memory (under --makespan-cap).",
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
@click.option(
    "--offload",
    is_flag=True,
    help="Let CP-SAT offload activations to host memory over the instance's host link (the makespan only).",
)
@output_option("Picture file (.png, .svg, .pdf).")
@WINDOW_OPTION
@PICTURE_OPTIONS
@DOCUMENT_OPTION
@FORCE_OPTION
def solve(
    instance: Instance,
    objective: Objective,
    minimize: Minimize,
    makespan_cap: float | None,
    time_limit: float,
    workers: int,
    seed: int,
    deterministic: bool,
    gap: float,
    offload: bool,
    output: Path | None,
    window: Window | None,
    save: Path | None,
    show_ascii: bool,
    progress: bool | None,
    cpsat_params: dict[str, str],
    tuning: Tuning,
    fmt: str,
    force: bool,
) -> None:
    """Find the best schedule with CP-SAT, warm-started from every handwritten schedule that fits."""
    check_window(window, output)
    check_writes(force, {"--save": save, "-o": output})
    check_model_size(len(expected_op_keys(instance, instance.split_backward)))  # before the header
    if offload:
        check_offload(instance.host_link_bandwidth, objective, minimize)
    data_out(fmt, save)
    # OR-Tools, imported once the inputs are checked (a refusal of them starts fast)
    from pipesat.solver.cpsat.search_parameters import cpsat_workers
    from pipesat.solver.solve import solve as run_solver

    goal = goal_text(objective, minimize, makespan_cap)
    say(f"CP-SAT ({goal}) on {describe(instance)}, {time_limit:g} s, {cpsat_workers(workers, deterministic)} worker(s)")
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
            cpsat_params=cpsat_params,
            tuning=tuning,
            offload=offload,
        )
    if fmt == "json":
        click.echo(json.dumps(solve_document(result, instance, objective), indent=1))
    interrupted = result.status == Status.INTERRUPTED
    if result.schedule is None:
        exit_if_interrupted(interrupted)
        raise ScheduleError(no_schedule_text(result, units_of(instance)))
    for label, value in summary_fields(result, units_of(instance)):
        echo_field(label, value)
    echo_metrics(result.schedule, objective, skip=result.objective.label)
    emit_schedule(result.schedule, objective, save, output, show_ascii, window)
    exit_if_interrupted(interrupted)


@click.command("compare", cls=PipesatCommand)
@instance_options
@OBJECTIVE_OPTION
@SOLVER_OPTIONS
@click.option("--no-solve", is_flag=True, help="Only the handwritten schedules (no CP-SAT run).")
@FORMAT_OPTION
@click.option("--with-torch", is_flag=True, help="Add torch's built-in schedules as rows (needs torch).")
@PLACEMENTS_OPTION
@SAVE_DIR_OPTION
@FORCE_OPTION
def compare_command(
    instance: Instance,
    objective: Objective,
    no_solve: bool,
    fmt: str,
    with_torch: bool,
    placements: tuple[str, ...],
    save_dir: Path | None,
    force: bool,
    **search: Any,
) -> None:
    """Every handwritten schedule and the solver side by side, on one instance and memory limit (or the
    same model at several placements)."""
    from pipesat.solver.studies.compare import SOLVER_NAME, compare, compare_placements, with_torch_rows  # OR-Tools

    if with_torch:
        if placements:
            raise OptionError("--with-torch compares one placement; drop --placements or --with-torch")
        exit_without_torch()
    names = [SOLVER_NAME, *(h.name for h in all_heuristics())]
    names += [f"torch:{name}" for name in torch_import.TORCH_SCHEDULES] if with_torch else []
    names = [f"{name}-{placement}" for placement in placements for name in names] or names
    check_writes(force, saved_files(save_dir, names))
    with live_progress(search.pop("progress")) as line:
        if placements:
            comparison = compare_placements(
                instance, placements, objective, solve=not no_solve, progress=line, **search
            )
        else:
            comparison = compare(instance, objective, solve=not no_solve, progress=line, **search)
    if with_torch:
        comparison = with_torch_rows(comparison)
    machine = fmt in ("csv", "json")
    columns = comparison_columns(instance, objective, comparison.reference_kind, machine, bool(placements))
    rows = [row.as_dict() for row in comparison.rows]
    if fmt == "json":
        kind, reference = comparison.reference_kind, comparison.reference
        click.echo(json.dumps(comparison_document(instance, objective, rows, kind, reference), indent=1))
    else:
        bound = comparison.reference if comparison.reference_kind == "bound" else None
        click.echo(comparison_text(instance, format_rows(columns, rows, fmt), fmt, bound, placements))
    if save_dir is not None:
        made = [row for row in comparison.rows if row.schedule is not None]
        fitting = [
            (f"{row.name}-{row.placement}" if row.placement else row.name, row.schedule)
            for row in made
            if row.schedule is not None and row.fits is not False
        ]
        save_schedules(fitting, save_dir, fmt, not_saved=len(made) - len(fitting))
    if comparison.solve_result is not None and comparison.solve_result.status == Status.INFEASIBLE:
        raise ScheduleError(no_schedule_text(comparison.solve_result, units_of(instance)))
    too_small = limit_too_small_text(instance) if comparison.solve_result is None and not placements else None
    if too_small is not None:  # without a solve, what the solve would say
        raise ScheduleError(too_small)
    exit_if_interrupted(comparison.solve_result is not None and comparison.solve_result.status == Status.INTERRUPTED)


@click.command("pareto", cls=PipesatCommand)
@instance_options
@OBJECTIVE_OPTION
@click.option(
    "--limits",
    help="Memory limits: START:STOP:STEP or a comma-separated list; numbers, or relative like 0.5x. "
    "Without it: every breakpoint of the trade-off, from the least memory up, each proven (--time-limit per "
    "solve).",
)
@SOLVER_OPTIONS
@click.option(
    "--time-budget",
    type=FiniteFloat(min=0, min_open=True),
    help="Seconds for the whole study, beside --time-limit for each solve; what is done when it runs out "
    "is the result (default: no total).",
)
@output_option("Picture file (.png, .svg, .pdf) of the plot; default pareto.png.")
@click.option("--no-visualization", is_flag=True, help="Do not draw the picture.")
@FORMAT_OPTION
@SAVE_DIR_OPTION
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
    # OR-Tools and matplotlib, imported when the command runs
    from pipesat.solver.heuristics import all_heuristics
    from pipesat.solver.report.figures import save_figure
    from pipesat.solver.report.pareto_plot import pareto_figure
    from pipesat.solver.studies.pareto import pareto_frontier, pareto_sweep, parse_limits

    try:
        values = None if limits is None else parse_limits(limits, instance)
    except InstanceError as error:
        raise InstanceError(f"--limits: {error}") from None
    per_point, budget = search.pop("time_limit"), search.pop("time_budget")
    picture = None if no_visualization else output or Path("pareto.png")
    files = saved_files(save_dir, [limit_name(limit) for limit in values] if values else None)
    check_writes(force, {"the plot": picture_output(picture, output), **files})
    with live_progress(search.pop("progress")) as line:
        if values is None:
            sweep = pareto_frontier(
                instance, objective, time_limit_per_solve=per_point, time_budget=budget, progress=line, **search
            )
        else:
            sweep = pareto_sweep(
                instance, values, objective, time_limit_per_point=per_point, time_budget=budget, progress=line, **search
            )
    for _, result in [*sweep.points, *sweep.offloaded]:
        if result.schedule is not None:
            ensure_valid(result.schedule)
    if fmt == "json":
        document = pareto_document(instance, objective, sweep.points, sweep.memory, sweep.heuristics, sweep.offloaded)
        ending = {"ceiling": sweep.ceiling, "ended": sweep.ended, "left_out": sweep.left_out}
        click.echo(json.dumps(document | ending, indent=1))
    else:
        text = pareto_text(instance, sweep.points, sweep.heuristics, objective, fmt, sweep.memory, sweep.offloaded)
        notes = pareto_notes(instance, sweep.ceiling, sweep.ended, sweep.left_out)
        for note in notes if fmt != "text" else ():  # csv and markdown hold the rows alone
            click.echo(note, err=True)
        click.echo("\n".join([text, *notes]) if fmt == "text" else text)
    if picture is not None:
        heuristics = [(heuristic_title(name), peak, value) for name, peak, value in sweep.heuristics]
        reference = instance.one_f_one_b_peak()
        title = pareto_title(instance, objective)
        figure = pareto_figure(
            sweep.points,
            heuristics,
            objective,
            reference,
            title,
            open_ended=values is None,
            units=units_of(instance),
            ceiling=sweep.ceiling,
            offloaded=sweep.offloaded,
            offloading={heuristic_title(heuristic.name) for heuristic in all_heuristics() if heuristic.offloads},
        )
        echo_aside("picture", str(save_figure(figure, picture)), fmt)
    if save_dir is not None:
        solved = [(limit_name(limit), result.schedule) for limit, result in sweep.points if result.schedule]
        save_schedules(solved, save_dir, fmt)
    exit_if_interrupted(any(result.status == Status.INTERRUPTED for _, result in sweep.points))
