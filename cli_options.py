"""The parts of the command line that every command shares: the error frame (one `error:` line and
an exit code), space-separated list options, the option sets several commands take, and the live
progress line. The commands themselves are in `cli.py`."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import inspect
import math
import signal
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import click

from pipesat.models import TIME_OBJECTIVES, Objective
from pipesat.models.errors import InputError, InstanceError, PipesatError
from pipesat.models.limits import DEFAULT_MAX_MODEL_OPS, DEFAULT_MAX_OPS
from pipesat.solver.cpsat.search import available_cores
from pipesat.solver.instances.from_options import build_instance
from pipesat.solver.io.output_file import check_outputs
from pipesat.solver.report.figures import PICTURE_SUFFIXES
from pipesat.solver.report.schedule_plot import Window
from pipesat.solver.report.solve_text import progress_text
from pipesat.solver.report.tables import FORMATS
from pipesat.solver.torch import import_schedule as torch_import

T = TypeVar("T")
EXIT_INVALID = 1
EXIT_BAD_INPUT = 2

# Options that take a space-separated list, as the earlier tool's argparse `nargs="+"` did.
LIST_OPTIONS = ("-f", "--forward-times", "-bw", "--backward-times", "-w", "--weight-times")


def _is_numbers(token: str) -> bool:
    """Whether a token is one number or a comma-separated list of numbers."""
    try:
        return bool([float(part) for part in token.replace(",", " ").split()])
    except ValueError:
        return False


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
            ctx.exit(EXIT_BAD_INPUT if isinstance(error, InputError) else EXIT_INVALID)

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
            message = " ".join(error.format_message().split())  # click lists choices on lines of their own
            click.echo(f"error: {message}{where}", err=True)
            sys.exit(EXIT_BAD_INPUT)
        except click.ClickException as error:
            click.echo(f"error: {error.format_message()}", err=True)
            sys.exit(error.exit_code)
        except click.Abort:
            click.echo("error: aborted", err=True)
            sys.exit(EXIT_INVALID)
        sys.exit(result if isinstance(result, int) else 0)


def options(*decorators: Callable[..., Any]) -> Callable[..., Any]:
    """One decorator for several: `decorators` applied as if stacked in this order above a command."""

    def apply(command: Callable[..., Any]) -> Callable[..., Any]:
        for decorator in reversed(decorators):
            command = decorator(command)
        return command

    return apply


class FiniteFloat(click.FloatRange):
    """A float option that refuses `nan` and `inf` (click's float takes both), within an optional range."""

    name = "number"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = click.types.FloatParamType.convert(self, value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return super().convert(number, param, ctx)

    def _describe_range(self) -> str:
        # click describes an unbounded range as "x<=None"; say nothing instead.
        return "" if self.min is None and self.max is None else super()._describe_range()


NUMBER = FiniteFloat()
FILE = click.Path(dir_okay=False, path_type=Path)
SCHEDULE_FILE = click.argument("schedule_file", type=FILE)
INSTANCE_KEYS = tuple(inspect.signature(build_instance).parameters)
INSTANCE_OPTIONS = options(
    click.argument("instance_file", required=False, type=FILE),
    click.option("-c", "--config", type=FILE, help="Instance file (YAML or JSON); the same as the INSTANCE argument."),
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
    click.option("--p2p-time", type=NUMBER, help="Point-to-point latency between devices."),
    click.option("--chunks", type=int, help="Stages (chunks) per device."),
    click.option("--placement", help="linear, interleaved, vshape, or a comma-separated stage-to-device list."),
    click.option(
        "--memory-limit",
        help="Activation memory each device may hold: a number in the instance's memory unit, an amount like "
        "20GiB, relative to the 1F1B peak like 0.5x, or one per device: 20GiB,20GiB,18GiB,18GiB.",
    ),
)


FORCE_OPTION = click.option("--force", is_flag=True, help="Replace output files that already exist.")
INPUTS = "pipesat.inputs"
MAX_WORKERS = 256


def reads(**inputs: Path | None) -> None:
    """Note the files this command reads (by what they are: `schedule file=...`), which it may not write."""
    click.get_current_context().meta.setdefault(INPUTS, {}).update(inputs)


def check_writes(force: bool, outputs: dict[str, Path | None]) -> None:
    """Check the files this command will write (by option: `{"--save": path}`) against the one output
    policy (`solver.io.output_file`) before any work: never an input, never twice, never over an
    existing file without --force, only where it can be written."""
    files = {name: path for name, path in outputs.items() if path != Path("-")}  # `-`: standard output
    check_outputs(files, click.get_current_context().meta.get(INPUTS, {}), force)


def instance_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """The options every command that reads an instance shares; they become its `instance` argument."""

    @functools.wraps(command)
    def with_instance(**kwargs: Any) -> Any:
        given = {key: kwargs.pop(key) for key in INSTANCE_KEYS}
        reads(**{"instance file": given["instance_file"] or given["config"]})
        kwargs["instance"] = build_instance(**given)
        return command(**kwargs)

    return INSTANCE_OPTIONS(with_instance)


OBJECTIVE_OPTION = click.option(
    "--objective",
    type=click.Choice([objective.value for objective in TIME_OBJECTIVES]),
    default=Objective.MAKESPAN.value,
    show_default=True,
    callback=lambda _ctx, _param, value: Objective(value),
    help="makespan (first start to last end) or span (max per-device span, the steady-state time).",
)
ASCII_OPTION = click.option("--ascii", "show_ascii", is_flag=True, help="Print the schedule as text, to scale.")
FORMAT_OPTION = click.option(
    "--format", "fmt", type=click.Choice(FORMATS), default="table", show_default=True, help="How to print the rows."
)
PICTURE_OPTIONS = options(
    click.option("--save", type=FILE, help="Write the schedule file (JSON); `-` writes it to standard output."),
    ASCII_OPTION,
)
DOCUMENT_OPTION = click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="json: one document for programs on standard output (the rest goes to standard error).",
)


def picture_path(ctx: click.Context, param: click.Parameter, value: Path | None) -> Path | None:
    """Check a picture file's extension while parsing, before any long solve."""
    if value is not None and value.suffix.lower() not in PICTURE_SUFFIXES:
        raise InstanceError(f"{param.opts[-1]} {value}: name the picture .png, .svg or .pdf")
    return value


def output_option(help_text: str) -> Callable[..., Any]:
    """`-o/--output`: a picture file whose extension picks the format."""
    return click.option("-o", "--output", type=FILE, callback=picture_path, help=help_text)


class TimeWindow(click.ParamType):
    """`START:END`, a time range from the schedule's first start; an end left out is the schedule's."""

    name = "START:END"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Window:
        if isinstance(value, tuple):
            return value
        first, colon, second = str(value).partition(":")
        start, end = _time(first, 0.0), _time(second, math.inf)
        if not colon or start is None or end is None:
            self.fail(f"{value!r} is not START:END; give two times from the schedule's start, like 100:250", param, ctx)
        if start < 0:
            self.fail(f"{value} starts before the schedule does; times count from its start, 0", param, ctx)
        if end <= start:
            self.fail(f"{value} ends before it starts; give START:END with START < END", param, ctx)
        return (start, end)


def _time(text: str, default: float) -> float | None:
    """A finite number, `default` for an empty text, None when it is neither."""
    if not text.strip():
        return default
    try:
        number = float(text)
    except ValueError:
        return None
    return number if math.isfinite(number) else None


WINDOW_OPTION = click.option(
    "--window",
    type=TimeWindow(),
    help="Draw only this time range, START:END in the instance's time unit from the schedule's start "
    "(:100 and 300: leave an end open): zooms into a large schedule.",
)


def check_window(window: Window | None, picture: Path | None) -> None:
    """--window zooms the picture: refuse it, before any work, where none is drawn."""
    if window is not None and picture is None:
        raise InputError("--window zooms the picture, but no picture is drawn (see -o)")


SOLVER_OPTIONS = options(
    click.option(
        "--time-limit",
        type=FiniteFloat(min=0, min_open=True),
        default=10.0,
        show_default=True,
        help="Seconds CP-SAT may search (per memory limit in pareto).",
    ),
    click.option(
        "--workers",
        type=click.IntRange(1, MAX_WORKERS),
        default=available_cores,
        show_default="the cores this process may use",
        help="CP-SAT search workers.",
    ),
    click.option("--seed", type=click.IntRange(0, 2**31 - 1), default=0, show_default=True, help="CP-SAT random seed."),
    click.option(
        "--deterministic",
        is_flag=True,
        help="The same schedule for the same seed, every run: the time limit counts CP-SAT's deterministic "
        "time (the wall clock stops it only at ten times the limit).",
    ),
    click.option("--progress/--no-progress", default=None, help="The live progress line (default: on a terminal)."),
)


class ProgressLine:
    """The live `elapsed best bound gap` line while the solver searches (on a terminal only)."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.shown = False

    def __call__(self, elapsed: float, best: float | None, bound: float | None) -> None:
        if not self.enabled:
            return
        click.echo("\r" + progress_text(elapsed, best, bound).ljust(72), nl=False, err=True)
        self.shown = True

    def clear(self) -> None:
        if self.shown:
            click.echo("\r" + " " * 72 + "\r", nl=False, err=True)


@contextlib.contextmanager
def live_progress(enabled: bool | None) -> Iterator[ProgressLine]:
    """The progress callback for the solver: shown on a terminal (or as `enabled` says), cleared after."""
    line = ProgressLine(sys.stderr.isatty() if enabled is None else enabled)
    try:
        yield line
    finally:
        line.clear()


SAVE_ALL_OPTION = click.option(
    "--save",
    "save_dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Directory to write every schedule file into (NAME.json).",
)


def dataclass_from_options(kind: type[T], options: dict[str, Any]) -> T:
    """The dataclass `kind` with each field that has an option of its name set to that option's value."""
    return kind(**{field.name: options[field.name] for field in dataclasses.fields(kind) if field.name in options})


# The transformer's sizes, shared by `instance from-model` and `profile`.
MODEL_OPTIONS = options(
    click.option("--layers", type=int, required=True, help="Transformer layers."),
    click.option("--hidden", type=int, required=True, help="Hidden size h."),
    click.option("--heads", type=int, required=True, help="Attention heads a (must divide --hidden)."),
    click.option(
        "--kv-heads", type=int, default=0, help="Key/value heads g for grouped-query attention (default: --heads)."
    ),
    click.option(
        "--ffn-hidden", type=int, default=0, help="MLP width f; given, the MLP is SwiGLU (default: a 4h GELU MLP)."
    ),
    click.option("--seq-len", type=int, required=True, help="Sequence length s."),
    click.option("--microbatch-size", type=int, default=1, show_default=True, help="Sequences per microbatch b."),
    click.option("-p", "--devices", type=int, required=True, help="Pipeline devices p."),
    click.option("--chunks", type=int, default=1, show_default=True, help="Stages per device v."),
    click.option("-m", "--microbatches", type=int, required=True, help="Microbatches per iteration."),
    click.option("--placement", help="linear, interleaved or vshape; default linear, or interleaved with chunks."),
    click.option("--name", default="", help="Instance name."),
    click.option("-o", "--output", type=FILE, help="Instance file to write."),
    FORCE_OPTION,
)


def exit_without_torch() -> None:
    """Exit 2 with the install line when torch (the optional extra) is not installed."""
    try:
        torch_import.require_torch()
    except torch_import.TorchMissing as error:
        click.echo(f"error: {error}", err=True)
        click.get_current_context().exit(EXIT_BAD_INPUT)


def defaults_from_csv(ctx: click.Context, param: click.Parameter, value: Path) -> Any:
    """Read the CSV first (an eager argument): its rows set the devices, microbatches and placement,
    which become the defaults of the instance options (click's default_map)."""
    torch_orders = torch_import.read_torch_csv(value)
    chunks, placement = torch_import.placement_options(torch_orders.placement, torch_orders.num_devices)
    ctx.default_map = {
        "num_devices": torch_orders.num_devices,
        "num_microbatches": torch_orders.num_microbatches,
        "chunks": chunks,
        "placement": placement,
    }
    return value


def stop_on_sigterm() -> None:
    """Make SIGTERM stop a command as Ctrl-C does: a solve returns its best schedule so far, which is
    printed and saved (the CP-SAT child resets SIGTERM to its default)."""

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupt)


# The caps on work every command takes (`models.limits`).
LIMIT_OPTIONS = options(
    click.option(
        "--max-ops",
        type=click.IntRange(min=1),
        default=DEFAULT_MAX_OPS,
        show_default=True,
        help="Refuse instances of more ops than this (a guard against sizes that would fill the memory).",
    ),
    click.option(
        "--max-model-ops",
        type=click.IntRange(min=1),
        default=DEFAULT_MAX_MODEL_OPS,
        show_default=True,
        help="Refuse to build CP-SAT models of more ops than this (about 7.5 KB of memory an op).",
    ),
)
