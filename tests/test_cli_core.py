"""The CLI frame: `instance show`, `check`, and bad input as one line on stderr with exit code 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import Result

from pipesat.commands.frame import EXIT_BAD_INPUT, EXIT_INVALID
from pipesat.models import Instance, InstanceError
from pipesat.solver.heuristics import run_heuristic
from pipesat.solver.io.schedule_file import save_schedule
from tests.bad_inputs import BAD_INSTANCES
from tests.cli_helpers import cli_error, run_cli, write_yaml
from tests.conftest import INSTANCES_DIR
from tests.strategies import assert_valid


def _shown(result: Result) -> dict:
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_help() -> None:
    result = run_cli("--help")
    assert result.exit_code == 0 and "instance" in result.stdout and "check" in result.stdout


@pytest.mark.parametrize("name", ["sample_config.json", "sample_config.yaml"])
def test_instance_show_reads_the_earlier_tools_configs(name: str) -> None:
    for args in ([INSTANCES_DIR / name], ["-c", INSTANCES_DIR / name], ["--config", INSTANCES_DIR / name]):
        shown = _shown(run_cli("instance", "show", *args))
        assert shown["name"] == "sample_config"
        assert shown == Instance.from_dict(shown).to_dict()
    raw = json.loads((INSTANCES_DIR / name).read_text()) if name.endswith(".json") else None
    if raw:
        assert shown["num_devices"] == raw["num_stages"] and shown["forward_times"] == raw["forward_times"]


def test_instance_show_from_options_with_space_separated_lists() -> None:
    shown = _shown(run_cli("instance", "show", "-s", 4, "-b", 8, "-f", 1, 2, 3, 4, "-bw", "2,4,6,8", "-w", 1))
    assert (shown["num_devices"], shown["num_microbatches"]) == (4, 8)
    assert shown["forward_times"] == [1, 2, 3, 4]
    assert shown["backward_times"] == [2, 4, 6, 8]
    assert shown["weight_times"] == [1, 1, 1, 1]


def test_long_option_names_and_aliases() -> None:
    shown = _shown(
        run_cli("instance", "show", "--num-stages", 2, "--num-microbatches", 3, "--chunks", 2, "--placement", "vshape")
    )
    assert shown["placement"] == [0, 1, 1, 0]
    shown = _shown(run_cli("instance", "show", "--num-devices", 2, "--num-batches", 3, "--placement", "1,0,0,1"))
    assert (shown["chunks"], shown["placement"]) == (2, [1, 0, 0, 1])


def test_options_override_the_file() -> None:
    shown = _shown(run_cli("instance", "show", INSTANCES_DIR / "sample_config.yaml", "-b", 3, "--p2p-time", 0.25))
    assert (shown["num_devices"], shown["num_microbatches"], shown["p2p_time"]) == (5, 3, 0.25)


def test_relative_memory_limit() -> None:
    shown = _shown(run_cli("instance", "show", "-s", 4, "-b", 8, "--memory-limit", "0.5x"))
    assert shown["memory_limit"] == 0.5 * 4


@pytest.mark.parametrize(("data", "message"), BAD_INSTANCES)
def test_bad_instance_file_gives_one_line_and_exit_2(tmp_path: Path, data: dict, message: str) -> None:
    # YAML: JSON files refuse NaN and Infinity while parsing (tests/solver/... document tests).
    path = write_yaml(tmp_path / "bad.yaml", data)
    line = cli_error(run_cli("instance", "show", path))
    assert line.startswith(f"error: {path}: ")
    assert message in line


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-s", 0, "-b", 2], "--num-stages/-s must be at least 1, got 0"),
        (["-s", 2, "-b", 0], "--num-batches/-b must be at least 1, got 0"),
        (["-s", 2, "-b", 2, "-f", 1, 2, 3], "--forward-times/-f has 3 values but there are 2 stages"),
        (["-s", 2, "-b", 2, "-f", 1, "nan"], "--forward-times/-f[1] must be a finite number, got nan"),
        (["-s", 2, "-b", 2, "-f", "-1"], "--forward-times/-f = -1 must be positive"),
        (["-s", 2, "-b", 2, "-f", "fast"], "--forward-times/-f takes numbers, got 'fast'"),
        (["-s", 2, "-b", 2, "--placement", "zigzag"], "unknown placement 'zigzag'"),
        (["-s", 2, "-b", 2, "--placement", "vshape"], "placement 'vshape' needs chunks 2, got 1"),
        (["-s", 2, "-b", 2, "--placement", "0,x"], "--placement list must be device numbers"),
        (["-s", 2, "-b", 2, "--memory-limit", "lots"], "--memory-limit must be a number, got 'lots'"),
        (["-s", 2], "give an instance file, or at least --num-stages/-s and --num-batches/-b"),
    ],
)
def test_bad_options_give_one_line_and_exit_2(args: list, message: str) -> None:
    assert message in cli_error(run_cli("instance", "show", *args))


def test_missing_instance_file_and_two_files(tmp_path: Path) -> None:
    assert "nope.yaml: no such file" in cli_error(run_cli("instance", "show", tmp_path / "nope.yaml"))
    first, second = INSTANCES_DIR / "sample_config.json", INSTANCES_DIR / "sample_config.yaml"
    assert "give the instance once" in cli_error(run_cli("instance", "show", first, "-c", second))


def test_debug_shows_the_exception() -> None:
    result = run_cli("--debug", "instance", "show", "-s", 0, "-b", 2)
    assert result.exit_code != 0
    assert isinstance(result.exception, InstanceError)


@pytest.fixture
def schedule_file(tmp_path: Path) -> Path:
    instance = Instance.from_dict({"num_devices": 3, "num_microbatches": 4, "p2p_time": 0.5})
    return save_schedule(assert_valid(run_heuristic("1f1b", instance)), tmp_path / "1f1b.json")


def test_check_valid_schedule(schedule_file: Path) -> None:
    result = run_cli("check", schedule_file)
    assert result.exit_code == 0
    assert result.stdout.strip() == f"{schedule_file}: valid (24 ops)"


def test_check_lists_every_violation(schedule_file: Path) -> None:
    data = json.loads(schedule_file.read_text())
    data["ops"] = [op for op in data["ops"] if (op["kind"], op["stage"], op["microbatch"]) != ("B", 2, 3)]
    # Lengthen device 0's last op, which nothing waits for: only its duration is wrong.
    last = max((op for op in data["ops"] if op["device"] == 0), key=lambda op: op["start"])
    last["end"] += 1
    schedule_file.write_text(json.dumps(data))
    result = run_cli("check", schedule_file)
    line = cli_error(result, EXIT_INVALID)
    assert line == f"error: {schedule_file}: 2 violation(s)"
    assert result.stdout.splitlines() == [
        "B(stage 2, mb 3) is missing",
        f"device 0: B(stage 0, mb 3) lasts 3 (from {last['start']:g} to {last['end']:g}), expected 2",
    ]


def test_check_corrupted_file(schedule_file: Path) -> None:
    # A file that is not a well-formed schedule is bad input (exit 2); an invalid schedule exits 1.
    schedule_file.write_text("{not json")
    assert "not valid JSON" in cli_error(run_cli("check", schedule_file), EXIT_BAD_INPUT)
    schedule_file.write_text(json.dumps({"format": "pipesat-schedule/1", "instance": {}, "ops": []}))
    assert "the schedule's instance is invalid: missing num_devices" in cli_error(
        run_cli("check", schedule_file), EXIT_BAD_INPUT
    )


def test_usage_errors_are_one_line_with_exit_2() -> None:
    for args in (["--bogus"], ["check"], ["instance", "show", "--x"], ["schedule", "1f1b", "-s", "x"]):
        line = cli_error(run_cli(*args))
        assert "--help" in line


def test_a_missing_schedule_file_is_bad_input(tmp_path: Path) -> None:
    assert "no such file" in cli_error(run_cli("check", tmp_path / "none.json"))


def test_no_command_shows_the_help() -> None:
    result = run_cli()
    assert result.exit_code == 0 and "Commands:" in result.stdout
