"""`pipesat plan` through the command line: the table in every format, the picture, the best schedule
(valid, accepted by `check`), overrides, one-line errors, exit codes, and Ctrl-C or SIGTERM mid-plan."""

from __future__ import annotations

import csv
import importlib.util
import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from pipesat.commands.frame import EXIT_INTERRUPTED, EXIT_INVALID
from pipesat.solver.evaluate.validator import validate
from pipesat.solver.io.schedule_file import load_schedule
from tests.cli_helpers import cli_error, cli_ok, run_cli, write_yaml
from tests.conftest import ROOT
from tests.solver.plan.conftest import TINY

FAST = ("--time-budget", 20, "--jobs", 2, "--workers", 1, "--seed", 0)


@pytest.fixture
def spec_file(tmp_path: Path) -> Path:
    return write_yaml(tmp_path / "tiny.yaml", TINY)


def test_the_table_picture_and_best_schedule(spec_file: Path, tmp_path: Path) -> None:
    picture, best = tmp_path / "plan.png", tmp_path / "best.json"
    out = cli_ok(run_cli("plan", spec_file, *FAST, "-o", picture, "--save-best", best))
    lines = out.splitlines()
    header = ["rank", "tie", "t", "cp", "p", "d", "placement", "v", "b", "m", "recompute", "zero"]
    assert lines[0].split()[:12] == header
    assert lines[2].split()[:12] == ["1", "-", "1", "1", "4", "1", "vshape", "2", "1", "4", "none", "0"]
    assert "configurations: 16 (solved " in out and "pruned by bound" in out
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
    assert "configurations: 16" in result.stderr
    document = json.loads(cli_ok(run_cli("plan", spec_file, *FAST, "--format", "json")))
    assert document["format"] == "pipesat-plan/1"
    assert document["counts"]["configurations"] == 16 and document["counts"]["pruned"] > 0
    assert document["best"]["placement"] == "vshape"
    assert document["configurations"][0] == document["best"]
    markdown = cli_ok(run_cli("plan", spec_file, *FAST, "--format", "markdown"))
    assert markdown.startswith("| rank | tie | t | cp | p | d | placement | v | b | m | recompute | zero |")


def test_the_breakdown_view_and_the_best_explained(spec_file: Path) -> None:
    out = cli_ok(run_cli("plan", spec_file, *FAST, "--breakdown", "--explain", "--top", 3))
    header = out.splitlines()[0]
    assert header.endswith(
        "iteration (ms)  compute  recompute  TP comm  EP comm  DP comm  PP comm  host link  bubble  optimizer"
    )
    assert "where the time goes: compute " in out
    assert "how the best, t1 p4 d1 vshape b1 m4, was derived:" in out
    assert "model state per GPU: parameters x 18 bytes" in out and "where the time goes (device " in out


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
        (
            ("--executor", "local", "--ray-address", "h:1"),
            "--ray-address goes with the ray executor, not the local one",
        ),
        (("-o", "plan.txt"), "name the picture .png, .svg or .pdf"),
    ],
)
def test_bad_options_are_one_line(spec_file: Path, args: tuple, message: str) -> None:
    assert message in cli_error(run_cli("plan", spec_file, *FAST, *args))


def test_bad_specs_are_one_line(tmp_path: Path) -> None:
    path = write_yaml(tmp_path / "bad.yaml", {**TINY, "model": {**TINY["model"], "layer": 3}})
    assert "unknown key model.layer" in cli_error(run_cli("plan", path))
    assert "no such file" in cli_error(run_cli("plan", tmp_path / "none.yaml"))


def test_outputs_never_overwrite_the_spec_or_an_existing_file(spec_file: Path, tmp_path: Path) -> None:
    cli_error(run_cli("plan", spec_file, *FAST, "--save-best", spec_file))
    existing = tmp_path / "best.json"
    existing.write_text("{}")
    assert "--force" in cli_error(run_cli("plan", spec_file, *FAST, "--save-best", existing))


def test_nothing_that_fits_is_exit_1_after_the_ranking(spec_file: Path, tmp_path: Path) -> None:
    best = tmp_path / "best.json"
    result = run_cli("plan", spec_file, *FAST, "--gpu-memory", "1MiB", "--save-best", best)
    line = cli_error(result, EXIT_INVALID)
    assert line.startswith("error: no configuration fits the GPUs' memory; give more GPUs or memory")
    assert "configurations: 16 (solved 0, pruned by bound 0, refused by memory 16)" in result.stdout
    assert not best.exists()


def test_the_plan_keeps_its_budget_and_marks_what_it_did_not_finish() -> None:
    # Llama 3 8B: its 710 bounds and assessments take far longer than 3 s on any machine.
    spec = ROOT / "instances/plan/llama3-8b-32gpu.yaml"
    result = run_cli("plan", spec, "--time-budget", 3, "--format", "json", "--top", 1000)
    document = json.loads(result.stdout)
    assert document["run"]["wall_seconds"] <= 3 and not document["run"]["interrupted"]
    # A configuration not assessed keeps its bound, so the best's gap, when bounds cover all, counts it.
    assert document["counts"]["unfinished"] > 0 and (document["best_gap"] is None or document["best_gap"] > 0)
    notes = {row["note"] for row in document["configurations"] if row["outcome"] == "not assessed"}
    assert notes == {"not assessed: the time budget ran out"}
    assert result.exit_code == (EXIT_INVALID if document["best"] is None else 0)


HAS_RAY = importlib.util.find_spec("ray") is not None


def _solving_plan(tmp_path: Path, executor: str = "local") -> subprocess.Popen[str]:
    """`pipesat plan` in a session of its own, once its solves run (its progress line, in
    tmp_path/stderr.txt, says so); its best schedule goes to tmp_path/best.json."""
    # Llama 3 8B without tensor parallelism, its replicas one a node at 25 GB/s: its solves run to their
    # shares (the 1.3B example's end at once, and so do the 8B's on its nodes of 8).
    spec = ROOT / "instances/plan/llama3-8b-32gpu.yaml"
    command = [sys.executable, "-m", "pipesat.cli", "plan", str(spec), "--tensor-parallel", "1"]
    command += ["--gpus-per-node", "1", "--bandwidth", "25"]
    command += ["--time-budget", "120", "--jobs", "2", "--workers", "1", "--executor", executor]
    command += ["--progress", "--save-best", str(tmp_path / "best.json")]
    errors = tmp_path / "stderr.txt"
    with errors.open("w") as stderr:
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=stderr, text=True, start_new_session=True)
    started = time.monotonic()
    while "solving" not in errors.read_text() and time.monotonic() - started < 60 and process.poll() is None:
        time.sleep(0.2)
    return process


def _left_in(group: int, seconds: float) -> list[str]:
    """The processes still in process group `group` after up to `seconds` (none: at once)."""
    until = time.monotonic() + seconds
    while True:
        left = subprocess.run(["ps", "-o", "pid=", "-g", str(group)], capture_output=True, text=True).stdout.split()
        if not left or time.monotonic() > until:
            return left
        time.sleep(0.2)


@pytest.mark.parametrize(
    ("executor", "stop", "group"),
    [
        ("local", signal.SIGINT, False),
        ("local", signal.SIGTERM, False),
        # SIGTERM to the whole process group, as a job scheduler sends it: the workers die with it.
        ("local", signal.SIGTERM, True),
        # SIGHUP to the process group, as a closing terminal sends it: as SIGTERM.
        ("local", signal.SIGHUP, True),
        pytest.param(
            "ray", signal.SIGTERM, False, marks=pytest.mark.skipif(not HAS_RAY, reason="Ray is not installed")
        ),
    ],
)
def test_a_signal_ends_the_plan_with_the_ranking_so_far(
    tmp_path: Path, executor: str, stop: signal.Signals, group: bool
) -> None:
    best, errors = tmp_path / "best.json", tmp_path / "stderr.txt"
    process = _solving_plan(tmp_path, executor)
    sent = time.monotonic()
    if group:
        os.killpg(process.pid, stop)
    else:
        process.send_signal(stop)
    try:
        out, _ = process.communicate(timeout=30)
    finally:
        process.kill()
    ended = time.monotonic() - sent
    assert process.returncode == EXIT_INTERRUPTED, errors.read_text()[-2000:]
    assert ended < 10
    assert out.splitlines()[0].split()[:6] == ["rank", "tie", "t", "cp", "p", "d"]
    assert "interrupted: the ranking of what the plan had" in out
    assert "Traceback" not in errors.read_text()
    assert validate(load_schedule(best)) == []
    assert _left_in(process.pid, 5) == []  # no worker outlives the plan


def test_a_plan_killed_leaves_no_worker_behind(tmp_path: Path) -> None:
    # SIGKILL, which nothing can answer: the pool workers and their CP-SAT children watch their parents.
    process = _solving_plan(tmp_path)
    assert len(_left_in(process.pid, 0)) > 1  # the plan and its pool workers
    process.kill()
    process.communicate(timeout=30)
    assert _left_in(process.pid, 30) == [], (tmp_path / "stderr.txt").read_text()[-2000:]


README_SPEC = ROOT / "instances/plan/gpt-1.3b-16gpu.yaml"


def test_predict_gives_one_configuration_as_it_runs_in_text_and_json(tmp_path: Path) -> None:
    saved = tmp_path / "predicted.json"
    out = cli_ok(run_cli("plan", README_SPEC, "--predict", "t2 p2 d4 b2 m8 zero1", "--save-best", saved))
    lines = out.splitlines()
    assert lines[0] == "predicted: t2 p2 d4 linear b2 m8 zero1, 1F1B as configured (no search)"
    assert lines[1].startswith("iteration: ") and " GiB per GPU (model state " in lines[1]
    assert lines[2].startswith("where the time goes: compute ")
    assert validate(load_schedule(saved)) == []
    result = run_cli("plan", README_SPEC, "--predict", "t2 p2 d4 b2 m8 zero1", "--format", "json")
    document = json.loads(cli_ok(result))
    assert document["format"] == "pipesat-predict/1" and document["configuration"] == "t2 p2 d4 linear b2 m8 zero1"
    assert (document["schedule"], document["fits"], document["refusal"]) == ("1f1b", True, "")
    assert f"iteration: {document['iteration_ms']:.1f} ms an iteration" in lines[1]
    gib = 2**30
    split = f"(model state {document['model_state'] / gib:.1f} + activations {document['activations'] / gib:.1f})"
    assert split in lines[1] and lines[1].endswith(f"of 36.0 GiB usable, {document['headroom'] / gib:.1f} free")
    assert document["model_state"] + document["activations"] == document["memory_per_gpu"]
    assert document["headroom"] == document["usable_memory"] - document["memory_per_gpu"]
    assert document["memory_fit"] == "fits"
    parts = [document[key] for key in ("compute_ms", "recompute_ms", "tensor_parallel_ms", "expert_parallel_ms")]
    parts += [document[key] for key in ("data_parallel_ms", "pipeline_ms", "bubble_ms", "optimizer_ms")]
    assert sum(parts) == pytest.approx(document["iteration_ms"])


def test_predict_takes_tensor_parallelism_over_nodes_and_a_named_schedule() -> None:
    out = cli_ok(run_cli("plan", README_SPEC, "--predict", "t16 p1 d1 b1 m64"))
    assert "left out of the plan's search: t16: tensor parallelism stays within a node of 8 GPUs" in out
    out = cli_ok(run_cli("plan", README_SPEC, "--predict", "t4 p2 d2 interleaved v2 b1 m32 zero1 gpipe"))
    assert out.splitlines()[0] == "predicted: t4 p2 d2 interleaved v2 b1 m32 zero1, GPipe as configured (no search)"


def test_schedules_restricts_the_plan(spec_file: Path) -> None:
    document = json.loads(cli_ok(run_cli("plan", spec_file, *FAST, "--schedules", "1f1b", "--format", "json")))
    assert {row["placement"] for row in document["configurations"]} == {"linear"}
    assert all(row["schedule"] in (None, "1F1B", "1F1B with W split out") for row in document["configurations"])


def test_runtime_megatron_ranks_its_orders_and_launch_writes_its_flags(spec_file: Path, tmp_path: Path) -> None:
    launch = tmp_path / "run.sh"
    document = json.loads(
        cli_ok(run_cli("plan", spec_file, *FAST, "--runtime", "megatron", "--format", "json", "--launch", launch))
    )
    ranked = [row for row in document["configurations"] if row["schedule"] is not None]
    assert ranked and {row["schedule"] for row in ranked} <= {"1F1B", "Interleaved 1F1B"}
    runtimes = document["runtimes"]
    assert runtimes["held_to"] == "megatron" and "megatron" in runtimes["best_runs_on"]
    assert runtimes["best"]["megatron"]["iteration_ms"] == document["best"]["iteration_ms"]
    script = launch.read_text()
    assert f"--micro-batch-size {document['best']['microbatch_size']}\n" in script
    assert (tmp_path / "run-bridge.txt").is_file()
    again = run_cli("plan", spec_file, *FAST, "--runtime", "megatron", "--launch", launch)
    assert cli_error(again, 2) == f"error: {launch} already exists; add --force to replace it, or write to another file"
    assert launch.read_text() == script


def test_the_plan_says_each_runtimes_best(spec_file: Path) -> None:
    out = cli_ok(run_cli("plan", spec_file, *FAST))
    assert "\nruns on: " in out and "\nfastest of each runtime (of the configurations assessed):\n  megatron " in out


def test_the_readme_shows_predict_as_it_prints() -> None:
    text = (ROOT / "README.md").read_text()
    command = '$ pipesat plan instances/plan/gpt-1.3b-16gpu.yaml --predict "t1 p2 d8 interleaved v13 b2 m4 zero1"\n'
    shown = text[text.index(command) + len(command) :].split("```")[0]
    assert cli_ok(run_cli("plan", README_SPEC, "--predict", "t1 p2 d8 interleaved v13 b2 m4 zero1")) == shown


def test_the_readme_shows_the_launch_files_as_they_are_written(tmp_path: Path) -> None:
    """The README's Megatron and torchtitan excerpts are lines of the files `--launch` writes."""
    text = (ROOT / "README.md").read_text()
    for configuration, runtime, name, command in (
        (
            "t1 p2 d8 interleaved v4 b2 m4 zero1",
            "megatron",
            "megatron.sh",
            "$ grep -A4 'MEGATRON_ARGS=(' megatron.sh\n",
        ),
        (
            "t1 p2 d8 vshape v2 b2 m4 zero3 zb-v",
            "torchtitan",
            "torchtitan.py",
            "$ grep pipeline_parallel torchtitan.py\n",
        ),
    ):
        launch = tmp_path / name
        cli_ok(run_cli("plan", README_SPEC, "--predict", configuration, "--runtime", runtime, "--launch", launch))
        shown = text[text.index(command) + len(command) :].split("$ ")[0].split("```")[0].splitlines()
        written = launch.read_text().splitlines()
        assert shown and all(line in written for line in shown), (name, shown)


def test_a_gpu_memory_in_gb_beside_a_catalogue_gpu_says_which_is_used(tmp_path: Path) -> None:
    """`gpu_memory: 80GB` silently differed from the catalogue's 80 GiB: the plan and from-model say it."""
    spec = yaml.safe_load(README_SPEC.read_text())
    spec["cluster"] |= {"gpu": "H100-SXM", "gpu_memory": "80GB"}
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    result = run_cli("plan", path, "--predict", "t1 p2 d8 b2 m4")
    cli_ok(result)
    note = (
        "note: cluster.gpu_memory 74.5058 GiB (80 GB: 10^9 bytes a GB, 2^30 a GiB) is used, not the H100-SXM's 80 GiB"
    )
    assert note in result.stderr
    model = ["--layers", "4", "--hidden", "512", "--heads", "8", "--seq-len", "256", "-p", "2", "-m", "4"]
    model += ["--gpu", "H100-SXM"]
    made = run_cli("instance", "from-model", *model, "--gpu-memory", "80GB")
    assert "note: --gpu-memory 74.5058 GiB" in cli_ok(made) + made.stderr
    assert "note:" not in run_cli("instance", "from-model", *model, "--gpu-memory", "80GiB").stderr


CURRENT_RUN = "t1 p2 d2 b1 m2 1f1b"


def test_current_shows_the_run_its_rank_and_the_best_against_it_in_text_and_json(spec_file: Path) -> None:
    out = cli_ok(run_cli("plan", spec_file, *FAST, "--current", CURRENT_RUN))
    lines = out.splitlines()
    at = next(number for number, line in enumerate(lines) if line.startswith("current: "))
    assert lines[at].startswith("current: t1 p2 d2 linear b1 m2, 1F1B as configured: ")
    assert lines[at + 1].startswith("current would rank ")
    assert lines[at + 2].startswith("the best, t1 p4 d1 vshape b1 m4, against it: ")
    document = json.loads(
        cli_ok(run_cli("plan", spec_file, *FAST, "--format", "json", "--top", 100, "--current", CURRENT_RUN))
    )
    current = document["current"]
    assert current["configuration"] == "t1 p2 d2 linear b1 m2" and current["schedule"] == "1f1b"
    assert current["best"] == "t1 p4 d1 vshape b1 m4" and document["best"]["placement"] == "vshape"
    gain = current["best_gain"]
    assert gain["iteration_ms"] == pytest.approx(document["best"]["iteration_ms"] - current["iteration_ms"])
    faster = [row for row in document["configurations"] if "iteration_ms" in row]
    assert current["rank"] == 1 + sum(row["iteration_ms"] < current["iteration_ms"] for row in faster)


def test_current_in_the_spec_and_its_option_overriding_it(tmp_path: Path) -> None:
    spec = write_yaml(tmp_path / "current.yaml", {**TINY, "training": {**TINY["training"], "current": CURRENT_RUN}})
    document = json.loads(cli_ok(run_cli("plan", spec, *FAST, "--format", "json")))
    assert document["current"]["configuration"] == "t1 p2 d2 linear b1 m2"
    document = json.loads(cli_ok(run_cli("plan", spec, *FAST, "--format", "json", "--current", "t1 p4 d1 b1 m4")))
    assert document["current"]["configuration"] == "t1 p4 d1 linear b1 m4"


@pytest.mark.parametrize(
    ("current", "message"),
    [
        (
            "t1 p2 d4 b1 m1",
            "error: --current 't1 p2 d4 b1 m1': t1 p2 d4 linear b1 m1: t·cp·p·d = 8 GPUs, the cluster has 4",
        ),
        ("t1 p2 d2 b1 m4", "b·m·d = 8 sequences an iteration, the global batch is 4 (--global-batch)"),
        ("t1 p2 d2 m2", "gives no b;"),
    ],
)
def test_a_current_run_that_does_not_fit_is_refused_before_any_search(
    spec_file: Path, current: str, message: str
) -> None:
    result = run_cli("plan", spec_file, *FAST, "--current", current)
    assert message in cli_error(result) and result.stdout == ""
