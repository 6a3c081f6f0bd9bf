"""Calibration from measurement on the CPU: one layer's tensor-parallel share and its recomputation,
measured for the shapes a plan needs, refused in one line where the device cannot measure it, and
`pipesat calibrate` -> `plan` / `from-model --calibration`."""

from __future__ import annotations

import dataclasses
import re
import sys
from pathlib import Path

import pytest
import yaml

from pipesat.commands.frame import EXIT_BAD_INPUT
from pipesat.models import InstanceError, load_instance
from pipesat.solver.instances.calibration import MeasuredLayer, layer_shape, load_calibration
from pipesat.solver.instances.cost_model import head_cost, stage_times
from pipesat.solver.instances.description import Hardware, Training, Transformer
from pipesat.solver.torch import profile as profile_module
from pipesat.solver.torch.profile import INSTALL_HINT, calibrate
from tests.cli_helpers import cli_error, cli_ok, run_cli, write_yaml

pytest.importorskip("torch")
pytestmark = pytest.mark.usefixtures("one_thread")

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
        "measures in reasonable time; leave it out with `training.tensor_parallel` or `training.microbatch_sizes`, "
        "or measure on a larger device (`device` cuda)"
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

    monkeypatch.setattr(profile_module, "profile_stage", runs_out)
    with pytest.raises(InstanceError) as error:
        calibrate([(MODEL, Training(tensor_parallel=2))], repeats=1, dtype="bf16")
    assert str(error.value) == (
        "the layer of t2 (hidden 32, 2 heads (1 key/value) of 8, SwiGLU 24, sequence 8, microbatch 1, recompute "
        "none, bf16) ran out of memory on cpu; leave it out with `training.tensor_parallel` or "
        "`training.microbatch_sizes`, or measure on a larger device"
    )


@pytest.fixture
def spec_file(tmp_path: Path) -> Path:
    return write_yaml(tmp_path / "tiny.yaml", SPEC)


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
        (["--repeats", 0], "0 is not in the range 1<=x<=1000"),
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
