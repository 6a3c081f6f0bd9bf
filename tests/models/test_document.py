"""Reading an input file (`read_input`): regular files only, opened without blocking, at most the cap
read; and a long document without aliases is not taken for an alias bomb."""

from __future__ import annotations

import contextvars
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pipesat.models import InputError
from pipesat.models.document import MAX_VALUES, read_document, read_input
from pipesat.models.limits import DEFAULT_MAX_INPUT_MB, max_input_bytes, set_max_input_mb

WAIT = 60.0
"""Seconds a read may take before the test calls it hung (each takes milliseconds)."""


def _refusal(read: Callable[[], Any]) -> str:
    """The message of the InputError `read` raises, run in a thread so that a read that blocks fails
    the test instead of hanging it."""
    outcome: list[BaseException | None] = []

    def run() -> None:
        try:
            read()
            outcome.append(None)
        except BaseException as error:  # handed to the test
            outcome.append(error)

    thread = threading.Thread(target=contextvars.copy_context().run, args=(run,), daemon=True)
    thread.start()
    thread.join(WAIT)
    assert outcome, f"the read did not return within {WAIT:g} s"
    assert isinstance(outcome[0], InputError), outcome[0]
    return str(outcome[0])


def test_a_fifo_without_a_writer_is_refused_at_once(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo")
    message = _refusal(lambda: read_input(tmp_path / "fifo", "plan spec"))
    assert message == f"{tmp_path / 'fifo'} is a FIFO (named pipe), not a regular file; the plan spec must be one"


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="no /dev/zero")
def test_a_device_is_refused_at_once() -> None:
    message = _refusal(lambda: read_input("/dev/zero", "calibration file"))
    assert message == "/dev/zero is a character device, not a regular file; the calibration file must be one"


def test_a_folder_and_a_missing_file_are_refused(tmp_path: Path) -> None:
    assert _refusal(lambda: read_input(tmp_path, "schedule file")).endswith(
        "is a folder, not a regular file; the schedule file must be one"
    )
    assert _refusal(lambda: read_input(tmp_path / "absent.json", "schedule file")).endswith("absent.json: no such file")


def test_a_file_over_the_cap_is_refused_by_its_size(tmp_path: Path) -> None:
    path = tmp_path / "big.yaml"
    path.write_bytes(b"#" * ((1 << 20) + 1))
    contextvars.copy_context().run(set_max_input_mb, 1)  # the cap is the context's: this one is left as it was
    assert max_input_bytes() == DEFAULT_MAX_INPUT_MB << 20

    def read() -> None:
        set_max_input_mb(1)
        read_input(path, "plan spec")

    assert _refusal(read) == (
        f"{path}: larger than the limit of 1 MiB for an input file; check it is the plan spec, or raise the limit "
        "with `max_input_mb`"
    )
    assert read_input(path, "plan spec") == path.read_bytes()  # under the default cap


def test_a_file_that_grows_past_its_size_is_read_only_up_to_the_cap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As a file of /proc says it has 0 bytes and has more: the read itself stops past the cap.
    path = tmp_path / "growing.yaml"
    path.write_bytes(b"#" * (3 << 20))
    fstat = os.fstat
    monkeypatch.setattr(os, "fstat", lambda handle: os.stat_result((*fstat(handle)[:6], 0, *fstat(handle)[7:])))
    reads: list[int] = []
    read = os.read
    monkeypatch.setattr(os, "read", lambda handle, size: reads.append(size) or read(handle, size))

    def refused() -> None:
        set_max_input_mb(1)
        read_input(path, "plan spec")

    assert "larger than the limit of 1 MiB" in _refusal(refused)
    assert sum(reads) == (1 << 20) + 1


def test_the_cap_is_at_least_one_mib() -> None:
    with pytest.raises(InputError, match="`max_input_mb` must be at least 1, got 0"):
        contextvars.copy_context().run(set_max_input_mb, 0)


def test_a_long_document_without_aliases_is_read(tmp_path: Path) -> None:
    path = tmp_path / "long.yaml"
    path.write_text("values: [" + ", ".join(["0"] * (MAX_VALUES + 1)) + "]\n")
    assert len(read_document(path, "plan spec")["values"]) == MAX_VALUES + 1
