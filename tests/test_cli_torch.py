"""The PyTorch commands through click's runner: export, import torch/csv, torch-run, compare --with-torch."""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

import pytest

from pipesat.commands.frame import EXIT_BAD_INPUT, EXIT_INVALID
from pipesat.models import Instance, Op, Schedule
from pipesat.solver.heuristics import run_heuristic
from pipesat.solver.io.schedule_file import load_schedule, save_schedule
from pipesat.solver.torch.import_schedule import INSTALL_HINT, TORCH_SCHEDULES
from tests.cli_helpers import cli_error, cli_ok, run_cli
from tests.solver.torch.torch_fakes import load_in_torch
from tests.strategies import assert_valid

VSHAPE = ["-s", "2", "-b", "4", "-w", "1", "--chunks", "2", "--placement", "vshape"]


@pytest.fixture
def zb_v_file(tmp_path: Path) -> Path:
    instance = Instance.from_dict(
        {"num_devices": 2, "num_microbatches": 4, "chunks": 2, "placement": "vshape", "weight_times": 1}
    )
    return save_schedule(assert_valid(run_heuristic("zb-v", instance)), tmp_path / "zbv.json")


@pytest.fixture
def no_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make `import torch` fail as it does where the extra is not installed."""
    monkeypatch.setitem(sys.modules, "torch", None)


def test_export_torch_csv_loads_in_torch(tmp_path: Path, zb_v_file: Path) -> None:
    out = tmp_path / "zbv.csv"
    assert f"{out} (2 ranks, 48 actions)" in cli_ok(run_cli("export", zb_v_file, "--to", "torch-csv", out))
    with out.open(newline="") as file:
        rows = list(csv.reader(file))
    assert len(rows) == 2 and rows[0][:4] == ["0F0", "0F1", "0F2", "3F0"]
    runtime = load_in_torch(out, num_devices=2, num_stages=4, num_microbatches=4)
    assert runtime.stage_index_to_group_rank == {0: 0, 1: 1, 2: 1, 3: 0}


def test_export_chrome_trace(tmp_path: Path, zb_v_file: Path) -> None:
    out = tmp_path / "trace.json"
    cli_ok(run_cli("export", zb_v_file, "--to", "chrome-trace", out))
    events = json.loads(out.read_text())["traceEvents"]
    assert sum(event["ph"] == "X" for event in events) == len(load_schedule(zb_v_file).ops)


def test_export_refuses_an_invalid_schedule_file(tmp_path: Path, zb_v_file: Path) -> None:
    schedule = load_schedule(zb_v_file)
    late = tuple(Op(*op[:4], op.start + 0.5, op.end + 0.5) if op.key == ("F", 1, 1) else op for op in schedule.ops)
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps(Schedule(schedule.instance, late, "broken").to_dict()))
    out = tmp_path / "broken.csv"
    line = cli_error(run_cli("export", broken, "--to", "torch-csv", out), EXIT_INVALID)
    assert "invalid schedule broken: device 1:" in line
    assert not out.exists()


def test_import_csv_takes_shape_from_the_file_and_times_from_options(tmp_path: Path, zb_v_file: Path) -> None:
    exported = tmp_path / "zbv.csv"
    cli_ok(run_cli("export", zb_v_file, "--to", "torch-csv", exported))
    saved = tmp_path / "imported.json"
    output = cli_ok(run_cli("import", "csv", exported, "-w", "1", "--save", saved))
    assert output.startswith("zbv on 2 devices, 4 microbatches, 2 chunks (vshape), split backward")
    imported = assert_valid(load_schedule(saved))
    assert sorted(imported.ops) == sorted(load_schedule(zb_v_file).ops)


def test_import_csv_with_a_wrong_shape_says_which_options(tmp_path: Path, zb_v_file: Path) -> None:
    exported = tmp_path / "zbv.csv"
    cli_ok(run_cli("export", zb_v_file, "--to", "torch-csv", exported))
    line = cli_error(run_cli("import", "csv", exported, "-w", "1", "--placement", "interleaved"), EXIT_BAD_INPUT)
    assert line.endswith("give --chunks 2 --placement vshape")


def test_import_torch_builtin_saves_a_valid_schedule(tmp_path: Path) -> None:
    pytest.importorskip("torch", reason=INSTALL_HINT)
    saved = tmp_path / "zbv.json"
    output = cli_ok(run_cli("import", "torch", "ZBVZeroBubble", *VSHAPE, "--save", saved))
    assert output.startswith("torch:ZBVZeroBubble on 2 devices")
    assert load_schedule(saved).source["name"] == "ZBVZeroBubble"


def test_import_torch_1f1b_reports_the_torch_bug() -> None:
    pytest.importorskip("torch", reason=INSTALL_HINT)
    line = cli_error(run_cli("import", "torch", "1F1B", "-s", "4", "-b", "8"), EXIT_INVALID)
    assert "known to be wrong on the last rank" in line and "missing: F(stage 3, mb 0)" in line


def test_import_torch_that_does_not_fit_is_bad_input() -> None:
    pytest.importorskip("torch", reason=INSTALL_HINT)
    line = cli_error(run_cli("import", "torch", "ZBVZeroBubble", "-s", "2", "-b", "4", "-w", "1"), EXIT_BAD_INPUT)
    assert line == "error: torch ZBVZeroBubble: needs several stages per device (chunks >= 2)"


def test_compare_with_torch_lists_every_builtin() -> None:
    pytest.importorskip("torch", reason=INSTALL_HINT)
    output = cli_ok(run_cli("compare", *VSHAPE, "--no-solve", "--with-torch"))
    for name in TORCH_SCHEDULES:
        assert f"torch {name}" in output


@pytest.mark.parametrize(
    "args",
    [
        ("import", "torch", "GPipe", "-s", "2", "-b", "4"),
        ("compare", *VSHAPE, "--no-solve", "--with-torch"),
        ("torch-run", "SCHEDULE"),
    ],
)
def test_without_torch_the_commands_say_how_to_install_it(no_torch: None, zb_v_file: Path, args: tuple) -> None:
    args = tuple(zb_v_file if arg == "SCHEDULE" else arg for arg in args)
    line = cli_error(run_cli(*args), EXIT_BAD_INPUT)
    assert line == f"error: {INSTALL_HINT}"
