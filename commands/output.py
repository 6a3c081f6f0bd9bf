"""What the commands print and write: fields, schedules (validated, then saved, drawn and printed),
the files of `--save-dir DIR`, and instance files."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from pipesat.models import InputError, Instance, Objective, Schedule
from pipesat.models.instance_file import format_instance, save_instance
from pipesat.solver.evaluate.metrics import compute_metrics
from pipesat.solver.evaluate.validator import ensure_valid
from pipesat.solver.io.schedule_file import save_schedule, schedule_text
from pipesat.solver.report.ascii_view import render_ascii
from pipesat.solver.report.tables import format_number
from pipesat.solver.report.text import describe, field_line, metrics_lines, saved_files_text
from pipesat.solver.report.units import units_of

if TYPE_CHECKING:
    from pipesat.solver.report.schedule_plot import Window

STDOUT = Path("-")
STDOUT_TAKEN = "pipesat.stdout_taken"


def give_stdout_to_data() -> None:
    """Keep standard output for data (a JSON document, `--save -`): the words go to standard error."""
    click.get_current_context().meta[STDOUT_TAKEN] = True


def data_out(fmt: str, save: Path | None) -> None:
    """Standard output holds data when the format is JSON or the schedule is saved to it (`--save -`)."""
    if fmt == "json" or save == STDOUT:
        give_stdout_to_data()
    if fmt == "json" and save == STDOUT:
        raise InputError("--format json and --save - both write to standard output; save the schedule to a file")


def say(text: str = "") -> None:
    """A line for people: on standard output, or on standard error when that holds data."""
    click.echo(text, err=bool(click.get_current_context().meta.get(STDOUT_TAKEN)))


def echo_field(label: str, value: str) -> None:
    say(field_line(label, value))


def emit_schedule(
    schedule: Schedule,
    objective: Objective,
    save: Path | None,
    picture: Path | None,
    show_ascii: bool,
    window: Window | None = None,
    title: str | None = None,
) -> None:
    """Validate a schedule, then save (`-`: to standard output), draw (only `window`'s time range if
    given) and print it as asked; with a `title`, first `TITLE on INSTANCE` and the schedule's metrics.
    Nothing invalid leaves here."""
    ensure_valid(schedule)
    if title is not None:
        say(f"{title} on {describe(schedule.instance)}")
        echo_metrics(schedule, objective)
    if save == STDOUT:
        click.echo(schedule_text(schedule), nl=False)
    elif save is not None:
        echo_field("schedule", str(save_schedule(schedule, save)))
    if picture is not None:
        from pipesat.solver.report.schedule_plot import plot_schedule, readable_window  # matplotlib, to draw

        shown = readable_window(schedule) if window is None else None
        drawn = str(plot_schedule(schedule, picture, objective, window))
        if shown is not None:
            units = units_of(schedule.instance)
            whole = units.with_time(format_number(compute_metrics(schedule).makespan))
            drawn += f" (the first {units.with_time(format_number(shown[1]))} of {whole}; --window all draws all)"
        echo_field("picture", drawn)
    if show_ascii:
        say()
        say(render_ascii(schedule))


def echo_metrics(schedule: Schedule, objective: Objective, skip: str | None = None) -> None:
    say("\n".join(metrics_lines(schedule, objective, skip)))


def echo_aside(label: str, value: str, fmt: str) -> None:
    """A field under a text table; on stderr in the other formats, so that stdout holds only the rows."""
    click.echo(field_line(label, value) if fmt == "text" else f"{label}: {value}", err=fmt != "text")


def saved_files(directory: Path | None, names: list[str] | None) -> dict[str, Path]:
    """The files `--save-dir DIRECTORY` may write, one per schedule name, for the output check. Names not
    known before the work (None: a Pareto frontier's limits) stand for every `limit-*.json` there."""
    if directory is None:
        return {}
    if names is None:
        existing = sorted(directory.glob("limit-*.json"))
        return {"--save-dir": directory / "limit-.json"} | {f"--save-dir {directory} ({p.name})": p for p in existing}
    return {f"--save-dir {directory} ({name}.json)": directory / f"{name}.json" for name in names}


def limit_name(limit: float) -> str:
    """The file name (without .json) of the Pareto point at a memory limit."""
    return f"limit-{limit:g}"


def save_schedules(schedules: list[tuple[str, Schedule]], directory: Path, fmt: str, not_saved: int = 0) -> None:
    """Write each (name, schedule) as DIRECTORY/name.json and say so."""
    for name, schedule in schedules:
        save_schedule(schedule, directory / f"{name}.json")
    echo_aside("schedules", saved_files_text(len(schedules), directory, not_saved), fmt)


def emit_instance(instance: Instance, comments: list[str], output: Path | None) -> None:
    """Write the instance file (comments on top) to OUTPUT, or print it when there is none."""
    if output is None:
        click.echo(format_instance(instance, comments), nl=False)
        return
    click.echo(f"wrote {save_instance(instance, output, comments)}: {describe(instance)}")
