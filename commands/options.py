"""The option sets several commands share, one meaning per flag everywhere (tests/test_cli_flags.py):
the instance options, the solver's and CP-SAT's, what a command prints and draws, the caps on work;
with the callbacks that read them and `dataclass_from_options`, which fills a record from them. The
types of their values are in `values`."""

from __future__ import annotations

import dataclasses
import functools
import inspect
from collections.abc import Callable, Iterable
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from pipesat.commands.checks import reads
from pipesat.commands.keys import key_options
from pipesat.commands.values import FiniteFloat, FormatChoice, TimeWindow
from pipesat.models import TIME_OBJECTIVES, Objective
from pipesat.models.errors import InstanceError
from pipesat.models.limits import DEFAULT_MAX_INPUT_MB, DEFAULT_MAX_MODEL_OPS, DEFAULT_MAX_OPS
from pipesat.models.log import show_log
from pipesat.models.placement import PLACEMENTS
from pipesat.models.tuning import DEFAULT_TUNING, Tuning, load_tuning
from pipesat.solver.cpsat.processes import available_cores
from pipesat.solver.instances.description import DENSE_KEYS, Pipeline, Transformer
from pipesat.solver.instances.from_options import build_instance

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

T = TypeVar("T", bound="DataclassInstance")
E = TypeVar("E", bound=Enum)
F = TypeVar("F", bound=Callable[..., Any])


def options(*decorators: Callable[..., Any]) -> Callable[..., Any]:
    """One decorator for several: `decorators` applied as if stacked in this order above a command."""

    def apply(command: Callable[..., Any]) -> Callable[..., Any]:
        for decorator in reversed(decorators):
            command = decorator(command)
        return command

    return apply


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
    click.option(
        "--host-link-bandwidth",
        help="Host link of each device, per direction, for activation offload: memory units per time unit, "
        "or like 25GB/s.",
    ),
    click.option("--offload-fraction", type=NUMBER, help="Part of a stage's activations an offload moves (0..1)."),
)


FORCE_OPTION = click.option(
    "--force",
    is_flag=True,
    help="Replace output files you named that already exist (a default picture is replaced without it).",
)
MAX_WORKERS = 256
WORKER_COUNT = click.IntRange(1, MAX_WORKERS)
"""A count of workers (CP-SAT's, or plan's solves at once): each is a process or a thread with its memory."""


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
    if value is None:
        return value
    from pipesat.solver.report.figures import PICTURE_SUFFIXES  # matplotlib, imported when a picture is named

    if value.suffix.lower() not in PICTURE_SUFFIXES:
        raise InstanceError(f"{param.opts[-1]} {value}: name the picture .png, .svg or .pdf")
    return value


def output_option(help_text: str) -> Callable[..., Any]:
    """`-o/--output`: a picture file whose extension picks the format."""
    return click.option("-o", "--output", type=FILE, callback=picture_path, help=help_text)


WINDOW_OPTION = click.option(
    "--window",
    type=TimeWindow(),
    help="Draw only this time range, START:END in the instance's time unit from the schedule's start "
    "(:100 and 300: leave an end open), or all of it: `all` (default: all, or the first part of a "
    "schedule too long to draw every op readably).",
)


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
    if not value:
        return {}
    from pipesat.solver.cpsat.parameters import cpsat_parameters, parse_pairs  # OR-Tools, imported to parse

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
            ("--max-input-mb", DEFAULT_MAX_INPUT_MB, "Refuse input files larger than this many MiB."),
        )
    )
)
