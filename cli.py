"""The pipesat command line: parses options, calls `solver`, prints. No scheduling logic lives here."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import click

from models import InputError, Instance, InstanceError, PipesatError, Schedule, ScheduleError, load_instance
from solver.evaluate.metrics import OBJECTIVES, compute_metrics, relative_gap
from solver.evaluate.retime import retime_for_span
from solver.evaluate.validator import ensure_valid, validate
from solver.heuristics import NotApplicable, all_heuristics, get_heuristic, run_heuristic
from solver.io.schedule_file import load_schedule, save_schedule
from solver.report.ascii_view import render_ascii
from solver.report.plots import PICTURE_SUFFIXES, pareto_figure, plot_schedule, save_figure
from solver.report.tables import (
    FORMATS,
    Column,
    format_number,
    format_percent,
    format_rows,
    heuristic_title,
    percent_or_dash,
)
from solver.solve import SolveResult
from solver.solve import solve as run_solver
from solver.studies.compare import compare, comparison_columns
from solver.studies.pareto import pareto_sweep, parse_limits
from solver.torch.import_schedule import TORCH_SCHEDULES, with_torch_rows

EXIT_INVALID = 1
EXIT_BAD_INPUT = 2

# Options that take a space-separated list, as the earlier tool's argparse `nargs="+"` did.
LIST_OPTIONS = ("-f", "--forward-times", "-bw", "--backward-times", "-w", "--weight-times")


def _is_numbers(token: str) -> bool:
    """Whether a token is one number or a comma-separated list of numbers."""
    parts = token.replace(",", " ").split()
    try:
        [float(part) for part in parts]
    except ValueError:
        return False
    return bool(parts)


def join_list_options(args: list[str]) -> list[str]:
    """Turn `-f 1 2 3` into `-f "1 2 3"` so that click sees one value per list option."""
    joined: list[str] = []
    i = 0
    while i < len(args):
        joined.append(args[i])
        i += 1
        if joined[-1] in LIST_OPTIONS:
            values = []
            while i < len(args) and _is_numbers(args[i]):
                values.append(args[i])
                i += 1
            if values:
                joined.append(" ".join(values))
    return joined


# Raised by click >= 8.2 for a group called with no command; pipesat shows its help then.
NO_ARGS_IS_HELP = getattr(click.exceptions, "NoArgsIsHelpError", ())


class PipesatCommand(click.Command):
    """A command whose list options accept space-separated numbers."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        return super().parse_args(ctx, join_list_options(args))


class PipesatGroup(click.Group):
    """Turns pipesat's errors into one line on stderr and an exit code (a traceback with --debug)."""

    command_class = PipesatCommand
    group_class = type

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except PipesatError as error:
            if ctx.find_root().params.get("debug"):
                raise
            click.echo(f"error: {error}", err=True)
            code = EXIT_BAD_INPUT if isinstance(error, InputError) else EXIT_INVALID
            ctx.exit(code)

    def main(self, *args: Any, standalone_mode: bool = True, **kwargs: Any) -> Any:
        """As click's main, but a usage error is one `error:` line too (click prints three)."""
        if not standalone_mode:
            return super().main(*args, standalone_mode=False, **kwargs)
        try:
            result = super().main(*args, standalone_mode=False, **kwargs)
        except NO_ARGS_IS_HELP as error:
            click.echo(error.ctx.get_help() if error.ctx else str(error))
            sys.exit(0)
        except click.UsageError as error:
            where = f" (see '{error.ctx.command_path} --help')" if error.ctx else ""
            click.echo(f"error: {error.format_message()}{where}", err=True)
            sys.exit(EXIT_BAD_INPUT)
        except click.ClickException as error:
            click.echo(f"error: {error.format_message()}", err=True)
            sys.exit(error.exit_code)
        except click.Abort:
            click.echo("error: aborted", err=True)
            sys.exit(EXIT_INVALID)
        sys.exit(result if isinstance(result, int) else 0)


def parse_numbers(option: str, text: str | None) -> list[float] | float | None:
    """A list option's value: one number (for every stage) or several, space- or comma-separated."""
    if text is None:
        return None
    tokens = text.replace(",", " ").split()
    if not tokens:
        raise InstanceError(f"{option} needs at least one number")
    try:
        numbers = [float(token) for token in tokens]
    except ValueError:
        raise InstanceError(f"{option} takes numbers, got {text!r}") from None
    return numbers[0] if len(numbers) == 1 else numbers


def instance_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """The options every command that reads an instance shares; they override the file's keys."""
    options = [
        click.argument("instance_file", required=False, type=click.Path(dir_okay=False, path_type=Path)),
        click.option(
            "-c",
            "--config",
            type=click.Path(dir_okay=False, path_type=Path),
            help="Instance file (YAML or JSON); the same as the INSTANCE argument.",
        ),
        click.option(
            "-s",
            "--num-stages",
            "--num-devices",
            "num_devices",
            type=int,
            help="Number of devices (the earlier tool's 'stages').",
        ),
        click.option(
            "-b", "--num-batches", "--num-microbatches", "num_microbatches", type=int, help="Number of microbatches."
        ),
        click.option("-f", "--forward-times", help="Forward time per stage, space-separated (one number: all)."),
        click.option("-bw", "--backward-times", help="Backward time per stage (the whole backward unless -w)."),
        click.option("-w", "--weight-times", help="Weight-gradient time per stage: splits the backward into B and W."),
        click.option("--p2p-time", type=float, help="Point-to-point latency between devices."),
        click.option("--chunks", type=int, help="Stages (chunks) per device."),
        click.option("--placement", help="linear, interleaved, vshape, or a comma-separated stage-to-device list."),
        click.option("--memory-limit", help="Per-device activation memory cap: a number or relative like 0.5x."),
    ]
    for option in reversed(options):
        command = option(command)

    @functools.wraps(command)
    def wrapper(**kwargs: Any) -> Any:
        instance_keys = (
            "instance_file",
            "config",
            "num_devices",
            "num_microbatches",
            "forward_times",
            "backward_times",
            "weight_times",
            "p2p_time",
            "chunks",
            "placement",
            "memory_limit",
        )
        values = {key: kwargs.pop(key) for key in instance_keys}
        kwargs["instance"] = build_instance(**values)
        return command(**kwargs)

    return wrapper


def build_instance(instance_file: Path | None = None, config: Path | None = None, **options: Any) -> Instance:
    """An instance from a file and/or command-line options (options win over the file's keys)."""
    if instance_file and config and instance_file != config:
        raise InstanceError(f"give the instance once: both {instance_file} and --config {config}")
    path = instance_file or config
    for key in ("forward_times", "backward_times", "weight_times"):
        options[key] = parse_numbers("--" + key.replace("_", "-"), options.get(key))
    placement = options.get("placement")
    if placement and "," in placement:
        try:
            options["placement"] = [int(x) for x in placement.split(",")]
        except ValueError:
            raise InstanceError(f"--placement list must be device numbers, got {placement!r}") from None
    given = {key: value for key, value in options.items() if value is not None}
    if path is not None:
        return load_instance(path, **given)
    if "num_devices" not in given or "num_microbatches" not in given:
        raise InstanceError("give an instance file, or at least --num-stages/-s and --num-batches/-b")
    return Instance.from_dict(given)


@click.group(cls=PipesatGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--debug", is_flag=True, help="Show the full traceback on errors.")
@click.version_option(package_name="pipesat")
def cli(debug: bool) -> None:
    """pipesat: optimal pipeline-parallel training schedules with CP-SAT."""


@cli.group(cls=PipesatGroup)
def instance() -> None:
    """Inspect and make instance files."""


@instance.command("show")
@instance_options
def instance_show(instance: Instance) -> None:
    """Print the fully normalised instance."""
    import json

    click.echo(json.dumps(instance.to_dict(), indent=1))


@cli.command()
@click.argument("schedule_file", type=click.Path(dir_okay=False, path_type=Path))
def check(schedule_file: Path) -> None:
    """Validate a schedule file; list every violation (exit 1 when invalid)."""
    schedule = load_schedule(schedule_file)
    violations = validate(schedule)
    if violations:
        for violation in violations:
            click.echo(str(violation))
        raise ScheduleError(f"{schedule_file}: {len(violations)} violation(s)")
    click.echo(f"{schedule_file}: valid ({len(schedule.ops)} ops)")


# --- Schedules: schedule, solve, compare, pareto, render (issue 5) ---------------------------------

OBJECTIVE_OPTION = click.option(
    "--objective",
    type=click.Choice(OBJECTIVES),
    default="makespan",
    show_default=True,
    help="makespan (first start to last end) or span (max per-device span, the steady-state time).",
)
OBJECTIVE_NAMES = {"makespan": "makespan", "span": "max span", "memory": "peak memory"}


def picture_path(ctx: click.Context, param: click.Parameter, value: Path | None) -> Path | None:
    """Check a picture file's extension while parsing, before any long solve."""
    if value is not None and value.suffix.lower() not in PICTURE_SUFFIXES:
        raise InstanceError(f"{param.opts[-1]} {value}: name the picture .png, .svg or .pdf")
    return value


def output_option(help_text: str) -> Callable[..., Any]:
    """`-o/--output`: a picture file whose extension picks the format."""
    return click.option(
        "-o", "--output", type=click.Path(dir_okay=False, path_type=Path), callback=picture_path, help=help_text
    )


def picture_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """`--save`, `--ascii`: what every command that makes or reads a schedule can do with it."""
    command = click.option("--ascii", "show_ascii", is_flag=True, help="Print the schedule as text, to scale.")(command)
    return click.option(
        "--save", type=click.Path(dir_okay=False, path_type=Path), help="Write the schedule file (JSON)."
    )(command)


def echo_field(label: str, value: str) -> None:
    """`label:  value`, values aligned in one column."""
    click.echo(f"{label + ':':<16}{value}")


def emit_schedule(
    schedule: Schedule, objective: str, save: Path | None, picture: Path | None, show_ascii: bool
) -> None:
    """Validate a schedule, then save, draw and print it as asked. Nothing invalid leaves here."""
    ensure_valid(schedule)
    if save is not None:
        echo_field("schedule", str(save_schedule(schedule, save)))
    if picture is not None:
        echo_field("picture", str(plot_schedule(schedule, picture, objective)))
    if show_ascii:
        click.echo()
        click.echo(render_ascii(schedule))


def echo_metrics(schedule: Schedule, objective: str, skip: str | None = None) -> None:
    """The schedule's makespan, max span, bubble rate and peak memory (less the `skip` one)."""
    metrics = compute_metrics(schedule)
    chosen = "makespan" if objective == "makespan" else "max span"
    per_device = ", ".join(format_number(peak) for peak in metrics.peak_memory)
    limit = schedule.instance.memory_limit
    fits = "" if limit is None else f"; limit {format_number(limit)}"
    fields = {
        "makespan": format_number(metrics.makespan),
        "max span": format_number(metrics.max_span),
        "bubble rate": f"{format_percent(metrics.bubble_rate_for(objective))} (of the {chosen})",
        "peak memory": f"{format_number(metrics.max_peak_memory)} (per device: {per_device}{fits})",
    }
    for label, value in fields.items():
        if label != skip:
            echo_field(label, value)


def describe(instance: Instance) -> str:
    """`name: 4 devices, 8 microbatches, ...`: the instance in one line."""
    parts = [f"{instance.num_devices} devices", f"{instance.num_microbatches} microbatches"]
    if instance.chunks > 1:
        parts.append(f"{instance.chunks} chunks ({instance.placement_name()})")
    parts.append("split backward" if instance.split_backward else "fused backward")
    if instance.p2p_time:
        parts.append(f"p2p {format_number(instance.p2p_time)}")
    if instance.memory_limit is not None:
        relative = instance.memory_limit / instance.one_f_one_b_peak()
        parts.append(f"memory limit {format_number(instance.memory_limit)} ({format_number(relative)}x)")
    return (f"{instance.name}: " if instance.name else "") + ", ".join(parts)


@cli.command("schedule", epilog="Schedules: " + ", ".join(h.name for h in all_heuristics()) + ".")
@click.argument("name")
@instance_options
@OBJECTIVE_OPTION
@output_option("Picture file (.png, .svg, .pdf); default: the config's output_file, else pipeline_NAME.png.")
@click.option("--no-visualization", is_flag=True, help="Do not draw the picture.")
@picture_options
def schedule_command(
    name: str,
    instance: Instance,
    objective: str,
    output: Path | None,
    no_visualization: bool,
    save: Path | None,
    show_ascii: bool,
) -> None:
    """Run the handwritten schedule NAME: its metrics, picture and schedule file.

    The earlier tool's command line works: pipesat schedule 1f1b -s 4 -b 8
    """
    try:
        schedule = run_heuristic(name, instance)
    except NotApplicable as error:
        raise InstanceError(str(error)) from None
    if objective == "span":
        schedule = retime_for_span(schedule)
    over = [v for v in validate(schedule) if v.rule == "memory"]
    if over:
        raise ScheduleError(
            f"{schedule.name} does not fit the memory limit ({over[0]}); "
            "raise --memory-limit or run `pipesat solve` with this limit"
        )
    click.echo(f"{get_heuristic(name).title} on {describe(instance)}")
    echo_metrics(schedule, objective)
    picture = None if no_visualization else output or Path(instance.output_file or f"pipeline_{schedule.name}.png")
    emit_schedule(schedule, objective, save, picture, show_ascii)


@cli.command()
@click.argument("schedule_file", type=click.Path(dir_okay=False, path_type=Path))
@OBJECTIVE_OPTION
@output_option("Picture file (.png, .svg, .pdf); default: SCHEDULE_FILE with .png, unless --ascii.")
@click.option("--ascii", "show_ascii", is_flag=True, help="Print the schedule as text, to scale.")
def render(schedule_file: Path, objective: str, output: Path | None, show_ascii: bool) -> None:
    """Draw a schedule file, or print it with --ascii; it must pass the validator."""
    schedule = load_schedule(schedule_file)
    if validate(schedule):
        raise ScheduleError(f"{schedule_file} is not a valid schedule; `pipesat check {schedule_file}` lists why")
    picture = output if output is not None or show_ascii else schedule_file.with_suffix(".png")
    emit_schedule(schedule, objective, None, picture, show_ascii)


SOLVER_OPTIONS = (
    click.option(
        "--time-limit",
        type=click.FloatRange(min=0, min_open=True),
        default=10.0,
        show_default=True,
        help="Seconds CP-SAT may search (per memory limit in pareto).",
    ),
    click.option("--workers", type=click.IntRange(min=1), default=1, show_default=True, help="CP-SAT search workers."),
    click.option("--seed", type=int, default=0, show_default=True, help="CP-SAT random seed."),
    click.option("--progress/--no-progress", default=None, help="The live progress line (default: on a terminal)."),
)


def solver_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """`--time-limit`, `--workers`, `--seed`, `--progress`: shared by every command that runs the solver."""
    for option in reversed(SOLVER_OPTIONS):
        command = option(command)
    return command


class ProgressLine:
    """The live `elapsed best bound gap` line while the solver searches (on a terminal only)."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.shown = False

    def __call__(self, elapsed: float, best: float | None, bound: float | None) -> None:
        if not self.enabled:
            return
        text = f"{elapsed:7.1f}s  best {_or_dash(best):>10}  bound {_or_dash(bound):>10}"
        if best is not None and bound is not None and best > 0:
            text += f"  gap {format_percent((best - bound) / best)}"
        click.echo("\r" + text.ljust(72), nl=False, err=True)
        self.shown = True

    def clear(self) -> None:
        if self.shown:
            click.echo("\r" + " " * 72 + "\r", nl=False, err=True)


def _or_dash(value: float | None) -> str:
    return "-" if value is None else format_number(value)


@contextlib.contextmanager
def live_progress(enabled: bool | None) -> Iterator[ProgressLine]:
    """The progress callback for the solver: shown on a terminal (or as `enabled` says), cleared after."""
    line = ProgressLine(sys.stderr.isatty() if enabled is None else enabled)
    try:
        yield line
    finally:
        line.clear()


def echo_solve_summary(result: SolveResult) -> None:
    """Status, value, bound, gap, the best handwritten schedule and the improvement over it, and the
    starting point when the search started elsewhere (the periodic start)."""
    echo_field("status", result.status + (" (proven by CP-SAT)" if result.status == "optimal" else ""))
    echo_field(OBJECTIVE_NAMES[result.objective], _or_dash(result.value))
    echo_field("lower bound", _or_dash(result.bound))
    echo_field("gap", "-" if result.gap is None else format_percent(result.gap))
    if result.best_heuristic is None:
        echo_field("best heuristic", "no handwritten schedule fits this instance and limit")
    else:
        improvement = ""
        if result.value is not None and result.best_heuristic_value:
            gain = relative_gap(result.best_heuristic_value, result.value)
            improvement = f"; improvement {format_percent(gain)}"
        echo_field(
            "best heuristic",
            f"{heuristic_title(result.best_heuristic)} = {_or_dash(result.best_heuristic_value)}{improvement}",
        )
    if result.start_heuristic is not None and result.start_heuristic != result.best_heuristic:
        echo_field("started from", f"{heuristic_title(result.start_heuristic)} = {_or_dash(result.start_value)}")
    first = "" if result.time_to_first is None else f", first schedule at {result.time_to_first:.2f} s"
    best = "" if result.time_to_best is None else f", best at {result.time_to_best:.2f} s"
    echo_field("solve time", f"{result.solve_time:.2f} s{first}{best}")


def no_schedule_error(result: SolveResult, instance: Instance) -> ScheduleError:
    """Why the solver returned no schedule, with the smallest feasible limit when it is known."""
    if result.status == "infeasible":
        if result.smallest_feasible_limit is not None and instance.memory_limit is not None:
            return ScheduleError(
                f"no schedule fits the memory limit {format_number(instance.memory_limit)}; "
                f"the smallest feasible limit is {format_number(result.smallest_feasible_limit)}"
            )
        return ScheduleError(f"no schedule fits: {result.message.removeprefix('infeasible: ')}")
    detail = f" ({result.message})" if result.message else ""
    return ScheduleError(f"the solver found no schedule ({result.status}){detail}; raise --time-limit")


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
@click.option("--makespan-cap", type=float, help="With --minimize memory: the largest makespan (or max span) allowed.")
@solver_options
@click.option("--gap", type=click.FloatRange(0, 1), default=0.0, show_default=True, help="Stop at this relative gap.")
@output_option("Picture file (.png, .svg, .pdf).")
@picture_options
def solve(
    instance: Instance,
    objective: str,
    minimize: str,
    makespan_cap: float | None,
    time_limit: float,
    workers: int,
    seed: int,
    gap: float,
    output: Path | None,
    save: Path | None,
    show_ascii: bool,
    progress: bool | None,
) -> None:
    """Find the best schedule with CP-SAT, warm-started from every handwritten schedule that fits."""
    goal = f"least {OBJECTIVE_NAMES[objective]}"
    if minimize == "memory":
        cap = "" if makespan_cap is None else f" with {OBJECTIVE_NAMES[objective]} <= {makespan_cap:g}"
        goal = f"least peak memory{cap}"
    click.echo(f"CP-SAT ({goal}) on {describe(instance)}, {time_limit:g} s, {workers} worker(s)")
    with live_progress(progress) as line:
        result = run_solver(
            instance,
            objective=objective,
            minimize=minimize,
            time_limit=time_limit,
            workers=workers,
            seed=seed,
            gap=gap,
            makespan_cap=makespan_cap,
            progress=line,
        )
    if result.schedule is None:
        raise no_schedule_error(result, instance)
    echo_solve_summary(result)
    echo_metrics(result.schedule, objective, skip=OBJECTIVE_NAMES[result.objective])
    emit_schedule(result.schedule, objective, save, output, show_ascii)


SAVE_ALL_OPTION = click.option(
    "--save",
    "save_dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Directory to write every schedule file into (NAME.json).",
)


def save_schedules(schedules: list[tuple[str, Schedule]], directory: Path, fmt: str, note: str = "") -> None:
    """Write each (name, schedule) as DIRECTORY/name.json; say so on stdout, or stderr for csv/json."""
    for name, schedule in schedules:
        save_schedule(schedule, directory / f"{name}.json")
    message = f"{len(schedules)} files in {directory}{note}"
    if fmt == "table":
        echo_field("schedules", message)
    else:
        click.echo(f"schedules: {message}", err=True)


@cli.command("compare")
@instance_options
@OBJECTIVE_OPTION
@solver_options
@click.option("--no-solve", is_flag=True, help="Only the handwritten schedules (no CP-SAT run).")
@click.option(
    "--format", "fmt", type=click.Choice(FORMATS), default="table", show_default=True, help="How to print the rows."
)
@click.option("--with-torch", is_flag=True, help="Add torch's built-in schedules as rows (needs torch).")
@SAVE_ALL_OPTION
def compare_command(
    instance: Instance,
    objective: str,
    time_limit: float,
    workers: int,
    seed: int,
    progress: bool | None,
    no_solve: bool,
    fmt: str,
    with_torch: bool,
    save_dir: Path | None,
) -> None:
    """Every handwritten schedule and the solver side by side, on one instance and memory limit."""
    if with_torch:
        exit_without_torch()
    with live_progress(progress) as line:
        comparison = compare(
            instance, objective, time_limit=time_limit, solve=not no_solve, workers=workers, seed=seed, progress=line
        )
    if with_torch:
        comparison = with_torch_rows(comparison)
    rows = [row.as_dict() for row in comparison.rows]
    table = format_rows(comparison_columns(comparison, machine=fmt in ("csv", "json")), rows, fmt)
    if fmt == "table":
        click.echo(describe(instance))
        click.echo()
    click.echo(table)
    if fmt == "table" and comparison.reference_kind == "bound":
        click.echo(f"\nThe optimum is not proven: gaps are to the lower bound {format_number(comparison.reference)}.")
    if save_dir is not None:
        made = [row for row in comparison.rows if row.schedule is not None]
        fitting = [(row.name, row.schedule) for row in made if row.fits is not False]
        over = len(made) - len(fitting)
        save_schedules(fitting, save_dir, fmt, f" ({over} over the memory limit not saved)" if over else "")
    if comparison.solve_result is not None and comparison.solve_result.status == "infeasible":
        raise no_schedule_error(comparison.solve_result, instance)


@cli.command()
@instance_options
@OBJECTIVE_OPTION
@click.option(
    "--limits",
    default="0.33x:2x:0.1x",
    show_default=True,
    help="Memory limits: START:STOP:STEP or a comma-separated list; numbers, or relative like 0.5x.",
)
@solver_options
@output_option("Plot file; default pareto.png.")
@click.option("--no-visualization", is_flag=True, help="Do not draw the plot.")
@click.option(
    "--format", "fmt", type=click.Choice(FORMATS), default="table", show_default=True, help="How to print the rows."
)
@SAVE_ALL_OPTION
def pareto(
    instance: Instance,
    objective: str,
    limits: str,
    time_limit: float,
    workers: int,
    seed: int,
    progress: bool | None,
    output: Path | None,
    no_visualization: bool,
    fmt: str,
    save_dir: Path | None,
) -> None:
    """The fastest schedule at each memory limit: the frontier table and its plot."""
    values = parse_limits(limits, instance)
    with live_progress(progress) as line:
        sweep = pareto_sweep(
            instance,
            values,
            objective=objective,
            time_limit_per_point=time_limit,
            workers=workers,
            seed=seed,
            progress=line,
        )
    for _, result in sweep.points:
        if result.schedule is not None:
            ensure_valid(result.schedule)
    reference = instance.one_f_one_b_peak()
    rows = [
        {
            "limit": limit,
            "relative_limit": limit / reference,
            "status": result.status,
            "value": result.value,
            "bound": result.bound,
            "gap": result.gap,
            "peak_memory": None if result.schedule is None else compute_metrics(result.schedule).max_peak_memory,
        }
        for limit, result in sweep.points
    ]
    what = OBJECTIVE_NAMES[objective]
    columns = [
        Column("limit", "memory limit"),
        Column("relative_limit", "x 1F1B peak", lambda x: f"{x:.2f}x"),
        Column("status", "status", align_right=False),
        Column("value", what),
        Column("bound", "lower bound"),
        Column("gap", "gap", percent_or_dash),
        Column("peak_memory", "peak memory"),
    ]
    if fmt == "table":
        click.echo(f"{describe(instance)}; 1x = the 1F1B peak {format_number(reference)}")
        click.echo()
    click.echo(format_rows(columns, rows, fmt))
    if fmt == "table":
        click.echo()
        heuristic_rows = [
            {"name": heuristic_title(name), "peak": peak, "value": value} for name, peak, value in sweep.heuristics
        ]
        heuristic_columns = [
            Column("name", "handwritten", align_right=False),
            Column("peak", "peak memory"),
            Column("value", what),
        ]
        click.echo(format_rows(heuristic_columns, heuristic_rows, fmt))
    if not no_visualization:
        title = f"{what} against memory limit: {describe(dataclasses.replace(instance, memory_limit=None))}"
        heuristics = [(heuristic_title(name), peak, value) for name, peak, value in sweep.heuristics]
        figure = pareto_figure(sweep.points, heuristics, objective, reference, title)
        path = save_figure(figure, output or Path("pareto.png"))
        if fmt == "table":
            echo_field("picture", str(path))
        else:
            click.echo(f"picture: {path}", err=True)
    if save_dir is not None:
        solved = [(f"limit-{limit:g}", result.schedule) for limit, result in sweep.points if result.schedule]
        save_schedules(solved, save_dir, fmt)


# --- Instances from real models: instance from-model, profile (issue 7) ----------------------------


def parse_layer_counts(text: str | None) -> tuple[int, ...] | None:
    """`--layers-per-stage 2,3,3,2` (or space-separated) as whole numbers."""
    if text is None:
        return None
    tokens = text.replace(",", " ").split()
    try:
        return tuple(int(token) for token in tokens)
    except ValueError:
        raise InstanceError(f"--layers-per-stage takes whole numbers, one per stage, got {text!r}") from None


def emit_instance(instance: Instance, comments: list[str], output: Path | None, force: bool) -> None:
    """Write the instance file (comments on top) to OUTPUT, or print it when there is none."""
    from models.instance_file import format_instance, save_instance

    if output is None:
        click.echo(format_instance(instance, comments), nl=False)
        return
    click.echo(f"wrote {save_instance(instance, output, comments, overwrite=force)}: {describe(instance)}")


def model_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """The transformer's sizes, shared by `instance from-model` and `profile`."""
    options = [
        click.option("--layers", type=int, required=True, help="Transformer layers."),
        click.option("--hidden", type=int, required=True, help="Hidden size h."),
        click.option("--heads", type=int, required=True, help="Attention heads a (must divide --hidden)."),
        click.option("--seq-len", type=int, required=True, help="Sequence length s."),
        click.option("--microbatch-size", type=int, default=1, show_default=True, help="Sequences per microbatch b."),
        click.option("-p", "--devices", type=int, required=True, help="Pipeline devices p."),
        click.option("--chunks", type=int, default=1, show_default=True, help="Stages per device v."),
        click.option("-m", "--microbatches", type=int, required=True, help="Microbatches per iteration."),
        click.option("--placement", help="linear, interleaved or vshape; default linear, or interleaved with chunks."),
        click.option("--name", default="", help="Instance name."),
        click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), help="Instance file to write."),
        click.option("--force", is_flag=True, help="Overwrite an existing --output file."),
    ]
    for option in reversed(options):
        command = option(command)
    return command


@instance.command("from-model")
@model_options
@click.option("--vocab", type=int, default=0, show_default=True, help="Vocabulary V of the output head (0: no head).")
@click.option("--flash-attention", is_flag=True, help="Attention scores not kept (M_B without 5a·s), recomputed in B.")
@click.option("--layers-per-stage", help="Explicit layer counts, one per stage (p x chunks), for uneven splits.")
@click.option("--tflops", type=float, required=True, help="Peak device throughput in TFLOP/s.")
@click.option("--efficiency", type=float, default=0.5, show_default=True, help="Fraction of peak reached.")
@click.option("--bandwidth", type=float, default=50.0, show_default=True, help="Link bandwidth in GB/s.")
@click.option("--latency", type=float, default=10.0, show_default=True, help="Link latency in microseconds.")
@click.option("--bytes-per-value", type=float, default=2.0, show_default=True, help="Bytes per activation value.")
@click.option("--explain", is_flag=True, help="Print how every number was derived.")
def instance_from_model(**options: Any) -> None:
    """An instance from a transformer description and its hardware (ZB paper cost model; ms and MiB)."""
    from solver.instances.cost_model import Hardware, Pipeline, Transformer, command_line, explain, model_instance

    sizes = ("layers", "hidden", "heads", "seq_len", "microbatch_size", "vocab", "flash_attention")
    model = Transformer(*(options[key] for key in sizes))
    hardware = Hardware(*(options[key] for key in ("tflops", "efficiency", "bandwidth", "latency", "bytes_per_value")))
    split = parse_layer_counts(options["layers_per_stage"])
    pipeline = Pipeline(options["devices"], options["microbatches"], options["chunks"], options["placement"], split)
    instance = model_instance(model, hardware, pipeline, name=options["name"])
    lines = explain(model, hardware, pipeline)
    if options["explain"]:
        click.echo("\n".join(lines))
    emit_instance(instance, [command_line(model, hardware, pipeline), "", *lines], options["output"], options["force"])


@cli.command("profile")
@model_options
@click.option("--vocab", type=int, default=256, show_default=True, help="Vocabulary V of the output head.")
@click.option("--repeats", type=int, default=5, show_default=True, help="Samples per round (rounds until stable).")
@click.option("--device", type=click.Choice(["cpu", "cuda"]), default="cpu", show_default=True)
def profile_command(**options: Any) -> None:
    """Measure F, B, W and memory per stage of a small GPT-like model with torch (the torch extra)."""
    from solver.torch.profile import ProfileSpec, profile_instance, profile_lines

    keys = ("devices", "microbatches", "chunks", "layers", "hidden", "heads", "seq_len", "microbatch_size", "vocab")
    spec = ProfileSpec(
        *(options[key] for key in keys),
        repeats=options["repeats"],
        device=options["device"],
        placement=options["placement"],
    )
    instance = profile_instance(spec, name=options["name"])
    lines = profile_lines(instance)
    click.echo("\n".join(lines), err=options["output"] is None)
    emit_instance(instance, ["measured by: pipesat profile", *lines], options["output"], options["force"])


# --- PyTorch: export, import torch/csv, torch-run, compare --with-torch (issue 6) -------------------


def exit_without_torch() -> None:
    """Exit 2 with the install line when torch (the optional extra) is not installed."""
    from solver.torch.import_schedule import TorchMissing, require_torch

    try:
        require_torch()
    except TorchMissing as error:
        click.echo(f"error: {error}", err=True)
        click.get_current_context().exit(EXIT_BAD_INPUT)


@cli.command("export")
@click.argument("schedule_file", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--to", "target", type=click.Choice(["torch-csv", "chrome-trace"]), required=True, help="The format to write."
)
@click.argument("out", type=click.Path(dir_okay=False, path_type=Path))
def export_command(schedule_file: Path, target: str, out: Path) -> None:
    """Write a schedule file as torch's compute_only CSV or as a Chrome trace (Perfetto, chrome://tracing).

    Only a valid schedule whose order cannot deadlock is written.
    """
    from solver.io.chrome_trace import export_chrome_trace
    from solver.torch.export import export_torch_csv

    schedule = load_schedule(schedule_file)
    if target == "torch-csv":
        path = export_torch_csv(schedule, out)
        echo_field("torch CSV", f"{path} ({schedule.instance.num_devices} ranks, {len(schedule.ops)} actions)")
        click.echo("load it with _PipelineScheduleRuntime._load_csv(path, format='compute_only') (torch 2.13)")
    else:
        path = export_chrome_trace(schedule, out)
        echo_field("Chrome trace", f"{path} (one track per device, memory counters; 1 time unit = 1 ms)")


@cli.group("import", cls=PipesatGroup)
def import_group() -> None:
    """Time PyTorch's schedules on an instance: torch's built-ins, or any torch schedule CSV."""


def echo_imported(schedule: Schedule, objective: str, save: Path | None, show_ascii: bool) -> None:
    click.echo(f"{schedule.name} on {describe(schedule.instance)}")
    echo_metrics(schedule, objective)
    emit_schedule(schedule, objective, save, None, show_ascii)


@import_group.command("torch", epilog="Schedules: " + ", ".join(TORCH_SCHEDULES) + ".")
@click.argument("name")
@instance_options
@OBJECTIVE_OPTION
@picture_options
def import_torch_command(name: str, instance: Instance, objective: str, save: Path | None, show_ascii: bool) -> None:
    """Torch's built-in schedule NAME, timed with the instance's durations and validated (needs torch).

    Multi-stage schedules take --chunks; ZBVZeroBubble and DualPipeV need --placement vshape.
    """
    from solver.torch.import_schedule import import_torch_schedule

    exit_without_torch()
    try:
        schedule = import_torch_schedule(name, instance)
    except NotApplicable as error:
        raise InstanceError(str(error)) from None
    echo_imported(schedule, objective, save, show_ascii)


def defaults_from_csv(ctx: click.Context, param: click.Parameter, value: Path) -> Any:
    """Read the CSV first (an eager argument): its rows set the devices, microbatches and placement,
    which become the defaults of the instance options (click's default_map)."""
    from solver.torch.import_schedule import placement_options, read_torch_csv

    torch_orders = read_torch_csv(value)
    chunks, placement = placement_options(torch_orders.placement, torch_orders.num_devices)
    ctx.default_map = {
        "num_devices": torch_orders.num_devices,
        "num_microbatches": torch_orders.num_microbatches,
        "chunks": chunks,
        "placement": placement,
    }
    return value


@import_group.command("csv")
@click.argument("csv_file", type=click.Path(dir_okay=False, path_type=Path), is_eager=True, callback=defaults_from_csv)
@instance_options
@OBJECTIVE_OPTION
@picture_options
def import_csv_command(csv_file: Path, instance: Instance, objective: str, save: Path | None, show_ascii: bool) -> None:
    """A torch schedule CSV (one row per rank), timed with the instance's durations and validated.

    The CSV gives the devices, microbatches and placement; the instance options give the times.
    """
    from solver.torch.import_schedule import import_torch_csv

    echo_imported(import_torch_csv(csv_file, instance), objective, save, show_ascii)


@cli.command("torch-run")
@click.argument("schedule_file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--timeout", type=click.FloatRange(min=1), default=300.0, show_default=True, help="Seconds to wait.")
def torch_run_command(schedule_file: Path, timeout: float) -> None:
    """Run one training step of the schedule in PyTorch (gloo, CPU, one process per device) and
    check the gradients against plain training (needs torch)."""
    from solver.torch.run import format_result, torch_run

    schedule = load_schedule(schedule_file)
    exit_without_torch()
    result = torch_run(schedule, timeout_s=timeout)
    click.echo("\n".join(format_result(result)))
    if not result.passed:
        click.get_current_context().exit(EXIT_INVALID)


def main() -> None:
    cli(prog_name="pipesat")


if __name__ == "__main__":
    sys.exit(main())
