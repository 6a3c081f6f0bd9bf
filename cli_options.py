"""The parts of the command line that every command shares: the error frame (one `error:` line and
an exit code, printed by `echo_error`), space-separated list options, the option sets several
commands take (one meaning per flag everywhere: tests/test_cli_flags.py), and the live progress line.
The commands themselves are in `cli.py`."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import inspect
import math
import os
import shutil
import signal
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from pipesat.cli_keys import key_options
from pipesat.models import TIME_OBJECTIVES, Objective
from pipesat.models.errors import InputError, InstanceError, PipesatError
from pipesat.models.limits import DEFAULT_MAX_MODEL_OPS, DEFAULT_MAX_OPS
from pipesat.models.log import log_shown, show_log
from pipesat.models.placement import PLACEMENTS
from pipesat.models.tuning import DEFAULT_TUNING, Tuning, load_tuning
from pipesat.solver.cpsat.parameters import cpsat_parameters, parse_pairs
from pipesat.solver.cpsat.search_parameters import available_cores
from pipesat.solver.instances.description import DENSE_KEYS, Pipeline, Transformer
from pipesat.solver.instances.from_options import build_instance
from pipesat.solver.io.output_file import DefaultName, check_outputs
from pipesat.solver.report.figures import PICTURE_SUFFIXES
from pipesat.solver.report.schedule_plot import Window
from pipesat.solver.report.solve_text import progress_text
from pipesat.solver.torch import import_schedule as torch_import

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

T = TypeVar("T", bound="DataclassInstance")
E = TypeVar("E", bound=Enum)
F = TypeVar("F", bound=Callable[..., Any])
EXIT_INVALID = 1
EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130
"""Ctrl-C or SIGTERM ended the command (the shell's 128 + SIGINT); what it had is printed and saved."""

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


def echo_error(message: object) -> None:
    """Report an error the one way pipesat does: one `error: ...` line on standard error (a message
    of several lines is joined into one). The caller chooses the exit code."""
    text = " ".join(line.strip() for line in str(message).splitlines() if line.strip())
    click.echo(f"error: {text}", err=True)


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
            echo_error(error)
            ctx.exit(EXIT_BAD_INPUT if isinstance(error, InputError) else EXIT_INVALID)

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        """As click's main, but a usage error is one `error:` line too (click prints three)."""
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        try:
            result = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except NO_ARGS_IS_HELP as error:
            click.echo(error.ctx.get_help() if error.ctx else str(error))
            sys.exit(0)
        except click.UsageError as error:
            where = f" (see '{error.ctx.command_path} --help')" if error.ctx else ""
            message = " ".join(error.format_message().split())  # click lists choices on lines of their own
            echo_error(f"{message}{where}")
            sys.exit(EXIT_BAD_INPUT)
        except click.ClickException as error:
            echo_error(error.format_message())
            sys.exit(error.exit_code)
        except click.Abort:
            echo_error("interrupted")
            sys.exit(EXIT_INTERRUPTED)
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
        try:
            number = float(value)  # as click's FloatParamType, before the range check
        except ValueError:
            self.fail(f"{value!r} is not a valid {self.name}.", param, ctx)
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
    click.option(
        "--placement", help="linear, interleaved, vshape, bidirectional, or a comma-separated stage-to-device list."
    ),
    click.option(
        "--memory-limit",
        help="Activation memory each device may hold: a number in the instance's memory unit, an amount like "
        "20GiB, relative to the 1F1B peak like 0.5x, or one per device: 20GiB,20GiB,18GiB,18GiB.",
    ),
)


FORCE_OPTION = click.option(
    "--force",
    is_flag=True,
    help="Replace output files you named that already exist (a default picture is replaced without it).",
)
INPUTS = "pipesat.inputs"
MAX_WORKERS = 256
WORKER_COUNT = click.IntRange(1, MAX_WORKERS)
"""A count of workers (CP-SAT's, or plan's solves at once): each is a process or a thread with its memory."""


def reads(**inputs: Path | None) -> None:
    """Note the files this command reads (by what they are: `schedule file=...`), which it may not write."""
    click.get_current_context().meta.setdefault(INPUTS, {}).update(inputs)


def check_writes(force: bool, outputs: Mapping[str, Path | DefaultName | None]) -> None:
    """Check the files this command will write (by option: `{"--save": path}`) against the one output
    policy (`solver.io.output_file`) before any work: never an input, never twice, never over an
    existing file the user named without --force (a `DefaultName`, the command's own choice, may be
    replaced), only where it can be written."""
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


def enum_option(flag: str, members: Iterable[E], default: E, help: str) -> Callable[[F], F]:
    """An option choosing one of an enum's `members` by its value, handed to the command as the member."""
    kind = type(default)
    return click.option(
        flag,
        type=click.Choice([member.value for member in members]),
        default=default.value,
        show_default=True,
        callback=lambda _ctx, _param, value: kind(value),
        help=help,
    )


OBJECTIVE_OPTION = enum_option(
    "--objective",
    TIME_OBJECTIVES,
    Objective.MAKESPAN,
    "makespan (first start to last end) or span (max per-device span, the steady-state time).",
)
ASCII_OPTION = click.option("--ascii", "show_ascii", is_flag=True, help="Print the schedule as text, to scale.")
# `--format`: one vocabulary for what a command prints, each word meaning the same everywhere. Every
# command that takes it prints text and json; the commands that print rows also csv and markdown.
FORMAT_WORDS = {
    "text": "for people",
    "json": "one document for programs on standard output (the rest goes to standard error)",
    "csv": "the rows as CSV",
    "markdown": "the rows as a Markdown table",
}


class FormatChoice(click.Choice):
    """`--format`'s words; `table`, the rows commands' earlier word for text, still means text."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        return super().convert("text" if value == "table" else value, param, ctx)


def format_option(*words: str, callback: Callable[..., Any] | None = None) -> Callable[..., Any]:
    """`--format WORD`, offering `words` of FORMAT_WORDS; text by default."""
    return click.option(
        "--format",
        "fmt",
        type=FormatChoice(words),
        default="text",
        show_default=True,
        callback=callback,
        help="What to print: " + "; ".join(f"{word}, {FORMAT_WORDS[word]}" for word in words) + ".",
    )


# A command that prints one schedule or solve: text or a JSON document.
DOCUMENT_OPTION = format_option("text", "json")
# A command that prints rows (`solver.report.tables` reads the same words).
FORMAT_OPTION = format_option("text", "json", "csv", "markdown")
PICTURE_OPTIONS = options(
    click.option("--save", type=FILE, help="Write the schedule file (JSON); `-` writes it to standard output."),
    ASCII_OPTION,
)


def picture_path(ctx: click.Context, param: click.Parameter, value: Path | None) -> Path | None:
    """Check a picture file's extension while parsing, before any long solve."""
    if value is not None and value.suffix.lower() not in PICTURE_SUFFIXES:
        raise InstanceError(f"{param.opts[-1]} {value}: name the picture .png, .svg or .pdf")
    return value


def output_option(help_text: str) -> Callable[..., Any]:
    """`-o/--output`: a picture file whose extension picks the format."""
    return click.option("-o", "--output", type=FILE, callback=picture_path, help=help_text)


def picture_output(picture: Path | None, output: Path | None) -> Path | DefaultName | None:
    """The picture a command draws, as an output for `check_writes`: the file named with -o (`output`)
    as it is, never replaced without --force; a name the command chose itself as a `DefaultName`, which
    may replace the picture of an earlier run (so that `pipesat schedule 1f1b -s 4 -b 8` can be run again)."""
    return DefaultName(picture) if picture is not None and output is None else picture


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


PROGRESS_OPTION = click.option(
    "--progress/--no-progress", default=None, help="The live progress line (default: on a terminal)."
)


def _log_option(ctx: click.Context, param: click.Parameter, value: bool) -> bool:
    """`--log`: pipesat's log on standard error until the command ends (`models.log`)."""
    if value:
        ctx.with_resource(show_log())
    return value


def _cpsat_param_option(ctx: click.Context, param: click.Parameter, value: tuple[str, ...]) -> dict[str, str]:
    """`--cpsat-param KEY=VALUE ...` as a mapping, checked by protobuf and CP-SAT before any work."""
    pairs = parse_pairs(value, label="--cpsat-param")
    cpsat_parameters(pairs, label="--cpsat-param")
    return pairs


def _tuning_option(ctx: click.Context, param: click.Parameter, value: Path | None) -> Tuning:
    """`--tuning FILE`: pipesat's own search and bound settings (`models.tuning`), read before any work."""
    return DEFAULT_TUNING if value is None else load_tuning(value)


# Every command that runs CP-SAT takes these (solve, compare and pareto through SOLVER_OPTIONS, and plan).
CPSAT_OPTIONS = options(
    click.option(
        "-v",
        "--log",
        is_flag=True,
        expose_value=False,
        callback=_log_option,
        help="Log to standard error what pipesat decides and why (starting schedules, lower bound, why the "
        "search stopped) and CP-SAT's own search log (the progress line is then off by default).",
    ),
    click.option(
        "--cpsat-param",
        "cpsat_params",
        multiple=True,
        metavar="KEY=VALUE",
        callback=_cpsat_param_option,
        help="For experts: set a field of CP-SAT's SatParameters, after pipesat's own settings "
        "(repeatable; linearization_level=2, extra_subsolvers=max_lp).",
    ),
    click.option(
        "--tuning",
        type=click.Path(dir_okay=False, path_type=Path),
        callback=_tuning_option,
        help="For experts: pipesat's own search and bound settings from a TOML or YAML file of field = value "
        "lines (the fields of models/tuning.py; strong_probes = false); the result records them.",
    ),
)
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
        type=WORKER_COUNT,
        default=available_cores,
        show_default="the cores this process may use",
        help="CP-SAT search workers.",
    ),
    click.option("--seed", type=click.IntRange(0, 2**31 - 1), default=0, show_default=True, help="CP-SAT random seed."),
    click.option(
        "--deterministic",
        is_flag=True,
        help="The same schedule for the same seed, every run: the time limit counts CP-SAT's deterministic "
        "time (the wall clock stops it only at ten times the limit) and CP-SAT searches with one worker.",
    ),
    PROGRESS_OPTION,
    CPSAT_OPTIONS,
)


def terminal_columns() -> int:
    """The width of the terminal: $COLUMNS when set, else that of standard error's terminal (where the
    progress line goes), else shutil's answer (standard output's terminal, or 80)."""
    if not os.environ.get("COLUMNS"):
        with contextlib.suppress(AttributeError, OSError, ValueError):
            columns = os.get_terminal_size(sys.stderr.fileno()).columns
            if columns > 0:
                return columns
    return shutil.get_terminal_size().columns


class ProgressLine:
    """The one live progress line on standard error, for every command that shows one: rewritten in
    place, cut to the terminal's width so that it never wraps, cleared at the end; off unless enabled.
    Called as the solver's callback, `(elapsed, best, bound)`, it shows the `elapsed best bound gap`
    line; `show` writes any other text (plan's bar)."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.width = 0  # the characters on the line now

    def __call__(self, elapsed: float, best: float | None, bound: float | None) -> None:
        self.show(progress_text(elapsed, best, bound))

    def show(self, text: str) -> None:
        if not self.enabled:
            return
        room = max(1, terminal_columns() - 1)  # a line filling the last column wraps on some terminals
        text = text[:room]
        click.echo("\r" + text.ljust(min(self.width, room)), nl=False, err=True)
        self.width = len(text)

    def clear(self) -> None:
        if self.width:
            click.echo("\r" + " " * min(self.width, max(1, terminal_columns() - 1)) + "\r", nl=False, err=True)
            self.width = 0


@contextlib.contextmanager
def live_progress(enabled: bool | None) -> Iterator[ProgressLine]:
    """The progress line: shown when standard error is a terminal and no log is printed there (or as
    `enabled`, from --progress/--no-progress, says), cleared after."""
    line = ProgressLine(sys.stderr.isatty() and not log_shown() if enabled is None else enabled)
    try:
        yield line
    finally:
        line.clear()


def _placements(_ctx: click.Context, _param: click.Parameter, value: str | None) -> tuple[str, ...]:
    """`--placements linear,vshape`: named placements, each once."""
    if value is None:
        return ()
    names = tuple(part.strip().lower() for part in value.split(","))
    unknown = [name for name in names if name not in PLACEMENTS]
    if unknown or not names or len(set(names)) != len(names):
        raise click.BadParameter(f"give named placements, each once, from {', '.join(PLACEMENTS)}; got {value!r}")
    return names


PLACEMENTS_OPTION = click.option(
    "--placements",
    callback=_placements,
    help="Compare the same model at each of these placements (comma-separated: linear, interleaved, vshape, "
    "bidirectional; "
    "chunks 1 for linear, else --chunks or 2), in one table.",
)
SAVE_DIR_OPTION = click.option(
    "--save-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Folder to write every schedule file into (NAME.json).",
)


def dataclass_from_options(kind: type[T], options: dict[str, Any]) -> T:
    """The dataclass `kind` with each field that has an option of its name set to that option's value;
    an option left at None leaves the field's default (`profile`'s vocabulary is its own)."""
    given = {name: value for name, value in options.items() if value is not None}
    return kind(**{field.name: given[field.name] for field in dataclasses.fields(kind) if field.name in given})


# The transformer's sizes, shared by `instance from-model` and `profile`.
MODEL_OPTIONS = options(
    *key_options(Transformer, *DENSE_KEYS),
    *key_options(Pipeline, "devices", "chunks", "microbatches", "placement"),
    click.option("--name", default="", help="Instance name."),
    click.option(
        "--save-instance", "output", type=FILE, help="Write the instance file (YAML) here, not to standard output."
    ),
    FORCE_OPTION,
)


def exit_without_torch() -> None:
    """Refuse, as bad input (one `error:` line, exit 2), with the install line when torch (the optional
    extra) is not installed."""
    try:
        torch_import.require_torch()
    except torch_import.TorchMissing as error:
        raise InputError(str(error)) from None


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


def exit_if_interrupted(interrupted: bool) -> None:
    """End with EXIT_INTERRUPTED when Ctrl-C or SIGTERM stopped the work; call it once what the work
    had is printed and saved."""
    if interrupted:
        click.get_current_context().exit(EXIT_INTERRUPTED)


# The caps on work every command takes (`models.limits`).
LIMIT_OPTIONS = options(
    *(
        click.option(flag, type=click.IntRange(min=1), default=default, show_default=True, help=help)
        for flag, default, help in (
            (
                "--max-ops",
                DEFAULT_MAX_OPS,
                "Refuse instances of more ops than this (a guard against sizes that would fill the memory).",
            ),
            (
                "--max-model-ops",
                DEFAULT_MAX_MODEL_OPS,
                "Refuse to build CP-SAT models of more ops than this (about 7.5 KB of memory an op).",
            ),
        )
    )
)
