"""`--log`/`-v`, `--cpsat-param` and `--tuning` on the commands that run CP-SAT: the log on standard error
only when asked, CP-SAT's own lines relayed from the search's child process, expert parameters and
tunings applied or refused in one line, and every solve's reason and tuning in its output."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from pipesat.models import Tuning
from tests.cli_helpers import cli_error, cli_ok, run_cli

# A search runs and proves 41 in well under a second (docs/design.md: the periodic start is 44).
SEARCHED = ("-s", 4, "-b", 8, "-f", 1, "-bw", 1, "-w", 1, "--memory-limit", "0.5x", "--workers", 1, "--no-progress")
LOG_PREFIXES = ("solve: ", "portfolio: ", "cpsat.")


def _log_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith(LOG_PREFIXES)]


def _untimed(output: str) -> list[str]:
    return [line for line in output.splitlines() if not line.startswith("solve time:")]


@pytest.mark.parametrize("flag", ["--log", "-v"])
def test_solve_log_shows_pipesats_decisions_and_cpsats_own_log(flag: str) -> None:
    result = run_cli("solve", *SEARCHED, flag)
    quiet = run_cli("solve", *SEARCHED)
    assert _untimed(cli_ok(result)) == _untimed(cli_ok(quiet))  # the log goes to standard error only
    log = _log_lines(result.stderr)
    for line in (
        "solve: lower bound on the makespan: 34, a device's work or span under its memory limit, with the "
        "pipeline's fill and drain",
        "portfolio: start zb-auto: 51, peak memory 2",
        "solve: best start: memory-gated = 41",
        "solve: CP-SAT searches from memory-gated = 41",
        "cpsat.child: CpSolverResponse summary:",
        "cpsat.search: search stopped (proof): proven by CP-SAT",
    ):
        assert line in log
    assert any(line.startswith("cpsat.child: #Bound") for line in log)
    assert _log_lines(quiet.stderr) == []
    assert logging.getLogger("pipesat").handlers == []  # the command's handler is gone with it


def test_a_cpsat_param_is_applied_after_pipesats_settings() -> None:
    result = run_cli("solve", *SEARCHED, "--log", "--cpsat-param", "linearization_level=2", "--cpsat-param", "seed=7")
    assert result.exit_code != 0  # `seed` is no field: nothing ran
    result = run_cli(
        "solve", *SEARCHED, "--log", "--cpsat-param", "linearization_level=2", "--cpsat-param", "num_workers=2"
    )
    cli_ok(result)
    parameters = next(line for line in _log_lines(result.stderr) if line.startswith("cpsat.child: Parameters:"))
    assert "linearization_level: 2" in parameters and "num_workers: 2" in parameters


@pytest.mark.parametrize(
    ("command", "message"),
    [
        (("solve", "-s", 2, "-b", 2), "error: --cpsat-param linearization_level=abc: Couldn't parse integer: abc"),
        (("compare", "-s", 2, "-b", 2), "error: --cpsat-param linearization_level=abc: Couldn't parse integer: abc"),
        (("pareto", "-s", 2, "-b", 2), "error: --cpsat-param linearization_level=abc: Couldn't parse integer: abc"),
        (("plan", "no-spec.yaml"), "error: --cpsat-param linearization_level=abc: Couldn't parse integer: abc"),
    ],
)
def test_a_bad_cpsat_param_is_one_line_on_every_command(command: tuple[object, ...], message: str) -> None:
    assert cli_error(run_cli(*command, "--cpsat-param", "linearization_level=abc")) == message


def test_a_cpsat_param_cpsat_refuses_is_one_line() -> None:
    line = cli_error(run_cli("solve", "-s", 2, "-b", 2, "--cpsat-param", "max_time_in_seconds=-1"))
    assert line == "error: --cpsat-param: CP-SAT refuses it: Parameters max_time_in_seconds must be non-negative"


def test_the_json_document_says_why_the_solve_ended_and_the_log_stays_off_stdout() -> None:
    result = run_cli("solve", *SEARCHED, "--format", "json", "--log")
    document = json.loads(cli_ok(result))
    assert document["status"] == "optimal" and document["stopped_by"] == "proof"
    assert document["reason"] == "proven by CP-SAT"
    assert "cpsat.child: CpSolverResponse summary:" in _log_lines(result.stderr)


def test_compare_logs_its_solve() -> None:
    result = run_cli("compare", *SEARCHED, "--log")
    cli_ok(result)
    assert "cpsat.search: search stopped (proof): proven by CP-SAT" in _log_lines(result.stderr)


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("tuning.toml", "strong_probes = false\nstall_share = inf\nproof_small_ops = 0\n"),
        ("tuning.yaml", "strong_probes: false\nstall_share: 100.0\nproof_small_ops: 0\n"),
    ],
)
def test_a_tuning_file_is_applied_logged_and_in_the_json(tmp_path: Path, name: str, text: str) -> None:
    path = tmp_path / name
    path.write_text(text)
    result = run_cli("solve", *SEARCHED, "--format", "json", "--log", "--tuning", path)
    document = json.loads(cli_ok(result))
    stall = float("inf") if name.endswith(".toml") else 100.0
    expected = Tuning(strong_probes=False, stall_share=stall, proof_small_ops=0)
    assert document["tuning"] == expected.as_dict() and document["tuning"]["strong_probes"] is False
    saved = tmp_path / "schedule.json"  # the schedule file's source says it too (JSON has no infinity)
    cli_ok(run_cli("solve", *SEARCHED, "--tuning", path, "--save", saved))
    assert json.loads(saved.read_text())["source"]["tuning"] == expected.as_dict()
    assert f"solve: tuning: {expected.describe()}" in _log_lines(result.stderr)
    # On two workers the search runs the portfolio of a model of more than proof_small_ops ops.
    two = run_cli("solve", *SEARCHED[:-3], "--workers", 2, "--no-progress", "--log", "--tuning", path)
    cli_ok(two)
    assert "more than 0)" in next(line for line in _log_lines(two.stderr) if "CP-SAT subsolvers:" in line)


def test_the_default_tuning_is_in_the_json_and_the_log() -> None:
    result = run_cli("solve", *SEARCHED, "--format", "json", "--log")
    assert json.loads(cli_ok(result))["tuning"] == Tuning().as_dict()
    assert "solve: tuning: the defaults" in _log_lines(result.stderr)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "strong_probe = false\n",
            "unknown tuning field 'strong_probe'; did you mean 'strong_probes'? the fields are makespan_phase, ",
        ),
        ("strong_probes = 'no'\n", "tuning field strong_probes must be true or false, got 'no'"),
        ("proof_small_ops = 1.5\n", "tuning field proof_small_ops must be a whole number, got 1.5"),
        ("makespan_phase = 2\n", "tuning field makespan_phase is a share of the time, at most 1, got 2.0"),
        ("opening_gap = -0.1\n", "tuning field opening_gap must be at least 0, got -0.1"),
        ("strong_probes = \n", "not valid TOML: "),
    ],
)
@pytest.mark.parametrize(
    "command", [("solve", "-s", 2, "-b", 2), ("pareto", "-s", 2, "-b", 2), ("plan", "no-spec.yaml")]
)
def test_a_bad_tuning_file_is_one_line_on_every_command(
    tmp_path: Path, command: tuple[object, ...], text: str, message: str
) -> None:
    path = tmp_path / "tuning.toml"
    path.write_text(text)
    assert cli_error(run_cli(*command, "--tuning", path)).startswith(f"error: {path}: {message}")


def test_a_missing_tuning_file_is_one_line() -> None:
    assert cli_error(run_cli("solve", "-s", 2, "-b", 2, "--tuning", "no-tuning.toml")) == (
        "error: no-tuning.toml: no such file"
    )
