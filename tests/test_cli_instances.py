"""`pipesat instance from-model` through the command line: the files it writes, its words, its errors,
and the bundled instances it made."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
import yaml

from pipesat.commands.frame import EXIT_BAD_INPUT, EXIT_INVALID
from pipesat.models import Instance, load_instance
from pipesat.solver.evaluate.validator import validate
from pipesat.solver.heuristics import run_heuristic
from pipesat.solver.io.schedule_file import load_schedule
from tests.cli_helpers import cli_error, cli_ok, run_cli
from tests.conftest import INSTANCES_DIR
from tests.strategies import assert_valid

LLAMA_8B_TP2 = shlex.split(
    "instance from-model --layers 32 --hidden 4096 --heads 32 --kv-heads 8 --ffn-hidden 14336 --seq-len 4096 "
    "--vocab 128256 -p 4 -m 16 --tensor-parallel 2 --tflops 989 --efficiency 0.45 --gpu-memory 80GiB"
)


def test_llama_on_h100s_gets_a_budget_per_device_and_compares_in_ms_and_gib(tmp_path: Path) -> None:
    path = tmp_path / "llama.yaml"
    output = cli_ok(run_cli(*LLAMA_8B_TP2, "--save-instance", path))
    assert output.startswith(f"wrote {path}: 4 devices, 16 microbatches")
    instance = load_instance(path)
    assert instance.memory_unit == "MiB" and instance.time_unit == "ms"
    first, middle, _, last = instance.memory_limit
    assert first < middle and last < middle and middle == instance.memory_limit[2]
    assert yaml.safe_load(path.read_text())["memory_limit"] == list(instance.memory_limit)
    compared = cli_ok(run_cli("compare", path, "--memory-limit", "20GiB", "--time-limit", "5", "--workers", "1"))
    header = next(line for line in compared.splitlines() if line.startswith("schedule"))
    assert "makespan (ms)" in header and "peak memory (GiB)" in header and "fits 20 GiB" in header


def test_the_file_starts_with_the_command_that_makes_it_again(tmp_path: Path) -> None:
    path = tmp_path / "llama.yaml"
    cli_ok(run_cli(*LLAMA_8B_TP2, "--balance", "--recompute", "selective", "--save-instance", path, "--name", "llama"))
    command = path.read_text().splitlines()[0].removeprefix("# pipesat ")
    again = cli_ok(run_cli(*shlex.split(command), "--name", "llama"))
    assert Instance.from_dict(yaml.safe_load(again)) == load_instance(path)


def test_explain_goes_to_stderr_when_stdout_holds_the_instance() -> None:
    result = run_cli(*LLAMA_8B_TP2, "--explain")
    instance = Instance.from_dict(yaml.safe_load(cli_ok(result)))
    assert instance.num_devices == 4
    assert result.stderr.startswith("model: 32 layers, hidden h=4096, heads a=32, 8 key/value heads")
    assert "activation budget = GPU memory 80 GiB - reserve 8 GiB - model state" in result.stderr


def test_a_mixture_of_experts_writes_its_all_to_all_and_the_command_that_makes_it_again(tmp_path: Path) -> None:
    path = tmp_path / "moe.yaml"
    moe = "--experts 16 --top-k 2 --shared-experts 1 --expert-ffn-hidden 512 --dense-layers 1"
    training = "--expert-parallel 8 --data-parallel 8 --zero 1"
    pipeline = "-p 2 -m 8 --chunks 2 --placement vshape --balance --gpu H100-SXM"
    model = "instance from-model --layers 8 --hidden 1024 --heads 8 --ffn-hidden 2816 --seq-len 2048"
    cli_ok(run_cli(*shlex.split(f"{model} {moe} {training} {pipeline}"), "--save-instance", path, "--name", "moe"))
    instance = load_instance(path)
    assert instance.forward_comm_times is not None and instance.backward_comm_times is not None
    # Two layers a stage; of stage 0's, layer 0 is dense: half the all-to-all of the others.
    assert 2 * instance.forward_comm_times[0] == pytest.approx(instance.forward_comm_times[1], rel=1e-5)
    schedule = run_heuristic("dualpipe-v", instance)
    assert validate(schedule) == [] and schedule.has_pairs
    command = path.read_text().splitlines()[0].removeprefix("# pipesat ")
    assert moe in command and "--expert-parallel 8" in command
    again = cli_ok(run_cli(*shlex.split(command), "--name", "moe"))
    assert Instance.from_dict(yaml.safe_load(again)) == load_instance(path)


def test_balance_prints_the_split_it_chose(tmp_path: Path) -> None:
    args = [a for a in LLAMA_8B_TP2 if a not in ("--tensor-parallel", "2")]
    args[args.index("-p") + 1], args[args.index("-m") + 1] = "8", "32"
    output = cli_ok(run_cli(*args, "--balance", "--save-instance", tmp_path / "b.yaml"))
    assert "layers per stage: 4 4 4 4 4 5 5 2 (balanced: the slowest stage's F+B+W is" in output


def test_an_existing_file_is_replaced_only_with_force(tmp_path: Path) -> None:
    path = tmp_path / "llama.json"
    path.write_text("{}")
    line = cli_error(run_cli(*LLAMA_8B_TP2, "--save-instance", path))
    assert line == f"error: {path} already exists; add --force to replace it, or write to another file"
    assert path.read_text() == "{}"
    cli_ok(run_cli(*LLAMA_8B_TP2, "--save-instance", path, "--force"))
    assert load_instance(path).num_devices == 4


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        (["--layers=30"], "30 layers do not split evenly over 4 x 1 = 4 stages; set --balance"),
        (["--gpu-memory", "80"], "--gpu-memory must be a positive amount with a unit, such as 80GiB, got '80'"),
        (["--gpu-memory", "80 gigs"], "'gigs' is not a memory unit"),
        (
            ["--gpu-memory", "16GiB"],
            "device 0 holds 19.0294 GiB of weights, gradients and optimizer state plus a 1.6 GiB reserve",
        ),
        (
            ["--reserve", "150%"],
            "--reserve must be a percentage of the GPU below 100 (10%) or an amount (6GiB), got '150%'",
        ),
        (
            ["--reserve", "lots"],
            "--reserve must be a percentage of the GPU below 100 (10%) or an amount (6GiB), got 'lots'",
        ),
        (["--heads", "0"], "--heads must be at least 1, got 0"),
        (["--efficiency", "1.5"], "--efficiency must be in (0, 1] (the fraction of peak throughput reached), got 1.5"),
        (["--kv-heads", "5"], "heads 32 is not divisible by kv_heads 5"),
        (["--tensor-parallel", "3"], "tensor parallelism 3 does not divide heads 32"),
        (
            ["--balance", "--layers-per-stage", "8,8,8,8"],
            "give --balance or --layers-per-stage, not both",
        ),
        (["--layers-per-stage", "3,x"], "--layers-per-stage must be whole numbers separated by commas, such as 1,2"),
        (["--placement", "zigzag"], "unknown placement 'zigzag'"),
        (["--recompute", "some"], "Invalid value for '--recompute'"),
    ],
)
def test_bad_descriptions_exit_2_with_one_line(changes: list[str], message: str) -> None:
    assert message in cli_error(run_cli(*LLAMA_8B_TP2, *changes), EXIT_BAD_INPUT)


@pytest.mark.parametrize("flag", ["--layers", "--hidden", "--heads", "--seq-len", "-p", "-m"])
def test_a_required_size_left_out_is_one_line_naming_its_flag(flag: str) -> None:
    # click 8.3 and later take an explicit `default=None` as given: the option must carry no default.
    args = list(LLAMA_8B_TP2)
    at = args.index(flag)
    del args[at : at + 2]
    assert f"Missing option '{flag}" in cli_error(run_cli(*args), EXIT_BAD_INPUT)


@pytest.mark.parametrize("path", sorted((INSTANCES_DIR / "modern").glob("*.yaml")), ids=lambda path: path.name)
def test_modern_instances_are_what_their_command_makes(path: Path) -> None:
    # Each file carries the from-model command that made it; running it again must give the same instance.
    command = next(line for line in path.read_text().splitlines() if line.startswith("# pipesat instance from-model"))
    stored = load_instance(path)
    again = cli_ok(run_cli(*shlex.split(command.removeprefix("# pipesat ")), "--name", stored.name))
    assert Instance.from_dict(yaml.safe_load(again)) == stored
    heuristic = {"linear": "1f1b", "interleaved": "interleaved", "vshape": "zb-v"}[stored.placement_name()]
    assert validate(run_heuristic(heuristic, stored)) == []


def test_a_gpus_host_link_lets_solve_offload_the_instance_it_makes(tmp_path: Path) -> None:
    # p = 2, four chunks a device: 0.25x is half a microbatch's activations on a device, met only by offload.
    path, saved = tmp_path / "tiny.yaml", tmp_path / "s.json"
    made = "instance from-model --layers 8 --hidden 256 --heads 8 --seq-len 256 -p 2 -m 2 --chunks 4 --gpu H100-SXM"
    cli_ok(run_cli(*made.split(), "--host-link", "--save-instance", path))
    assert load_instance(path).host_link_bandwidth == pytest.approx(64e9 / 2**20 / 1e3)
    solve = ("solve", path, "--memory-limit", "0.25x", "--time-limit", "2", "--workers", "1", "--seed", "0")
    assert "no schedule fits the memory limit" in cli_error(run_cli(*solve), EXIT_INVALID)
    cli_ok(run_cli(*solve, "--offload", "--save", saved))
    assert assert_valid(load_schedule(saved)).transfers
