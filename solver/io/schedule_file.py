"""Schedule files (`pipesat-schedule/1` JSON): written only after validation, with metrics inside."""

from __future__ import annotations

import json
from pathlib import Path

from models import InputError, Schedule, ScheduleError
from solver.evaluate.metrics import compute_metrics
from solver.evaluate.validator import ensure_valid
from solver.io.output_file import write_output


def save_schedule(schedule: Schedule, path: str | Path) -> Path:
    """Validate the schedule, then write it with its metrics. Refuses an invalid schedule."""
    ensure_valid(schedule)
    data = schedule.to_dict(compute_metrics(schedule).to_dict())
    return write_output(path, json.dumps(data, indent=1) + "\n")


def load_schedule(path: str | Path) -> Schedule:
    """Read a schedule file (any source); its validity is the validator's to say."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise InputError(f"{path}: is a directory, not a schedule file") from None
    except (OSError, UnicodeDecodeError) as error:
        raise InputError(f"{path}: cannot read ({error})") from None
    except json.JSONDecodeError as error:
        raise ScheduleError(f"{path}:{error.lineno}:{error.colno}: not valid JSON: {error.msg}") from None
    try:
        return Schedule.from_dict(data)
    except ScheduleError as error:
        raise ScheduleError(f"{path}: {error}") from None
