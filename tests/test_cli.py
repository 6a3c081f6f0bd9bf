"""The schedule commands through click's runner: schedule, render, compare, solve, pareto.

The CLI frame (`instance show`, `check`, bad instance input) is tested in test_cli_core.py.
"""

from __future__ import annotations

import csv
import io
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import matplotlib.image
import numpy as np
import pytest

from pipesat.commands.frame import EXIT_BAD_INPUT, EXIT_INTERRUPTED, EXIT_INVALID
from pipesat.models import Instance
from pipesat.solver.evaluate.bounds import minimum_memory_limit
from pipesat.solver.evaluate.metrics import compute_metrics
from pipesat.solver.evaluate.retime import retime_for_span
from pipesat.solver.evaluate.validator import validate
from pipesat.solver.heuristics import UnknownSchedule, all_heuristics, run_heuristic
from pipesat.solver.io.schedule_file import load_schedule
from pipesat.solver.report.tables import format_number, format_percent
from pipesat.solver.report.units import units_of
from tests.cli_helpers import cli_error, cli_ok, run_cli
from tests.conftest import INSTANCES_DIR

TINY = ["-s", "2", "-b", "3", "--time-limit", "3", "--workers", "1"]


def _field(output: str, name: str) -> str:
    """The value printed after `name:` on its own line."""
    for line in output.splitlines():
        if line.startswith(name + ":"):
            return line.split(":", 1)[1].strip()
    raise AssertionError(f"no {name!r} line in:\n{output}")


def assert_picture(path: Path, min_size: tuple[int, int] = (400, 300)) -> np.ndarray:
    """A PNG that opens, is at least `min_size` pixels, and is not one flat colour."""
    image = matplotlib.image.imread(path)
    height, width = image.shape[:2]
    assert width >= min_size[0] and height >= min_size[1]
    assert np.ptp(image[..., :3]) > 0.5, "the picture is blank"
    return image


def assert_saved_valid(path: Path) -> None:
    schedule = load_schedule(path)
    assert validate(schedule) == []


# --- schedule: the earlier tool's command line -----------------------------------------------------


def test_schedule_1f1b_like_the_earlier_tool(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    output = cli_ok(run_cli("schedule", "1f1b", "-s", 4, "-b", 8))
    # 1F1B at unit F and B = 2F: the bubble is (p-1)/(m+p-1) of the makespan.
    assert _field(output, "bubble rate").startswith(format_percent(3 / 11))
    assert _field(output, "makespan") == format_number(11 * 3)
    assert _field(output, "picture") == "pipeline_1f1b.png"
    assert_picture(tmp_path / "pipeline_1f1b.png")


@pytest.mark.parametrize(
    ("config", "picture"),
    [("sample_config.json", "pipeline_1f1b_custom.png"), ("sample_config.yaml", "pipeline_1f1b_yaml.png")],
)
def test_schedule_reads_the_earlier_tools_config_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, config: str, picture: str
) -> None:
    monkeypatch.chdir(tmp_path)
    output = cli_ok(run_cli("schedule", "1f1b", "-c", INSTANCES_DIR / config))
    instance = Instance.from_dict(json.loads(cli_ok(run_cli("instance", "show", INSTANCES_DIR / config))))
    metrics = compute_metrics(run_heuristic("1f1b", instance))
    assert _field(output, "makespan") == format_number(metrics.makespan)
    assert _field(output, "bubble rate").startswith(format_percent(metrics.bubble_rate))
    assert_picture(tmp_path / picture)


def test_schedule_list_options_p2p_output_and_save(tmp_path: Path) -> None:
    picture, saved = tmp_path / "mine.svg", tmp_path / "s.json"
    args = ["-s", 4, "-b", 6, "-f", 1, 1.5, 1, 1, "-bw", 2, 3, 2, 2, "--p2p-time", 0.25]
    output = cli_ok(run_cli("schedule", "1f1b", *args, "-o", picture, "--save", saved))
    instance = Instance.from_dict(
        {"num_devices": 4, "num_microbatches": 6, "forward_times": [1, 1.5, 1, 1], "backward_times": [2, 3, 2, 2]}
    ).with_changes(p2p_time=0.25)
    assert _field(output, "makespan") == format_number(compute_metrics(run_heuristic("1f1b", instance)).makespan)
    assert picture.read_text().lstrip().startswith("<?xml") and "<svg" in picture.read_text()
    assert_saved_valid(saved)
    assert load_schedule(saved).instance == instance


def test_schedule_objective_span_retimes_for_the_least_span(tmp_path: Path) -> None:
    saved = tmp_path / "h2.json"
    args = ["-s", 4, "-b", 8, "-w", 1, "-bw", 1, "--p2p-time", 0.5, "--no-visualization", "--save", saved]
    output = cli_ok(run_cli("schedule", "zb-h2", *args, "--objective", "span"))
    instance = load_schedule(saved).instance
    retimed = compute_metrics(retime_for_span(run_heuristic("zb-h2", instance)))
    assert _field(output, "max span") == format_number(retimed.max_span)
    assert_saved_valid(saved)


def test_schedule_long_option_names_of_the_earlier_tool(tmp_path: Path) -> None:
    picture = tmp_path / "long.png"
    args = ["--num-stages", 3, "--num-batches", 5, "--forward-times", 1, 2, 1, "--backward-times", 2, 3, 2]
    output = cli_ok(run_cli("schedule", "1f1b", *args, "--p2p-time", 0.5, "--output", picture))
    instance = Instance.from_dict(
        {
            "num_devices": 3,
            "num_microbatches": 5,
            "forward_times": [1, 2, 1],
            "backward_times": [2, 3, 2],
            "p2p_time": 0.5,
        }
    )
    assert _field(output, "makespan") == format_number(compute_metrics(run_heuristic("1f1b", instance)).makespan)
    assert_picture(picture)
    config = cli_ok(run_cli("schedule", "1f1b", "--config", INSTANCES_DIR / "sample_config.json", "--no-visualization"))
    assert config.startswith("1F1B on sample_config: 6 devices, 12 microbatches")


def test_debug_shows_the_traceback_of_a_schedule_error() -> None:
    result = run_cli("--debug", "schedule", "nope", "-s", 2, "-b", 2)
    assert result.exit_code != 0 and isinstance(result.exception, UnknownSchedule)


def test_schedule_no_visualization_writes_no_picture(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    cli_ok(run_cli("schedule", "gpipe", "-s", 2, "-b", 2, "--no-visualization"))
    assert list(tmp_path.iterdir()) == []


def test_schedule_ascii_with_chunks_and_w(tmp_path: Path) -> None:
    args = ["-s", 2, "-b", 4, "-w", 1, "-bw", 1, "--chunks", 2, "--placement", "vshape", "--no-visualization"]
    output = cli_ok(run_cli("schedule", "zb-v", *args, "--ascii"))
    rows = [line for line in output.splitlines() if line.startswith("GPU ")]
    assert len(rows) == 2
    assert all(letter in "".join(rows) for letter in "FBWfbw")


def test_schedule_memory_limit_and_weight_times(tmp_path: Path) -> None:
    saved = tmp_path / "zb.json"
    args = ["-s", 4, "-b", 8, "-w", 1, "-bw", 1, "--memory-limit", "1x", "--no-visualization", "--save", saved]
    output = cli_ok(run_cli("schedule", "zb-h1", *args))
    assert "limit 4" in _field(output, "peak memory")
    assert_saved_valid(saved)
    assert load_schedule(saved).split_backward


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["nope", "-s", 2, "-b", 2], EXIT_BAD_INPUT, "unknown schedule 'nope'; choose one of"),
        (["zb-h1", "-s", 2, "-b", 2], EXIT_BAD_INPUT, "ZB-H1: needs a split backward (weight_times)"),
        (
            ["1f1b", "-s", 2, "-b", 2, "-o", "x.jpg"],
            EXIT_BAD_INPUT,
            "--output x.jpg: name the picture .png, .svg or .pdf",
        ),
        (["1f1b", "-s", 4, "-b", 8, "--memory-limit", "0.5x"], EXIT_INVALID, "1f1b does not fit the memory limit"),
        (["1f1b", "-s", 2], EXIT_BAD_INPUT, "give an instance file, or at least --num-stages/-s and --num-batches/-b"),
    ],
)
def test_schedule_bad_input(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list, code: int, message: str
) -> None:
    monkeypatch.chdir(tmp_path)
    assert message in cli_error(run_cli("schedule", *args), code)
    assert list(tmp_path.iterdir()) == []


# --- render and check ---------------------------------------------------------------------------


@pytest.fixture
def saved_schedule(tmp_path: Path) -> Path:
    path = tmp_path / "v.json"
    args = ["-s", 4, "-b", 8, "-w", 1, "-bw", 1, "--chunks", 2, "--placement", "vshape", "--p2p-time", 0.1]
    cli_ok(run_cli("schedule", "zb-v", *args, "--memory-limit", "1x", "--no-visualization", "--save", path))
    return path


def test_render_png_svg_pdf(saved_schedule: Path) -> None:
    png, svg, pdf = (saved_schedule.with_name("out" + suffix) for suffix in (".png", ".svg", ".pdf"))
    for path in (png, svg, pdf):
        assert _field(cli_ok(run_cli("render", saved_schedule, "-o", path)), "picture") == str(path)
    assert_picture(png, (1000, 600))
    assert "<svg" in svg.read_text()
    assert pdf.read_bytes().startswith(b"%PDF")


def test_render_default_name_and_ascii(saved_schedule: Path) -> None:
    cli_ok(run_cli("render", saved_schedule))
    assert_picture(saved_schedule.with_suffix(".png"))
    text = cli_ok(run_cli("render", saved_schedule, "--ascii"))
    names = [line.split(":")[0] for line in text.splitlines() if line.startswith("GPU")]
    assert names and names == [f"GPU {d}" for d in range(4)] * (len(names) // 4)


def test_render_and_check_refuse_a_corrupted_schedule(saved_schedule: Path) -> None:
    data = json.loads(saved_schedule.read_text())
    data["ops"][0]["end"] += 5
    saved_schedule.write_text(json.dumps(data))
    assert "pipesat check" in cli_error(run_cli("render", saved_schedule), EXIT_INVALID)
    assert "violation(s)" in cli_error(run_cli("check", saved_schedule), EXIT_INVALID)
    assert not saved_schedule.with_suffix(".png").exists()


def test_check_accepts_what_schedule_saved(saved_schedule: Path) -> None:
    assert cli_ok(run_cli("check", saved_schedule)).startswith(f"{saved_schedule}: valid")


def test_render_missing_file(tmp_path: Path) -> None:
    assert "no such file" in cli_error(run_cli("render", tmp_path / "none.json"), EXIT_BAD_INPUT)


# --- compare ----------------------------------------------------------------------------------------

NAMES = [h.name for h in all_heuristics()]
TITLES = [h.title for h in all_heuristics()]


def test_compare_table_has_every_heuristic_and_na_reasons() -> None:
    output = cli_ok(run_cli("compare", "-s", 4, "-b", 8, "-w", 1, "-bw", 1, "--no-solve"))
    for title in TITLES:
        assert any(line.startswith(title + " ") for line in output.splitlines()), title
    assert "n/a: needs chunks 2 with vshape placement" in output


def test_compare_csv_and_json_agree_with_the_heuristics() -> None:
    args = ["compare", "-s", 3, "-b", 6, "-w", 1, "-bw", 1, "--memory-limit", "1x", "--no-solve"]
    rows = list(csv.DictReader(io.StringIO(cli_ok(run_cli(*args, "--format", "csv")))))
    document = json.loads(cli_ok(run_cli(*args, "--format", "json")))
    assert document["objective"] == "makespan" and document["instance"]["memory_limit"] == [3.0, 3.0, 3.0]
    data = document["rows"]
    assert sorted(row["name"] for row in rows) == sorted(NAMES) == sorted(item["name"] for item in data)
    instance = Instance.from_dict(
        {"num_devices": 3, "num_microbatches": 6, "weight_times": 1, "backward_times": 1, "memory_limit": "1x"}
    )
    for item in data:
        if item["note"].startswith("n/a"):
            assert item["value"] is None
            continue
        metrics = compute_metrics(run_heuristic(item["name"], instance))
        assert item["value"] == metrics.makespan and item["peak_memory"] == metrics.max_peak_memory
        assert item["fits"] == (not instance.over_limit(metrics.peak_memory))
    by_name = {row["name"]: row for row in rows}
    assert by_name["gpipe"]["fits"] == "false" and by_name["1f1b"]["fits"] == "true"


def test_compare_saves_every_schedule_that_fits(tmp_path: Path) -> None:
    args = ["compare", "-s", 3, "-b", 6, "-w", 1, "-bw", 1, "--memory-limit", "1x", "--no-solve"]
    data = json.loads(cli_ok(run_cli(*args, "--format", "json", "--save-dir", tmp_path)))["rows"]
    fitting = sorted(item["name"] for item in data if item["fits"])
    assert fitting and sorted(path.stem for path in tmp_path.iterdir()) == fitting
    for name in fitting:
        assert_saved_valid(tmp_path / f"{name}.json")
    output = cli_ok(run_cli(*args, "--save-dir", tmp_path / "again"))
    over = sum(1 for item in data if item["fits"] is False)
    assert (
        _field(output, "schedules")
        == f"{len(fitting)} files in {tmp_path / 'again'} ({over} over the memory limit not saved)"
    )


def test_compare_markdown() -> None:
    lines = cli_ok(run_cli("compare", "-s", 2, "-b", 2, "--no-solve", "--format", "markdown")).splitlines()
    assert lines[0].startswith("| schedule | makespan |") and set(lines[1]) <= set("|-:")
    assert len(lines) == 2 + len(NAMES) and all(line.startswith("|") for line in lines)


def test_compare_bad_format() -> None:
    result = run_cli("compare", "-s", 2, "-b", 2, "--no-solve", "--format", "xml")
    assert result.exit_code == EXIT_BAD_INPUT and "'xml' is not one of" in result.stderr


# --- the solver: solve, compare, pareto (tiny instances, short limits, one worker) ------------------


def test_solve_summary_save_and_picture(tmp_path: Path) -> None:
    saved, picture = tmp_path / "opt.json", tmp_path / "opt.png"
    output = cli_ok(run_cli("solve", *TINY, "-w", 0.5, "-bw", 1, "--save", saved, "-o", picture))
    assert _field(output, "status") == "optimal (zb-h2 meets the lower bound)"
    value = float(_field(output, "makespan"))
    best = _field(output, "best heuristic")
    assert float(best.split("=")[1].split(",")[0]) >= value
    assert_saved_valid(saved)
    assert compute_metrics(load_schedule(saved)).makespan == pytest.approx(value, rel=1e-5)
    assert_picture(picture)


def test_solve_progress_line_only_when_asked() -> None:
    quiet = run_cli("solve", *TINY)
    assert quiet.exit_code == 0 and "\r" not in quiet.stderr
    for command in ("solve", "compare"):
        shown = run_cli(command, *TINY, "-w", 0.5, "-bw", 1, "--progress")
        assert shown.exit_code == 0 and "best" in shown.stderr and "\r" in shown.stderr
        assert "\r" not in shown.stdout


def test_solve_infeasible_limit_says_the_smallest() -> None:
    line = cli_error(run_cli("solve", *TINY, "--memory-limit", 0.5), EXIT_INVALID)
    assert "no schedule fits the memory limit 0.5" in line


def test_solve_minimize_memory_under_a_makespan_cap(tmp_path: Path) -> None:
    saved = tmp_path / "low.json"
    args = ["-s", 3, "-b", 4, "-w", 1, "-bw", 1, "--time-limit", 3, "--minimize", "memory"]
    one_f_one_b = compute_metrics(run_heuristic("1f1b", Instance.from_dict({"num_devices": 3, "num_microbatches": 4})))
    output = cli_ok(run_cli("solve", *args, "--makespan-cap", one_f_one_b.makespan, "--save", saved))
    assert output.startswith(f"CP-SAT (least peak memory with makespan <= {one_f_one_b.makespan:g})")
    metrics = compute_metrics(load_schedule(saved))
    assert _field(output, "peak memory") == format_number(metrics.max_peak_memory)
    assert metrics.max_peak_memory <= one_f_one_b.max_peak_memory and metrics.makespan <= one_f_one_b.makespan
    line = cli_error(run_cli("solve", *args, "--makespan-cap", 5), EXIT_INVALID)
    assert line.startswith("error: no schedule fits: no schedule has a makespan within 5; the lower bound is")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--time-limit", 0], "--time-limit"),
        (["--workers", 0], "--workers"),
        (["--minimize", "cost"], "--minimize"),
        (["--gap", -1], "--gap"),
        (["--objective", "speed"], "--objective"),
    ],
)
def test_solve_bad_options(args: list, message: str) -> None:
    result = run_cli("solve", "-s", 2, "-b", 2, *args)
    assert result.exit_code == EXIT_BAD_INPUT and message in result.stderr


def test_compare_with_the_solver() -> None:
    data = json.loads(cli_ok(run_cli("compare", *TINY, "-w", 0.5, "-bw", 1, "--format", "json")))["rows"]
    solver = data[0]
    assert solver["name"] == "cp-sat" and solver["value"] is not None
    for item in data[1:]:
        if item["value"] is not None:
            assert item["value"] >= solver["value"] - 1e-9
            assert item["gap"] is not None and item["gap"] >= 0


@pytest.mark.parametrize(
    ("limits", "message"),
    [
        ("abc", "--limits: memory_limit must be a number, got 'abc'"),
        ("2x:1x:0.5x", "memory limit range '2x:1x:0.5x' ends before it starts"),
        ("1:2", "memory limit range '1:2' must be start:stop:step"),
    ],
)
def test_pareto_bad_limits(limits: str, message: str) -> None:
    assert message in cli_error(run_cli("pareto", "-s", 2, "-b", 2, "--limits", limits), EXIT_BAD_INPUT)


def test_compare_under_an_impossible_limit_prints_the_table_then_fails() -> None:
    result = run_cli("compare", *TINY, "--memory-limit", 0.5)
    line = cli_error(result, EXIT_INVALID)
    assert line == "error: no schedule fits the memory limit 0.5; the smallest feasible limit is 1"
    assert "over the memory limit" in result.stdout and "infeasible" in result.stdout


def test_a_device_under_its_smallest_limit_is_named() -> None:
    line = cli_error(run_cli("solve", *TINY, "--memory-limit", "0.5,2", "--no-progress"), EXIT_INVALID)
    assert line == "error: no schedule fits device 0's memory limit of 0.5; it needs at least 1"


def test_pareto_says_the_gpus_budget_that_bounds_it_and_stops_at_its_total_time_budget(tmp_path: Path) -> None:
    """On a real model the frontier ran past what the GPU holds, for as long as it took."""
    gpu = {"hardware": {"gpu_memory": 8 * 2**30}}  # as from-model writes it: the limit is the budget
    path = tmp_path / "gpu.json"
    path.write_text(json.dumps({"num_devices": 3, "num_microbatches": 4, "memory_limit": 4, "metadata": gpu}))
    args = ("pareto", path, "--no-visualization", "--time-limit", 5, "--workers", 1)
    output = cli_ok(run_cli(*args))
    assert "limits up to 4: what the roomiest device holds beside its model state" in output
    memories = [float(line.split()[0]) for line in output.splitlines() if line.strip().endswith("%")]
    assert memories and max(memories) <= 4
    short = cli_ok(run_cli(*args, "--time-budget", 1e-6))
    assert "stopped short: the time budget ran out; the rows are what was done" in short
    document = json.loads(cli_ok(run_cli(*args, "--time-budget", 1e-6, "--format", "json")))
    assert document["points"] == [] and document["ceiling"] == 4 and document["ended"] == "the time budget ran out"


def test_pareto_table_and_plot(tmp_path: Path) -> None:
    picture = tmp_path / "front.png"
    output = cli_ok(run_cli("pareto", *TINY, "--limits", "0.5x,1x", "-o", picture))
    assert "memory limit" in output and "1.00x" in output
    assert_picture(picture)
    args = ["--limits", "0.5x,1x", "--format", "json", "--no-visualization", "--save-dir", tmp_path / "front"]
    rows = json.loads(cli_ok(run_cli("pareto", *TINY, *args)))["points"]
    assert [row["relative_limit"] for row in rows] == pytest.approx([0.5, 1.0])
    saved = sorted((tmp_path / "front").iterdir())
    names = [f"limit-{row['memory_limit']:g}.json" for row in rows if row["value"] is not None]
    assert [path.name for path in saved] == names
    for row in rows:
        if row["value"] is not None:
            path = tmp_path / "front" / f"limit-{row['memory_limit']:g}.json"
            assert_saved_valid(path)
            assert compute_metrics(load_schedule(path)).makespan == row["value"]


def test_deterministic_runs_save_the_same_schedule_apart_from_timing(tmp_path: Path) -> None:
    args = ["solve", "-s", "4", "-b", "12", "-f", "5", "-bw", "6", "-w", "4", "--p2p-time", "1"]
    args += ["--memory-limit", "1.3x", "--time-limit", "0.5", "--workers", "2", "--deterministic", "--seed", "3"]
    saved = []
    for run in ("a", "b"):
        path = tmp_path / f"{run}.json"
        output = cli_ok(run_cli(*args, "--save", path, "--no-progress"))
        assert output.startswith("CP-SAT") and ", 1 worker(s)" in output.splitlines()[0]  # one, deterministic
        data = json.loads(path.read_text())
        assert set(data["source"].pop("timing")) == {"solve_time", "time_to_best"}
        saved.append(data)
    assert saved[0] == saved[1]


# --- units, JSON documents and standard output ------------------------------------------------------


UNITS_INSTANCE = {
    "num_devices": 4,
    "num_microbatches": 8,
    "forward_times": 10,
    "backward_times": 10,
    "weight_times": 8,
    "p2p_time": 0.1,
    "activation_memory": 3072,
    "weight_memory": 1024,
    "time_unit": "ms",
    "memory_unit": "MiB",
}


@pytest.fixture
def units_file(tmp_path: Path) -> Path:
    path = tmp_path / "units.json"
    path.write_text(json.dumps(UNITS_INSTANCE))
    return path


def test_times_and_memory_are_printed_in_the_instances_units(units_file: Path) -> None:
    output = cli_ok(run_cli("schedule", "zb-h1", units_file, "--memory-limit", "20GiB", "--no-visualization"))
    assert "memory limit 20 GiB (1.67x)" in output.splitlines()[0]
    assert _field(output, "makespan").endswith(" ms")
    assert _field(output, "peak memory") == "12 GiB (per device: 12, 10, 8, 6 GiB; limit 20 GiB)"


def test_compare_headers_name_the_units_and_each_device_keeps_its_limit(units_file: Path) -> None:
    output = cli_ok(run_cli("compare", units_file, "--memory-limit", "10GiB,10GiB,12GiB,12GiB", "--no-solve"))
    assert "memory limits 10, 10, 12, 12 GiB" in output.splitlines()[0]
    header = next(line for line in output.splitlines() if line.startswith("schedule"))
    assert "makespan (ms)" in header and "peak memory (GiB)" in header and "fits limits" in header
    rows = {line.split("  ")[0]: line for line in output.splitlines()}
    assert "over the memory limit" in rows["ZB-H1"] and "over the memory limit" not in rows["ZB-auto"]


def test_compare_without_the_solver_under_an_impossible_limit_says_the_smallest(units_file: Path) -> None:
    """`--memory-limit 20` on an instance in MiB is 20 MiB: every row was "no" with exit 0; the least
    feasible limit is known without a solve."""
    result = run_cli("compare", units_file, "--memory-limit", 20, "--no-solve")
    instance = Instance.from_dict(json.loads(units_file.read_text()))
    least = minimum_memory_limit(instance)
    units = units_of(instance)
    limit, smallest = (units.with_memory(format_number(units.memory_value(mib))) for mib in (20, least))
    line = cli_error(result, EXIT_INVALID)
    assert line == f"error: no schedule fits the memory limit {limit}; the smallest feasible limit is {smallest}"
    assert "over the memory limit" in result.stdout
    cli_ok(run_cli("compare", units_file, "--memory-limit", f"{least}", "--no-solve"))


def test_schedule_and_solve_json_documents_keep_the_words_on_stderr(units_file: Path) -> None:
    result = run_cli("schedule", "zb-h1", units_file, "--format", "json", "--no-visualization")
    document = json.loads(cli_ok(result))
    assert document["units"] == {"time": "ms", "memory": "MiB"} and document["schedule"] == "zb-h1"
    assert "ZB-H1 on units" in result.stderr
    solved = json.loads(cli_ok(run_cli("solve", *TINY, "-w", 0.5, "-bw", 1, "--format", "json", "--no-progress")))
    assert solved["status"] == "optimal" and solved["value"] == solved["makespan"]


def test_save_dash_writes_the_schedule_file_to_stdout(tmp_path: Path) -> None:
    result = run_cli("schedule", "1f1b", "-s", 3, "-b", 4, "--save", "-", "--no-visualization")
    path = tmp_path / "piped.json"
    path.write_text(cli_ok(result))
    assert_saved_valid(path)
    assert "1F1B on" in result.stderr
    both = run_cli("schedule", "1f1b", "-s", 3, "-b", 4, "--save", "-", "--format", "json")
    assert "--format json and --save - both write to standard output" in cli_error(both)


@pytest.mark.parametrize(("alias", "title"), [("ZB-1p", "ZB-1p (ZB-auto at 1x)"), ("Schedule1F1B", "1F1B")])
def test_the_papers_and_torchs_names_run_their_schedules(alias: str, title: str) -> None:
    output = cli_ok(run_cli("schedule", alias, "-s", 3, "-b", 6, "-w", 1, "-bw", 1, "--no-visualization"))
    assert output.startswith(f"{title} on ")


# --- --window: a picture of part of a large schedule ----------------------------------------------


def test_window_draws_part_of_the_schedule(tmp_path: Path) -> None:
    zoomed, saved, rendered, solved = (tmp_path / name for name in ("zoom.png", "s.json", "r.png", "solved.png"))
    output = cli_ok(run_cli("schedule", "1f1b", "-s", 16, "-b", 64, "-o", zoomed, "--window", "40:90"))
    assert _field(output, "picture") == str(zoomed)
    assert_picture(zoomed)
    cli_ok(run_cli("schedule", "1f1b", "-s", 4, "-b", 8, "--save", saved, "--no-visualization"))
    cli_ok(run_cli("render", saved, "-o", rendered, "--window", "10:"))
    assert_picture(rendered)
    cli_ok(run_cli("solve", *TINY, "-o", solved, "--window", ":4", "--no-progress"))
    assert_picture(solved)


def test_a_long_schedule_draws_a_readable_first_part_unless_told_all(tmp_path: Path) -> None:
    """p16 m64 interleaved v2 with W apart (fused by the schedule: 4,096 ops) drew slivers: the picture says what it shows and how to see all."""
    picture = tmp_path / "long.png"
    args = ("schedule", "interleaved", "-s", 16, "-b", 64, "--chunks", 2, "-bw", 2, "-w", 1, "-o", picture, "--force")
    shown = _field(cli_ok(run_cli(*args)), "picture")
    long = Instance.from_dict(
        {"num_devices": 16, "num_microbatches": 64, "chunks": 2, "backward_times": 2, "weight_times": 1}
    )
    makespan = compute_metrics(run_heuristic("interleaved", long)).makespan
    assert shown.startswith(f"{picture} (the first ") and shown.endswith(
        f" of {format_number(makespan)}; --window all draws all)"
    )
    assert_picture(picture)
    assert _field(cli_ok(run_cli(*args, "--window", "all")), "picture") == str(picture)
    assert _field(cli_ok(run_cli("schedule", "1f1b", "-s", 4, "-b", 8, "-o", picture, "--force")), "picture") == str(
        picture
    )


@pytest.mark.parametrize(
    ("window", "message"),
    [
        ("5:2", "5:2 ends before it starts; give START:END with START < END"),
        ("4:4", "4:4 ends before it starts"),
        ("abc", "'abc' is not START:END"),
        ("3", "'3' is not START:END"),
        ("1:inf", "'1:inf' is not START:END"),
        ("-1:5", "-1:5 starts before the schedule does"),
        ("40:50", "the window 40:50 starts after the schedule ends (at 33)"),
    ],
)
def test_a_bad_window_is_one_line(tmp_path: Path, window: str, message: str) -> None:
    picture = tmp_path / "x.png"
    line = cli_error(run_cli("schedule", "1f1b", "-s", 4, "-b", 8, "-o", picture, f"--window={window}"))
    assert message in line
    assert not picture.exists()


def test_a_window_without_a_picture_is_refused_before_any_work() -> None:
    for args in (["schedule", "1f1b", "-s", 2, "-b", 2, "--no-visualization"], ["solve", *TINY]):
        line = cli_error(run_cli(*args, "--window", "0:5"))
        assert line == "error: --window zooms the picture, but no picture is drawn (see -o)"


def test_an_interrupted_solve_keeps_its_best_and_exits_interrupted(tmp_path: Path) -> None:
    saved = tmp_path / "s.json"
    instance = INSTANCES_DIR / "zb-paper" / "1.5b-p8-m64.yaml"
    command = [sys.executable, "-m", "pipesat.cli", "solve", str(instance), "--memory-limit", "0.5x"]
    command += ["--time-limit", "60", "--workers", "1", "--save", str(saved), "--no-progress"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert process.stdout is not None
    process.stdout.readline()  # the solve has begun
    time.sleep(2)
    process.send_signal(signal.SIGINT)
    out, _ = process.communicate(timeout=30)
    assert process.returncode == EXIT_INTERRUPTED
    assert _field(out, "status").startswith("interrupted")
    assert validate(load_schedule(saved)) == []


def test_compare_at_several_placements_names_each_rows_placement_and_saves_each(tmp_path: Path) -> None:
    args = ["compare", "-s", 2, "-b", 4, "-w", 1, "-bw", 1, "--no-solve", "--placements", "linear,vshape"]
    text = cli_ok(run_cli(*args))
    assert "the same model at each placement: linear, vshape" in text and "slower than best" in text
    rows = json.loads(cli_ok(run_cli(*args, "--format", "json", "--save-dir", tmp_path)))["rows"]
    made = {(row["name"], row["placement"]) for row in rows if row["value"] is not None}
    assert {("zb-h1", "linear"), ("zb-v", "vshape"), ("dualpipe-v", "vshape")} <= made
    assert sorted(path.stem for path in tmp_path.iterdir()) == sorted(f"{name}-{placement}" for name, placement in made)
