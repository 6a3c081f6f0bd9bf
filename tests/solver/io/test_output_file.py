"""Writing output files: folders are made, text is written as given, a failure is one ScheduleError line."""

from __future__ import annotations

from pathlib import Path

import pytest

from models import ScheduleError
from solver.io.output_file import write_output


def test_writes_the_text_as_given_and_makes_the_folders(tmp_path: Path) -> None:
    path = write_output(tmp_path / "a" / "b" / "rows.csv", "x,y\r\n1,2\r\n")
    assert path == tmp_path / "a" / "b" / "rows.csv"
    assert path.read_bytes() == b"x,y\r\n1,2\r\n"  # no newline translation: CSV line ends stay as written


def test_an_unwritable_path_is_one_schedule_error(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    with pytest.raises(ScheduleError, match=r"file/out\.json: cannot write \(.+\)$"):
        write_output(tmp_path / "file" / "out.json", "{}")
