"""Calibration from measurement on the CPU: one layer's tensor-parallel share and its recomputation,
measured for the shapes a plan needs, refused in one line where the device cannot measure it, the
all-reduce's bus bandwidth (gloo), and `pipesat calibrate` -> `plan` / `from-model --calibration`."""

from __future__ import annotations

import dataclasses
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from pipesat.cli_options import EXIT_BAD_INPUT
from pipesat.models import InstanceError, load_instance
from pipesat.solver.instances.calibration import DTYPE_BYTES, MeasuredLayer, layer_shape, load_calibration
from pipesat.solver.instances.cost_model import head_cost, stage_times
from pipesat.solver.instances.description import Hardware, Training, Transformer
from pipesat.solver.torch import profile as profile_module
from pipesat.solver.torch.bus_bandwidth import bus_bandwidth, measure_all_reduce
from pipesat.solver.torch.profile import DTYPES, INSTALL_HINT, ProfileSpec, _StageRunner, calibrate
from tests.cli_helpers import cli_error, cli_ok, run_cli

torch = pytest.importorskip("torch")
from tests.solver.torch.flop_count import CountedFlops  # noqa: E402

# One block of hidden 32 with 4 heads (2 key/value) and a SwiGLU MLP of 48: t = 2 keeps 2 heads, 1 key/value head, 24.
BLOCK = ProfileSpec(devices=1, microbatches=1, layers=1, hidden=32, heads=4, kv_heads=2, ffn_hidden=48, seq_len=8)
MODEL = Transformer(layers=2, hidden=32, heads=4, seq_len=8, vocab=64, kv_heads=2, ffn_hidden=48)
SPEC = {
    "model": {"layers": 2, "hidden": 32, "heads": 4, "seq_len": 8, "vocab": 64, "kv_heads": 2, "ffn_hidden": 48},
    "cluster": {"gpus": 2, "gpu_memory": "1GiB", "tflops": 1, "efficiency": 0.5},
    "training": {
        "global_batch": 2,
        "tensor_parallel": [1, 2],
        "microbatch_sizes": [1],
        "placements": ["linear"],
        "recompute": ["none", "full"],
    },
}


@pytest.fixture(scope="module", autouse=True)
def one_thread() -> Iterator[None]:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_a_calibration_file_names_the_dtypes_a_profile_runs_in() -> None:
    assert set(DTYPES) == set(DTYPE_BYTES)


def runner(spec: ProfileSpec) -> _StageRunner:
    return _StageRunner(torch, spec, torch.device("cpu"), layers=1, first=False, last=False)


def test_a_tensor_parallel_block_is_one_gpus_share() -> None:
    shard = runner(dataclasses.replace(BLOCK, tensor_parallel=2))
    shapes = {name: tuple(param.shape) for name, param in shard.stage.named_parameters() if name.endswith("weight")}
    # q: 2 heads of 8; k and v: 1 head of 8 each; the output projection takes the 16 back to h = 32.
    assert shapes == {
        "blocks.0.attention.qkv.weight": (16 + 2 * 8, 32),
        "blocks.0.attention.proj.weight": (32, 16),
        "blocks.0.mlp.gate.weight": (24, 32),
        "blocks.0.mlp.up.weight": (24, 32),
        "blocks.0.mlp.down.weight": (32, 24),
    }
    output = shard.stage(torch.randn(shard.shape), None)
    assert output.shape == (1, 8, 32)


@pytest.mark.parametrize("recompute", ["selective", "full"])
def test_recomputation_gives_the_same_gradients_and_runs_the_forward_again(recompute: str) -> None:
    plain, again = runner(BLOCK), runner(dataclasses.replace(BLOCK, recompute=recompute))
    stage_input = torch.randn(plain.shape, requires_grad=True)
    with CountedFlops() as counted_plain:
        plain.split_pass(stage_input)
    with CountedFlops() as counted_again:
        again.split_pass(stage_input)
    for (name, mine), (_, reference) in zip(
        again.stage.named_parameters(), plain.stage.named_parameters(), strict=True
    ):
        assert torch.allclose(mine.grad, reference.grad, atol=1e-6), name
    with CountedFlops() as forward:
        plain.stage(stage_input, None)
    # The whole block's forward once more, or only the attention core (whose CPU kernel torch counts no FLOPs of).
    assert counted_again.total - counted_plain.total == (forward.total if recompute == "full" else 0)
    core = "aten._scaled_dot_product_flash_attention_for_cpu"
    assert forward.calls[core] == 1 and counted_again.calls[core] == counted_plain.calls[core] + 1
    # F + B + W still does the work of F and the whole backward.
    with CountedFlops() as whole:
        again.full_pass(stage_input)
    assert counted_again.total == whole.total


def test_recomputation_keeps_less_from_f_to_b_and_times_its_part_of_b() -> None:
    held = {}
    for recompute in ("none", "selective", "full"):
        block = runner(dataclasses.replace(BLOCK, recompute=recompute))
        _, backward_ms, _, recompute_ms = block.split_pass(torch.randn(block.shape, requires_grad=True))
        held[recompute] = block.memory[0]
        assert (recompute_ms > 0) == (recompute != "none") and recompute_ms <= backward_ms
    assert held["full"] == 1 * 8 * 32 * 4  # the block's input alone (fp32)
    assert held["full"] < held["selective"] < held["none"]


def test_calibrate_measures_each_shape_once() -> None:
    seen: list[MeasuredLayer] = []
    trainings = [Training(tensor_parallel=t, recompute=r) for t in (1, 2) for r in ("none", "full")]
    layers = [(MODEL, training) for training in [*trainings, trainings[0]]]
    calibration = calibrate(layers, repeats=1, progress=seen.append)
    assert list(calibration.layers) == seen and len(seen) == 4
    assert [row.shape for row in seen] == [layer_shape(MODEL, training) for training in trainings]
    assert calibration.device.startswith("cpu") and calibration.dtype == "fp32" and calibration.all_reduce_gpus == 0
    for row in seen:
        assert row.forward_ms > 0 and row.backward_ms >= row.recompute_ms and row.weight_ms > 0
        assert (row.recompute_ms > 0) == (row.recompute == "full")
        assert row.activation_bytes > 0 and row.weight_bytes > 0
    full = calibration.measured(MODEL, trainings[1])
    assert full is not None and full.activation_bytes == 8 * 32 * 4  # the layer's input (fp32)


def test_a_shape_too_large_to_measure_is_refused_before_any_is_measured(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[MeasuredLayer] = []
    larger = dataclasses.replace(MODEL, microbatch_size=4)
    layers = [(MODEL, Training()), (larger, Training())]
    forward = profile_module.linear_flops(MODEL) + profile_module.score_flops(MODEL, Training())
    monkeypatch.setattr(profile_module, "CPU_MAX_FORWARD_FLOPS", 2 * forward)
    with pytest.raises(InstanceError) as error:
        calibrate(layers, repeats=1, progress=seen.append)
    assert str(error.value) == (
        "the layer of t1 (hidden 32, 4 heads (2 key/value) of 8, SwiGLU 48, sequence 8, microbatch 4, recompute "
        f"none): its forward is {4 * forward / 1e9:.3g} GFLOP, more than the {2 * forward / 1e9:g} GFLOP a CPU "
        "measures in reasonable time; leave it out with --tensor-parallel or --microbatch-sizes, or measure on a "
        "larger device (--device cuda)"
    )
    monkeypatch.setattr(profile_module, "_free_bytes", lambda torch, device: 1000.0)
    with pytest.raises(
        InstanceError, match=r"^the layer of t1 \(.*\) needs about .* to measure but cpu has 1000 B free"
    ):
        calibrate(layers[:1], repeats=1, progress=seen.append)
    assert seen == []


def test_a_layer_that_runs_out_of_memory_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    def runs_out(*args):
        raise RuntimeError("[enforce fail at alloc_cpu.cpp:117] DefaultCPUAllocator: can't allocate memory")

    monkeypatch.setattr(profile_module, "_profile_stage", runs_out)
    with pytest.raises(InstanceError) as error:
        calibrate([(MODEL, Training(tensor_parallel=2))], repeats=1, dtype="bf16")
    assert str(error.value) == (
        "the layer of t2 (hidden 32, 2 heads (1 key/value) of 8, SwiGLU 24, sequence 8, microbatch 1, recompute "
        "none, bf16) ran out of memory on cpu; leave it out with --tensor-parallel or --microbatch-sizes, or measure "
        "on a larger device"
    )


def test_the_all_reduce_bus_bandwidth_over_two_gloo_processes() -> None:
    assert bus_bandwidth(10**9, 1000.0, 4) == 1.5  # 2(n-1)/n of a GB a second
    sizes = measure_all_reduce("gloo", 2, sizes=(4096, 65536), repeats=2)
    assert [size.size_bytes for size in sizes] == [4096, 65536]
    for size in sizes:
        assert size.time_ms > 0
        assert size.bus_bandwidth == pytest.approx(bus_bandwidth(size.size_bytes, size.time_ms, 2), rel=1e-3)


@pytest.fixture
def spec_file(tmp_path: Path) -> Path:
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(SPEC))
    return path


def test_calibrate_then_plan_and_from_model_use_the_measured_layer(spec_file: Path, tmp_path: Path) -> None:
    path = tmp_path / "cal.yaml"
    out = cli_ok(run_cli("calibrate", spec_file, "--repeats", 1, "--save-calibration", path))
    assert f"wrote {path}: 4 layer shape(s) measured on cpu" in out
    assert "all-reduce bus bandwidth: not measured (needs two or more CUDA GPUs)" in out
    calibration = load_calibration(path)
    assert calibration.dtype == "bf16"  # the spec's bytes_per_value, 2
    assert {(row.tensor_parallel, row.recompute) for row in calibration.layers} == {
        (1, "none"),
        (1, "full"),
        (2, "none"),
        (2, "full"),
    }
    assert path.read_text().startswith(f"# calibrated by: pipesat calibrate {spec_file} on cpu")

    planned = cli_ok(run_cli("plan", spec_file, "--calibration", path, "--time-budget", 10, "--jobs", 1))
    assert f"calibration {path} (cpu" in planned
    assert re.search(r"layers measured for (\d+) of \1 configurations\n", planned)  # every one

    instance_file = tmp_path / "measured.yaml"
    model = ["--layers", 2, "--hidden", 32, "--heads", 4, "--kv-heads", 2, "--ffn-hidden", 48, "--seq-len", 8]
    args = [*model, "--vocab", 64, "-p", 2, "-m", 2, "--tflops", 1, "--tensor-parallel", 2]
    result = run_cli("instance", "from-model", *args, "--calibration", path, "--save-instance", instance_file)
    assert "layer measured (hidden 32, 2 heads (1 key/value) of 8, SwiGLU 24" in cli_ok(result)
    row = calibration.measured(MODEL, Training(tensor_parallel=2))
    assert row is not None
    instance = load_instance(instance_file)
    head = stage_times(head_cost(MODEL, Training(tensor_parallel=2), Hardware(tflops=1)))
    assert instance.forward_times[0] == pytest.approx(row.forward_ms, rel=1e-5)  # one layer a stage
    assert instance.forward_times[1] == pytest.approx(row.forward_ms + head[0], rel=1e-5)
    assert instance.backward_times[0] == pytest.approx(row.backward_ms, rel=1e-5)
    assert instance.weight_times[1] == pytest.approx(row.weight_ms + head[2], rel=1e-5)
    assert instance.metadata["calibration"]["row"]["tensor_parallel"] == 2
    assert f"--calibration {path}" in instance_file.read_text()


def test_calibrate_prints_the_file_without_save_calibration(spec_file: Path, tmp_path: Path) -> None:
    result = run_cli("calibrate", spec_file, "--repeats", 1, "--tensor-parallel", 2, "--microbatch-sizes", 1)
    assert result.exit_code == 0, result.output
    assert "measured on cpu" in result.stderr
    document = yaml.safe_load(result.stdout)
    assert {row["tensor_parallel"] for row in document["layers"]} == {2} and document["dtype"] == "bf16"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--dtype", "fp32"],
            "--dtype fp32 keeps 4 bytes a value (fp32) but the training keeps 2; calibrate in a dtype",
        ),
        (["--tensor-parallel", 3], "no configuration to calibrate: t3: does not divide 2 GPUs"),
        (["--repeats", 0], "repeats must be at least 1, got 0"),
    ],
)
def test_calibrate_bad_input_is_one_line(spec_file: Path, args: list, message: str) -> None:
    line = cli_error(run_cli("calibrate", spec_file, *args), EXIT_BAD_INPUT)
    assert message in line


def test_a_bad_calibration_file_is_one_line_for_plan_and_from_model(spec_file: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("device: cpu\ndtype: bf16\ntorch: '2'\nrepeats: 1\nall_reduce_gpus: 0\nlayers: [{hidden: 0}]\n")
    line = cli_error(run_cli("plan", spec_file, "--calibration", bad), EXIT_BAD_INPUT)
    assert line == f"error: {bad}: layers[0].hidden must be at least 1, got 0"
    model = ["--layers", 2, "--hidden", 32, "--heads", 4, "--seq-len", 8, "-p", 2, "-m", 2, "--tflops", 1]
    line = cli_error(run_cli("instance", "from-model", *model, "--calibration", bad), EXIT_BAD_INPUT)
    assert line == f"error: {bad}: layers[0].hidden must be at least 1, got 0"
    assert "no such file" in cli_error(run_cli("plan", spec_file, "--calibration", tmp_path / "none.yaml"))


def test_calibrate_without_torch_says_how_to_install(spec_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)  # makes `import torch` raise ImportError
    assert cli_error(run_cli("calibrate", spec_file), EXIT_BAD_INPUT) == f"error: {INSTALL_HINT}"
