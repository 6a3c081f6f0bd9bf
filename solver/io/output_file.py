"""Writing the files pipesat produces (schedules, traces, CSVs), with one clear error when that fails."""

from __future__ import annotations

from pathlib import Path

from models import ScheduleError


def write_output(path: str | Path, text: str) -> Path:
    """Write `text` to `path`, making its folder; a failure is one `ScheduleError` line."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("w", newline="", encoding="utf-8") as file:
            file.write(text)
    except OSError as error:
        raise ScheduleError(f"{path}: cannot write ({error.strerror})") from None
    return path
