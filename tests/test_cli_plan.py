"""`pipesat plan` through the command line: the table in every format, the picture, the best schedule
(valid, accepted by `check`), overrides, and one-line errors."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
import yaml

from pipesat.solver.evaluate.validator import validate
from pipesat.solver.io.schedule_file import load_schedule
from tests.cli_helpers import cli_error, cli_ok, run_cli
from tests.solver.plan.conftest import TINY

FAST = ("--time-budget", 20, "--jobs", 2, "--workers", 1, "--seed", 0)


@pytest.fixture
def spec_file(tmp_path: Path) -> Path:
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(TINY))
    return path


def test_the_table_picture_and_best_schedule(spec_file: Path, tmp_path: Path) -> None:
    picture, best = tmp_path / "plan.png", tmp_path / "best.json"
    out = cli_ok(run_cli("plan", spec_file, *FAST, "-o", picture, "--save-best", best))
    lines = out.splitlines()
    assert lines[0].split()[:4] == ["rank", "t", "p", "d"]
    assert lines[2].split()[:7] == ["1", "1", "4", "1", "vshape", "1", "4"]
    assert "configurations: 7 (solved " in out and "pruned by bound" in out
    assert "proven: no configuration can be faster" in out
    assert picture.stat().st_size > 10_000
    schedule = load_schedule(best)
    assert validate(schedule) == []
    assert schedule.source["plan"] == "t1 p4 d1 vshape b1 m4"
    assert "valid" in cli_ok(run_cli("check", best)).lower()


def test_csv_json_and_markdown(spec_file: Path) -> None:
    result = run_cli("plan", spec_file, *FAST, "--format", "csv", "--top", 3)
    rows = list(csv.DictReader(io.StringIO(cli_ok(result))))
    assert len(rows) == 3 and rows[0]["rank"] == "1" and float(rows[0]["iteration_ms (ms)"]) > 0
    assert "configurations: 7" in result.stderr
    document = json.loads(cli_ok(run_cli("plan", spec_file, *FAST, "--format", "json")))
    assert document["format"] == "pipesat-plan/1"
    assert document["counts"]["configurations"] == 7 and document["counts"]["pruned"] > 0
    assert document["best"]["placement"] == "vshape"
    assert document["configurations"][0] == document["best"]
    markdown = cli_ok(run_cli("plan", spec_file, *FAST, "--format", "markdown"))
    assert markdown.startswith("| rank | t | p | d |")


def test_options_override_the_spec(spec_file: Path) -> None:
    document = json.loads(
        cli_ok(run_cli("plan", spec_file, *FAST, "--format", "json", "--gpus", 2, "--global-batch", 2))
    )
    assert {row["pp"] * row["dp"] for row in document["configurations"]} == {2}


def test_progress_goes_to_stderr(spec_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    result = run_cli("plan", spec_file, *FAST, "--progress")
    assert "plan [" in result.stderr and "left" in result.stderr
    monkeypatch.setenv("COLUMNS", "40")  # the same line, cut to the terminal's width
    shown = run_cli("plan", spec_file, *FAST, "--progress").stderr.split("\r")[1:]
    assert shown and all(len(text) <= 39 for text in shown)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--gpu-memory", "40"), "--gpu-memory must be a positive amount with a unit, such as 80GiB, got '40'"),
        (("--efficiency", "2"), "--efficiency must be in (0, 1] (the fraction of peak throughput reached), got 2"),
        (("--tensor-parallel", "1,x"), "--tensor-parallel must be whole numbers separated by commas, such as 1,2"),
        (("--executor", "local", "--ray-address", "h:1"), "--ray-address goes with --executor ray"),
        (("-o", "plan.txt"), "name the picture .png, .svg or .pdf"),
    ],
)
def test_bad_options_are_one_line(spec_file: Path, args: tuple, message: str) -> None:
    assert message in cli_error(run_cli("plan", spec_file, *FAST, *args))


def test_bad_specs_are_one_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump({**TINY, "model": {**TINY["model"], "layer": 3}}))
    assert "unknown key model.layer" in cli_error(run_cli("plan", path))
    assert "no such file" in cli_error(run_cli("plan", tmp_path / "none.yaml"))


def test_outputs_never_overwrite_the_spec_or_an_existing_file(spec_file: Path, tmp_path: Path) -> None:
    cli_error(run_cli("plan", spec_file, *FAST, "--save-best", spec_file))
    existing = tmp_path / "best.json"
    existing.write_text("{}")
    assert "--force" in cli_error(run_cli("plan", spec_file, *FAST, "--save-best", existing))
