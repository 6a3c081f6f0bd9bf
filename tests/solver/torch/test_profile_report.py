"""The lines a profile and a calibration print: one row per stage or layer shape, and what was not measured."""

from __future__ import annotations

from pipesat.models.units import MIB
from pipesat.solver.instances.calibration import BusBandwidth, Calibration, MeasuredLayer
from pipesat.solver.torch.profile_report import calibration_table, profile_lines
from tests.conftest import make_instance

MODEL = {
    "layers": 2,
    "hidden": 32,
    "heads": 4,
    "kv_heads": 2,
    "mlp": "SwiGLU",
    "mlp_width": 48,
    "seq_len": 8,
    "microbatch_size": 1,
    "vocab": 64,
    "layers_per_stage": [1, 1],
}
METADATA = {
    "device": "cpu: x86_64, torch threads: 1",
    "torch": "2.0",
    "repeats": 3,
    "stable_medians": False,
    "model": MODEL,
    "dtype": "fp32",
    "full_backward_times": [3.5, 4.5],
    "measured_weight_memory": [0.5, 2.5],
}


def test_a_profile_prints_a_row_a_stage_and_says_where_w_was_capped() -> None:
    instance = make_instance(
        2,
        4,
        forward_times=[1, 2],
        backward_times=[2, 3],
        weight_times=[1.5, 1.25],
        activation_memory=[1, 2],
        weight_memory=[0.5, 2],
        metadata=METADATA,
    )
    lines = profile_lines(instance)
    assert lines[0] == (
        "measured on cpu: x86_64, torch threads: 1 (torch 2.0), medians of rounds of 3; some medians still moved "
        "over 5% in the last round"
    )
    assert lines[1].startswith("model: 2 layers, hidden 32, heads 4 (2 key/value), SwiGLU MLP 48, sequence 8,")
    assert lines[3].split() == ["0", "1", "1", "2", "1.5", "3.5", "3.5", "1", "0.5"]
    assert lines[4].split() == ["1", "1", "2", "3", "1.25", "4.25", "4.5", "2", "2.5"]
    assert lines[-1].startswith("M_W measured above M_B on stage(s) 1: weight_memory is capped")


def test_a_calibration_prints_a_row_a_shape_and_the_bus_bandwidth_or_why_not() -> None:
    row = MeasuredLayer(
        hidden=32,
        head_size=8,
        heads=2,
        kv_heads=1,
        mlp="SwiGLU",
        mlp_width=24,
        seq_len=8,
        microbatch_size=1,
        recompute="full",
        tensor_parallel=2,
        forward_ms=1.5,
        backward_ms=3.25,
        weight_ms=1.0,
        recompute_ms=1.5,
        activation_bytes=MIB,
        weight_bytes=MIB // 2,
    )
    calibration = Calibration(device="cpu", dtype="bf16", torch="2.0", repeats=5, all_reduce_gpus=0, layers=(row,))
    lines = calibration_table(calibration)
    assert lines[0] == "measured on cpu (torch 2.0), bf16, one layer each, medians of rounds of 5"
    assert lines[2].split() == ["2", "2", "1", "SwiGLU", "24", "8", "1", "full", "1.5", "3.25", "1", "1.5", "1", "0.5"]
    assert lines[-1] == "all-reduce bus bandwidth: not measured (needs two or more CUDA GPUs)"
    measured = BusBandwidth(size_bytes=MIB, time_ms=0.25, bus_bandwidth=4.5)
    calibration = Calibration(
        device="cuda", dtype="bf16", torch="2.0", repeats=5, all_reduce_gpus=2, layers=(row,), all_reduce=(measured,)
    )
    assert calibration_table(calibration)[-1] == "all-reduce bus bandwidth over 2 GPUs: 1 MiB 4.5 GB/s"
