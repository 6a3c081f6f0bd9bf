"""The catalogue of bad input (`tests/bad_inputs.py`) at the API and at the command line: one `error:`
line with the expected message, the expected exit code, no traceback, and nothing done before it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from pipesat.models import InputError, PipesatError, load_instance
from pipesat.solver.instances.calibration import load_calibration
from pipesat.solver.io.schedule_file import load_schedule
from pipesat.solver.plan.space import PlanLimits, enumerate_space
from pipesat.solver.plan.spec import spec_from_dict
from pipesat.solver.torch.import_schedule import read_torch_csv
from tests.bad_inputs import BAD_COMMANDS, BAD_FILES, BAD_READS, BAD_SPACES, BadCommand, BadFile, BadSpace
from tests.cli_helpers import cli_error, cli_ok, run_cli
from tests.conftest import ROOT
from tests.solver.plan.conftest import TINY

LOADERS = {"instance": load_instance, "schedule": load_schedule, "csv": read_torch_csv, "calibration": load_calibration}
READS_TIMEOUT = 300
"""Seconds for every case of BAD_READS together (each takes well under one)."""


def _write(folder: Path, bad: BadFile) -> Path:
    path = folder / bad.name
    if not bad.name.startswith("absent"):
        path.write_text(bad.text)
    return path


@pytest.mark.parametrize("bad", BAD_FILES, ids=lambda bad: bad.name)
def test_a_bad_file_is_one_line_at_the_command_line(tmp_path: Path, bad: BadFile) -> None:
    line = cli_error(run_cli(*bad.command, _write(tmp_path, bad)), bad.exit_code)
    assert bad.message in line


@pytest.mark.parametrize("bad", [bad for bad in BAD_FILES if bad.exit_code == 2], ids=lambda bad: bad.name)
def test_a_bad_file_is_bad_input_at_the_api(tmp_path: Path, bad: BadFile) -> None:
    with pytest.raises(InputError) as raised:
        LOADERS[bad.loader](_write(tmp_path, bad))
    assert bad.message in str(raised.value) and "\n" not in str(raised.value)


@pytest.mark.parametrize("bad", BAD_COMMANDS, ids=lambda bad: bad.case)
def test_a_bad_command_is_refused_before_any_work(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, bad: BadCommand
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "cfg.yaml").write_text("num_devices: 2\nnum_microbatches: 2\n")
    cli_ok(run_cli("schedule", "1f1b", "-s", "2", "-b", "2", "--no-visualization", "--save", "s.json"))
    (tmp_path / "plan.yaml").write_text(yaml.safe_dump(TINY))
    for space in BAD_SPACES:
        (tmp_path / f"{space.case}.yaml").write_text(yaml.safe_dump(space.spec))
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "to-fifo").symlink_to("fifo")
    (tmp_path / "folder").mkdir()
    before = _contents(tmp_path)
    result = run_cli(*bad.args)
    assert bad.message in cli_error(result, bad.exit_code)
    assert result.stdout == ""
    assert _contents(tmp_path) == before


def _contents(folder: Path) -> dict[str, Any]:
    """What a folder holds: each regular file's bytes, and what each other entry is."""
    return {
        path.name: path.read_bytes() if path.is_file() and not path.is_symlink() else os.lstat(path).st_mode
        for path in folder.iterdir()
    }


@pytest.mark.parametrize("bad", BAD_SPACES, ids=lambda bad: bad.case)
def test_a_plan_beyond_its_limits_is_refused_at_the_api(bad: BadSpace) -> None:
    with pytest.raises(InputError) as raised:
        enumerate_space(spec_from_dict(bad.spec), PlanLimits(**bad.limits))
    assert str(raised.value) == bad.message


def test_every_error_is_a_pipesat_error_with_one_line() -> None:
    # The catalogue's API errors are PipesatErrors: the CLI turns exactly those into one line and an exit code.
    assert issubclass(InputError, PipesatError)


# Each case of BAD_READS in one child process (one import), which prints a line as each case begins
# and its result as it ends: a case that hangs or fills the memory ends the child, and is named.
_READS_CHILD = """
import json, sys
from tests.bad_inputs import BAD_READS
from tests.cli_helpers import run_cli
for bad in BAD_READS:
    print(json.dumps({"case": bad.case}), flush=True)
    result = run_cli(*bad.args)
    print(json.dumps({"case": bad.case, "code": result.exit_code, "out": result.stdout, "err": result.stderr}), flush=True)
"""


@pytest.fixture(scope="module")
def read_results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    folder = tmp_path_factory.mktemp("reads")
    (folder / "plan.yaml").write_text(yaml.safe_dump(TINY))
    os.mkfifo(folder / "fifo")
    os.mkfifo(folder / "fifo.toml")
    (folder / "folder").mkdir()
    (folder / "big.yaml").write_text("num_devices: 2\n" + "#" * (2 << 20) + "\n")
    before = _contents(folder)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    command = [sys.executable, "-c", _READS_CHILD]
    try:
        done = subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True, timeout=READS_TIMEOUT)
        lines, stderr = done.stdout, done.stderr
    except subprocess.TimeoutExpired as timeout:
        lines, stderr = (timeout.stdout or b"").decode(), "timed out"
    results = {entry["case"]: entry for entry in map(json.loads, lines.splitlines())}
    assert _contents(folder) == before
    started = [case for case, entry in results.items() if "code" not in entry]
    assert not started, f"{started[0]} did not end: {stderr[-2000:]}"
    return results


@pytest.mark.parametrize("bad", BAD_READS, ids=lambda bad: bad.case)
def test_an_input_that_is_no_regular_file_or_too_large_is_refused_at_once(
    read_results: dict[str, dict[str, Any]], bad: BadCommand
) -> None:
    result = read_results[bad.case]
    lines = result["err"].splitlines()
    assert result["code"] == bad.exit_code, result
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in result["err"], result
    assert bad.message in lines[0]
    assert result["out"] == ""
