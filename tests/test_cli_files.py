"""The files commands write: never an input, never two outputs in one file, never over an existing file
the user named without --force (a default picture is replaced), only regular files (a link is
followed), all of it refused (exit 2, one line) before any work is done, and a write that fails is
one line, exit 2, with nothing changed."""

from __future__ import annotations

import resource
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from pipesat.commands.frame import EXIT_BAD_INPUT
from tests.cli_helpers import cli_error, cli_ok, run_cli
from tests.conftest import linked_file

SMALL = ["-s", "2", "-b", "2"]


@pytest.fixture
def instance_file(tmp_path: Path) -> Path:
    path = tmp_path / "cfg.yaml"
    path.write_text("num_devices: 2\nnum_microbatches: 3\n")
    return path


@pytest.fixture
def schedule_file(tmp_path: Path) -> Path:
    path = tmp_path / "s.json"
    cli_ok(run_cli("schedule", "1f1b", *SMALL, "--no-visualization", "--save", path))
    return path


def test_an_input_is_never_an_output(instance_file: Path, schedule_file: Path) -> None:
    before = instance_file.read_text(), schedule_file.read_text()
    line = cli_error(run_cli("solve", instance_file, "--save", instance_file, "--force"))
    assert line == f"error: --save {instance_file} is the instance file this command reads; write to another file"
    line = cli_error(run_cli("export", schedule_file, "--to", "torch-csv", schedule_file, "--force"))
    assert "is the schedule file this command reads" in line
    assert (instance_file.read_text(), schedule_file.read_text()) == before


def test_two_outputs_are_never_one_file(tmp_path: Path) -> None:
    picture = tmp_path / "x.png"
    line = cli_error(run_cli("solve", *SMALL, "--save", picture, "-o", picture))
    assert line == f"error: {picture} is both --save and -o; give each output its own file"
    assert not picture.exists()


def test_an_existing_file_is_replaced_only_with_force(tmp_path: Path) -> None:
    target = tmp_path / "out.json"
    target.write_text("keep me")
    result = run_cli("solve", *SMALL, "--save", target)
    assert cli_error(result) == f"error: {target} already exists; add --force to replace it, or write to another file"
    assert result.stdout == ""  # refused before the solve began
    assert target.read_text() == "keep me"
    cli_ok(run_cli("solve", *SMALL, "--save", target, "--force"))
    assert target.read_text().startswith("{")


def test_the_earlier_tools_command_line_can_be_run_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A picture the command names itself (pipeline_NAME.png, a render's SCHEDULE.png) is replaced."""
    monkeypatch.chdir(tmp_path)
    picture = tmp_path / "pipeline_1f1b.png"
    picture.write_text("an earlier picture")
    for _ in range(2):
        assert "pipeline_1f1b.png" in cli_ok(run_cli("schedule", "1f1b", *SMALL))
        assert picture.read_bytes().startswith(b"\x89PNG")
    cli_ok(run_cli("schedule", "1f1b", *SMALL, "--no-visualization", "--save", "s.json"))
    (tmp_path / "s.png").write_text("an earlier picture")
    for _ in range(2):
        cli_ok(run_cli("render", "s.json"))
        assert (tmp_path / "s.png").read_bytes().startswith(b"\x89PNG")


def test_a_picture_the_user_named_is_still_kept_without_force(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    cli_ok(run_cli("schedule", "1f1b", *SMALL, "-o", "mine.png"))
    (tmp_path / "mine.png").write_text("keep me")
    for command in (("schedule", "1f1b", *SMALL), ("solve", *SMALL)):
        line = cli_error(run_cli(*command, "-o", "mine.png"))
        assert line == "error: mine.png already exists; add --force to replace it, or write to another file"
    assert (tmp_path / "mine.png").read_text() == "keep me"
    cli_ok(run_cli("schedule", "1f1b", *SMALL, "-o", "mine.png", "--force"))
    assert (tmp_path / "mine.png").read_bytes().startswith(b"\x89PNG")
    # A default picture is never the schedule file the command writes, nor a folder.
    line = cli_error(run_cli("schedule", "1f1b", *SMALL, "--save", "pipeline_1f1b.png"))
    assert line == "error: pipeline_1f1b.png is both --save and the picture; give each output its own file"
    (tmp_path / "pipeline_gpipe.png").mkdir()
    assert "is a folder" in cli_error(run_cli("schedule", "gpipe", *SMALL))


def test_a_bad_output_place_is_found_before_the_solve(tmp_path: Path) -> None:
    (tmp_path / "plain").write_text("a file, not a folder")
    result = run_cli("solve", *SMALL, "-o", tmp_path / "plain" / "x.png")
    assert "cannot write in" in cli_error(result) and result.stdout == ""


def test_save_dir_files_are_checked_before_the_comparison(tmp_path: Path) -> None:
    folder = tmp_path / "runs"
    folder.mkdir()
    (folder / "cp-sat.json").write_text("keep me")
    result = run_cli("compare", *SMALL, "--save-dir", folder)
    assert "cp-sat.json already exists" in cli_error(result) and result.stdout == ""
    cli_ok(run_cli("compare", *SMALL, "--save-dir", folder, "--force"))
    assert (folder / "cp-sat.json").read_text().startswith("{")
    line = cli_error(run_cli("pareto", *SMALL, "--save-dir", folder / "cp-sat.json", "--no-visualization"))
    assert f"Directory '{folder / 'cp-sat.json'}' is a file" in line


def test_a_link_is_followed_and_stays_a_link(tmp_path: Path) -> None:
    link, target = linked_file(tmp_path)
    assert "latest.json already exists; add --force" in cli_error(run_cli("solve", *SMALL, "--save", link))
    cli_ok(run_cli("solve", *SMALL, "--save", link, "--force"))
    assert link.is_symlink() and target.read_text().startswith("{")


def _small_files() -> None:
    """In the child, before pipesat starts: no file may grow past 2 KB (a write past it fails, EFBIG)."""
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (2048, 2048))


def test_a_write_that_fails_is_one_line_and_changes_nothing(tmp_path: Path) -> None:
    target = tmp_path / "s.json"
    target.write_text("the old file")
    command = [sys.executable, "-m", "pipesat.cli", "solve", "-s", "4", "-b", "8", "--save", str(target), "--force"]
    result = subprocess.run(command, capture_output=True, text=True, preexec_fn=_small_files, timeout=120)
    assert result.returncode == EXIT_BAD_INPUT, result.stderr
    assert result.stderr.splitlines() == [
        f"error: {target}: cannot write (File too large); nothing was changed there, write to another place"
    ]
    assert target.read_text() == "the old file"
    assert [path.name for path in tmp_path.iterdir()] == ["s.json"]  # no partial file left
