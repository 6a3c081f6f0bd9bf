"""The pipesat command line: parses options, calls `solver`, prints. No scheduling logic lives here."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from models import Instance, InstanceError, PipesatError, ScheduleError, load_instance
from solver.schedule_file import load_schedule
from solver.validator import validate

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
            code = EXIT_BAD_INPUT if isinstance(error, InstanceError) else EXIT_INVALID
            ctx.exit(code)


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


def main() -> None:
    cli(prog_name="pipesat")


if __name__ == "__main__":
    sys.exit(main())
