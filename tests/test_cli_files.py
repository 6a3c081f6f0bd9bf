"""The files commands write: never an input, never two outputs in one file, never over an existing file
without --force, and all of it refused (exit 2, one line) before any work is done."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli_helpers import cli_error, cli_ok, run_cli

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


def test_the_default_picture_follows_the_same_policy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    cli_ok(run_cli("schedule", "1f1b", *SMALL))
    line = cli_error(run_cli("schedule", "1f1b", *SMALL))
    assert line.startswith("error: pipeline_1f1b.png already exists; add --force")
    cli_ok(run_cli("schedule", "1f1b", *SMALL, "--force"))


def test_a_bad_output_place_is_found_before_the_solve(tmp_path: Path) -> None:
    (tmp_path / "plain").write_text("a file, not a folder")
    result = run_cli("solve", *SMALL, "-o", tmp_path / "plain" / "x.png")
    assert "cannot write in" in cli_error(result) and result.stdout == ""


def test_save_dir_files_are_checked_before_the_comparison(tmp_path: Path) -> None:
    folder = tmp_path / "runs"
    folder.mkdir()
    (folder / "cp-sat.json").write_text("keep me")
    result = run_cli("compare", *SMALL, "--save", folder)
    assert "cp-sat.json already exists" in cli_error(result) and result.stdout == ""
    cli_ok(run_cli("compare", *SMALL, "--save", folder, "--force"))
    assert (folder / "cp-sat.json").read_text().startswith("{")
    line = cli_error(run_cli("pareto", *SMALL, "--save", folder / "cp-sat.json", "--no-visualization"))
    assert f"Directory '{folder / 'cp-sat.json'}' is a file" in line
