"""The calibration file: written and read back unchanged, refused in one line when wrong, looked up by
what one GPU computes of a layer, and the cost it gives a layer (measured compute and memory, the
model's communication) in `derive` and in the plan's workers."""

from __future__ import annotations

import dataclasses
import pickle
from pathlib import Path
from typing import Any

import pytest
import yaml

from pipesat.models import InputError, InstanceError
from pipesat.models.units import MIB
from pipesat.solver.evaluate.validator import validate
from pipesat.solver.instances.calibration import (
    CAP,
    MAX_BYTES,
    MAX_ROWS,
    ROW_BYTES,
    Calibration,
    MeasuredLayer,
    calibration_lines,
    check_dtype,
    coverage_line,
    dtype_for,
    layer_shape,
    load_calibration,
    measured_layer_cost,
    save_calibration,
    unlike_measured,
)
from pipesat.solver.instances.cost_model import head_cost, layer_cost, stage_times
from pipesat.solver.instances.description import Hardware, Pipeline, Training, Transformer
from pipesat.solver.instances.from_model import Description, derive
from pipesat.solver.plan.executors import LocalExecutor
from pipesat.solver.plan.search import PlanOptions, plan
from pipesat.solver.plan.space import description
from pipesat.solver.plan.spec import spec_from_dict

MODEL = Transformer(layers=4, hidden=64, heads=4, seq_len=32, vocab=256, kv_heads=2, ffn_hidden=96)
HARDWARE = Hardware(tflops=1, tp_bandwidth=10)
ROW: dict[str, Any] = {
    "hidden": 64,
    "head_size": 16,
    "heads": 4,
    "kv_heads": 2,
    "mlp": "SwiGLU",
    "mlp_width": 96,
    "seq_len": 32,
    "microbatch_size": 1,
    "recompute": "none",
    "tensor_parallel": 1,
    "forward_ms": 0.5,
    "backward_ms": 0.75,
    "weight_ms": 0.25,
    "recompute_ms": 0.0,
    "activation_bytes": 60_000,
    "weight_bytes": 50_000,
}
# The same layer's share on each of 2 tensor-parallel GPUs, with full recomputation.
TP2_FULL = ROW | {"heads": 2, "kv_heads": 1, "mlp_width": 48, "recompute": "full", "tensor_parallel": 2}
TP2_FULL |= {"forward_ms": 0.3, "backward_ms": 0.9, "recompute_ms": 0.3, "activation_bytes": 4096}


def calibration(*rows: dict[str, Any]) -> Calibration:
    layers = tuple(MeasuredLayer(**row) for row in rows or (ROW, TP2_FULL))
    return Calibration(device="cpu: test", dtype="bf16", torch="2.13.0", repeats=3, all_reduce_gpus=0, layers=layers)


def test_a_layer_shape_is_one_gpus_share_of_the_layer() -> None:
    shape = layer_shape(MODEL, Training(tensor_parallel=2, recompute="full"))
    assert (shape.hidden, shape.head_size, shape.heads, shape.kv_heads) == (64, 16, 2, 1)
    assert (shape.mlp, shape.mlp_width, shape.recompute) == ("SwiGLU", 48, "full")
    gelu = layer_shape(
        Transformer(layers=2, hidden=64, heads=4, seq_len=8, microbatch_size=2), Training(tensor_parallel=4)
    )
    assert (gelu.heads, gelu.kv_heads, gelu.mlp, gelu.mlp_width, gelu.microbatch_size) == (1, 1, "GELU", 64, 2)
    # Two models whose layers have the same share per GPU use the same row.
    wider = dataclasses.replace(MODEL, heads=8, kv_heads=4, ffn_hidden=192, hidden=128)
    assert layer_shape(wider, Training(tensor_parallel=2)) != layer_shape(MODEL, Training())


def test_the_row_of_a_shape_is_found_and_others_are_not() -> None:
    found = calibration()
    assert found.measured(MODEL, Training()) == MeasuredLayer(**ROW)
    assert found.measured(MODEL, Training(tensor_parallel=2, recompute="full")) == MeasuredLayer(**TP2_FULL)
    assert found.measured(MODEL, Training(tensor_parallel=2)) is None  # no row without recomputation
    assert found.measured(dataclasses.replace(MODEL, microbatch_size=2), Training()) is None
    for unlike in (Training(dropout=True), Training(flash_attention=False), Training(causal=False)):
        assert unlike_measured(unlike) and found.measured(MODEL, unlike) is None
    assert found.measured(MODEL, Training(context_parallel=2)) is None


def test_written_and_read_back_unchanged(tmp_path: Path) -> None:
    path = tmp_path / "cal.yaml"
    written = calibration()
    save_calibration(written, path, ["measured for a test"])
    assert path.read_text().startswith("# measured for a test\n")
    read = load_calibration(path)
    assert read == dataclasses.replace(written, source=str(path))
    assert read.name == f"{path} (cpu: test, bf16)"
    assert pickle.loads(pickle.dumps(read)) == read  # it travels to the plan's workers


def test_derive_uses_the_measured_layer_and_the_models_head_and_communication() -> None:
    training = Training(tensor_parallel=2, recompute="full")
    described = Description(MODEL, training, HARDWARE, Pipeline(2, 4))
    measured = derive(described, calibration=calibration())
    analytic = derive(described)
    row = MeasuredLayer(**TP2_FULL)
    assert measured.measured == row and analytic.measured is None
    layer = layer_cost(MODEL, training, HARDWARE)
    assert layer.forward_comm_ms > 0  # the all-reduces of 2 tensor-parallel GPUs, the model's
    head = stage_times(head_cost(MODEL, training, HARDWARE))
    f, b, w = row.forward_ms + layer.forward_comm_ms, row.backward_ms + layer.backward_comm_ms, row.weight_ms
    assert measured.times[0] == pytest.approx((2 * f, 2 * b, 2 * w), rel=1e-5)
    assert measured.times[1] == pytest.approx((2 * f + head[0], 2 * b + head[1], 2 * w + head[2]), rel=1e-5)
    assert measured.stages[0].cost.recompute_ms == 2 * row.recompute_ms
    assert measured.instance.activation_memory[0] == 2 * row.activation_bytes / MIB
    # W frees at most what F allocated: with full recomputation M_W is capped at M_B.
    assert measured.instance.weight_memory[0] == 2 * row.activation_bytes / MIB
    head_memory = analytic.stages[1].cost.activation_bytes - 2 * layer.activation_bytes
    assert measured.stages[1].cost.activation_bytes == pytest.approx(2 * row.activation_bytes + head_memory)
    assert measured.instance.metadata["calibration"]["row"]["forward_ms"] == row.forward_ms
    assert measured.states == analytic.states  # the model state is the model's


def test_the_balanced_split_weighs_the_measured_layer_against_the_models_head() -> None:
    # Measured, the layer is so slow next to the model's head that the last stage takes its even share.
    heavy = ROW | {"forward_ms": 500.0, "backward_ms": 750.0, "weight_ms": 250.0}
    wide = dataclasses.replace(MODEL, vocab=4096)  # a head of about 9 of the model's layers
    described = Description(wide, Training(), Hardware(tflops=0.001), Pipeline(2, 4, balance=True))
    assert derive(described).split == (4, 0)  # the head alone on the last stage
    assert derive(described, calibration=calibration(heavy)).split == (2, 2)


def test_derive_without_a_row_is_the_models() -> None:
    described = Description(dataclasses.replace(MODEL, microbatch_size=2), Training(), HARDWARE, Pipeline(2, 4))
    measured = derive(described, calibration=calibration())
    assert measured.measured is None and measured.times == derive(described).times
    assert measured.instance.metadata["calibration"]["row"] == "none: the model's layer"


def test_sequence_parallelism_scales_the_measured_memory_as_the_model_does() -> None:
    training = Training(tensor_parallel=2, recompute="full", sequence_parallel=True)
    cost = measured_layer_cost(MeasuredLayer(**TP2_FULL), MODEL, training, HARDWARE)
    whole = layer_cost(MODEL, dataclasses.replace(training, sequence_parallel=False), HARDWARE)
    split = layer_cost(MODEL, training, HARDWARE)
    assert split.activation_bytes < whole.activation_bytes
    assert cost.activation_bytes == pytest.approx(
        TP2_FULL["activation_bytes"] * split.activation_bytes / whole.activation_bytes
    )
    assert cost.forward_ms == TP2_FULL["forward_ms"]


def test_a_training_in_another_dtype_is_refused_in_one_line() -> None:
    with pytest.raises(InstanceError) as error:
        derive(Description(MODEL, Training(bytes_per_value=4), HARDWARE, Pipeline(2, 4)), calibration=calibration())
    assert str(error.value) == (
        "calibration calibration (cpu: test, bf16) keeps 2 bytes a value (bf16) but the training keeps 4; "
        "calibrate in a dtype of 4 bytes, or set bytes_per_value 2"
    )
    check_dtype("fp32", Training(bytes_per_value=4), "--dtype fp32")
    assert (dtype_for(Training()), dtype_for(Training(bytes_per_value=4))) == ("bf16", "fp32")
    with pytest.raises(InstanceError, match="no dtype measured keeps 1 bytes a value; set bytes_per_value to 2 or 4"):
        dtype_for(Training(bytes_per_value=1))


def test_what_a_calibration_gave_is_said() -> None:
    found = calibration()
    lines = calibration_lines(found, MODEL, Training())
    assert lines[0] == (
        "calibration calibration (cpu: test, bf16): layer measured (hidden 64, 4 heads (2 key/value) of 16, "
        "SwiGLU 96, sequence 32, microbatch 1, recompute none)"
    )
    assert lines[1] == "  F 0.5 ms, B 0.75 ms (0 of it recomputing), W 0.25 ms; M_B 0.0572205 MiB, M_W 0.0476837 MiB"
    assert "no row for this layer" in calibration_lines(found, MODEL, Training(recompute="selective"))[0]
    assert "not used (the measured layer has no dropout)" in calibration_lines(found, MODEL, Training(dropout=True))[0]
    rows = {"t1 b1": found.layers[0], "t2 b1": None, "t4 b1": None}
    assert coverage_line(found, rows) == (
        "calibration calibration (cpu: test, bf16): layers measured for 1 of 3 configurations; the model's for t2 b1, t4 b1"
    )


def write(tmp_path: Path, document: Any) -> Path:
    path = tmp_path / "cal.yaml"
    path.write_text(document if isinstance(document, str) else yaml.safe_dump(document))
    return path


def document(**changes: Any) -> dict[str, Any]:
    return {"device": "cpu", "dtype": "bf16", "torch": "2.13.0", "repeats": 3, "all_reduce_gpus": 0} | changes


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ([1, 2], "cal.yaml: a calibration file is a mapping of device, dtype, torch, repeats, ... and layers"),
        ("device: [", "cal.yaml:2:1: not valid YAML"),
        (
            document(layers=[ROW], num_devices=2),
            "cal.yaml: unknown key 'num_devices'; did you mean 'device'? give device, dtype, torch",
        ),
        ({"dtype": "bf16"}, "cal.yaml: device is missing; give it as text"),
        (document(dtype="fp8"), "cal.yaml: dtype must be one of bf16, fp16, fp32, got 'fp8'"),
        (document(layers={"a": 1}), "cal.yaml: layers must be a list of rows, got {'a': 1}"),
        (document(layers=[3]), "cal.yaml: layers[0] must be a mapping of hidden, head_size, heads"),
        (
            document(layers=[ROW | {"forward_ms": -1}]),
            "cal.yaml: layers[0].forward_ms must be in (0, 1e+09] (the layer's forward F), got -1",
        ),
        (
            document(layers=[ROW, ROW | {"mlp": "ReLU"}]),
            "cal.yaml: layers[1].mlp must be one of GELU, SwiGLU, got 'ReLU'",
        ),
        (document(layers=[ROW | {"heads": 0}]), "cal.yaml: layers[0].heads must be at least 1, got 0"),
        (document(layers=[{k: v for k, v in ROW.items() if k != "weight_ms"}]), "layers[0].weight_ms is missing"),
        (document(layers=[ROW | {"extra": 1}]), "cal.yaml: layers[0]: unknown key 'extra'; give hidden, head_size"),
        (document(layers=[ROW, ROW | {"forward_ms": 2}]), "cal.yaml has two rows for hidden 64, 4 heads"),
        (
            document(all_reduce=[{"size_bytes": 1, "time_ms": 0, "bus_bandwidth": 1}]),
            "all_reduce[0].time_ms must be a positive number, got 0",
        ),
    ],
)
def test_a_bad_file_is_refused_in_one_line(tmp_path: Path, content: Any, message: str) -> None:
    with pytest.raises(InputError) as error:
        load_calibration(write(tmp_path, content))
    text = str(error.value)
    assert message in text and "\n" not in text, text


def test_a_file_larger_than_its_most_rows_take_is_refused_before_it_is_parsed(tmp_path: Path) -> None:
    # 50,000 plain rows (15 MB) took 12.5 s to parse before they were refused: the file's size says it
    # at once. The rows here are valid; only their number is wrong, and the line says so.
    block = yaml.safe_dump([ROW | {"hidden": 64 + i} for i in range(100)])
    rows = -(-(CAP.size + 1) // len(block)) * 100
    path = tmp_path / "cal.yaml"
    path.write_text(yaml.safe_dump(document()) + "layers:\n" + block * (rows // 100))
    with pytest.raises(InputError) as error:
        load_calibration(path)
    text = str(error.value)
    assert text.startswith(f"{path}: larger than {CAP.size:,} bytes, more than a calibration of at most 10,000 layer")
    assert "\n" not in text


def test_a_row_as_saved_takes_well_under_its_allowance(tmp_path: Path) -> None:
    # ROW_BYTES is what lets a file be refused by its size: MAX_ROWS of the longest rows pipesat writes
    # (every time a 17-digit float, every amount 19 digits) must fit in the cap.
    longest = ROW | {"recompute": "selective", "forward_ms": 1 / 3, "backward_ms": 2 / 3 + 1e8}
    longest |= {"weight_ms": 1 / 7, "recompute_ms": 1 / 9, "activation_bytes": MAX_BYTES, "weight_bytes": MAX_BYTES}
    rows = [longest | {"hidden": 10**9 + i, "mlp_width": 10**9 + i, "seq_len": 10**9} for i in range(100)]
    path = save_calibration(calibration(*rows), tmp_path / "cal.yaml", ["a comment"])
    assert path.stat().st_size * MAX_ROWS / 100 <= CAP.size
    assert len(load_calibration(path).layers) == 100
    assert path.stat().st_size / 100 < ROW_BYTES / 2


def test_the_plan_costs_measured_layers_in_its_workers() -> None:
    spec = spec_from_dict(
        {
            "model": {
                "layers": 4,
                "hidden": 64,
                "heads": 4,
                "seq_len": 32,
                "vocab": 256,
                "kv_heads": 2,
                "ffn_hidden": 96,
            },
            "cluster": {"gpus": 2, "gpu_memory": "1GiB", "tflops": 1, "efficiency": 0.5},
            "training": {
                "global_batch": 2,
                "tensor_parallel": [1],
                "microbatch_sizes": [1],
                "placements": ["linear"],
                "recompute": ["none"],
            },
        }
    )
    found = calibration(ROW)
    result = plan(
        spec, LocalExecutor(2), PlanOptions(time_budget=20, calibration=found)
    )  # tasks pickled to 2 processes
    best = result.best_schedule
    assert best is not None and validate(best) == []
    config = next(item.config for item in result.results if item.config.label == best.source["plan"])
    expected = derive(description(spec, config), calibration=found)
    assert expected.measured == found.layers[0]
    assert best.instance.forward_times == expected.instance.forward_times
    assert best.instance.forward_times != derive(description(spec, config)).instance.forward_times
