"""Schedule files (`pipesat-schedule/1` JSON): written only after validation, with metrics inside."""

from __future__ import annotations

import json
from pathlib import Path

from pipesat.models import InputError, Schedule, ScheduleError
from pipesat.models.document import read_document
from pipesat.solver.evaluate.metrics import compute_metrics
from pipesat.solver.evaluate.validator import ensure_valid
from pipesat.solver.io.output_file import write_output


def schedule_text(schedule: Schedule) -> str:
    """The schedule file's text: the schedule, validated, with its metrics. Refuses an invalid schedule."""
    ensure_valid(schedule)
    data = schedule.to_dict(compute_metrics(schedule).to_dict())
    return json.dumps(data, indent=1, allow_nan=False) + "\n"


def save_schedule(schedule: Schedule, path: str | Path) -> Path:
    """Validate the schedule, then write it with its metrics. Refuses an invalid schedule.

    Parameters
    ----------
    schedule
        The schedule to write.
    path
        The file to write (JSON), replaced atomically.

    Returns
    -------
    Path
        The file written.

    Raises
    ------
    ScheduleError
        An invalid schedule (nothing is written).
    """
    return write_output(path, schedule_text(schedule))


def load_schedule(path: str | Path) -> Schedule:
    """Read a schedule file (any source); its validity is the validator's to say. A file that cannot be
    read, parsed or understood as a schedule is bad input (`InputError`).

    Parameters
    ----------
    path
        A schedule file (`pipesat-schedule/1`, JSON).

    Returns
    -------
    Schedule
        The schedule as written, not yet validated (`validate`, `ensure_valid`).

    Raises
    ------
    InputError
        A file that cannot be read, parsed or understood as a schedule.
    """
    data = read_document(path, "schedule file", json_only=True)
    try:
        return Schedule.from_dict(data)
    except ScheduleError as error:
        raise InputError(f"{path}: {error}") from None
