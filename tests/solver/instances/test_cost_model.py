"""The analytic cost model: ZB paper formulas per layer, layer splits, p2p, explain, and bad descriptions."""

from __future__ import annotations

import dataclasses
import shlex
from fractions import Fraction
from pathlib import Path

import pytest
import yaml

from cli_options import EXIT_BAD_INPUT
from models import Instance, InstanceError, load_instance
from solver.evaluate.metrics import compute_metrics
from solver.evaluate.validator import validate
from solver.heuristics import run_heuristic
from solver.instances.cost_model import (
    MIB,
    Hardware,
    Pipeline,
    Transformer,
    explain,
    layer_split,
    model_instance,
    stage_costs,
)
from tests.cli_helpers import run_cli
from tests.conftest import INSTANCES_DIR

# The 1.5B setting of the ZB paper's Table 5 (docs/reference.md; h 2304, a 24, s 1024); 24 layers split over 8 devices.
GPT_1_5B = Transformer(layers=24, hidden=2304, heads=24, seq_len=1024, microbatch_size=1, vocab=50257)
A100 = Hardware(tflops=312, efficiency=0.5, bandwidth=50, latency=10, bytes_per_value=2)
P8 = Pipeline(devices=8, microbatches=24)

# Times keep 6 significant digits (cost_model._significant), so each is within 5e-6 relative of the
# exact FLOP ratio; B + W = 2F holds exactly in FLOPs, so this is the only source of difference.
ROUNDING = 2e-5


def test_backward_plus_weight_is_twice_forward_on_every_stage() -> None:
    # 24h+8s + 24h = 2(24h+4s) per layer and 2sbhV each for the head: exact in FLOPs.
    instance = model_instance(GPT_1_5B, A100, P8)
    for f, b, w in zip(instance.forward_times, instance.backward_times, instance.weight_times, strict=True):
        assert b + w == pytest.approx(2 * f, rel=ROUNDING)
        assert w < f < b


def test_weight_to_activation_memory_ratio_is_exact() -> None:
    h, a, s = GPT_1_5B.hidden, GPT_1_5B.heads, GPT_1_5B.seq_len
    instance = model_instance(GPT_1_5B, A100, P8)
    # Every stage but the last (which also holds the head) is transformer layers only.
    for stage in range(P8.devices - 1):
        ratio = Fraction(instance.weight_memory[stage]) / Fraction(instance.activation_memory[stage])
        assert ratio == Fraction(32 * h, 34 * h + 5 * a * s)


def test_per_layer_values_follow_the_formulas() -> None:
    costs = stage_costs(GPT_1_5B, A100, P8)
    s, b, h, a = 1024, 1, 2304, 24
    assert costs[1].cost.forward_flops == 3 * s * b * h * (24 * h + 4 * s)
    assert costs[1].cost.backward_flops == 3 * s * b * h * (24 * h + 8 * s)
    assert costs[1].cost.weight_flops == 3 * 24 * s * b * h * h
    assert costs[1].cost.activation_bytes == 3 * s * b * (34 * h + 5 * a * s)
    instance = model_instance(GPT_1_5B, A100, P8)
    expected_ms = 3 * s * b * h * (24 * h + 4 * s) / (312e12 * 0.5) * 1e3
    assert instance.forward_times[1] == pytest.approx(expected_ms, rel=ROUNDING)
    assert instance.activation_memory[1] * MIB == 3 * s * b * (34 * h + 5 * a * s)


def test_head_and_loss_make_the_last_stage_heavier() -> None:
    instance = model_instance(GPT_1_5B, A100, P8)
    head_ms = 2 * 1024 * 2304 * 50257 / (312e12 * 0.5) * 1e3
    assert instance.forward_times[-1] == pytest.approx(instance.forward_times[0] + head_ms, rel=ROUNDING)
    assert instance.activation_memory[-1] > instance.activation_memory[0]
    without_head = model_instance(dataclasses.replace(GPT_1_5B, vocab=0), A100, P8)
    assert without_head.forward_times[-1] == without_head.forward_times[0]


def test_uneven_split_gives_uneven_stage_times() -> None:
    split = (2, 3, 3, 4, 4, 3, 3, 2)
    instance = model_instance(GPT_1_5B, A100, dataclasses.replace(P8, layers_per_stage=split))
    per_layer = instance.forward_times[1] / 3
    for stage in range(7):
        assert instance.forward_times[stage] == pytest.approx(split[stage] * per_layer, rel=ROUNDING)
    assert instance.forward_times[3] > instance.forward_times[1] > instance.forward_times[0]
    assert instance.metadata["model"]["layers_per_stage"] == list(split)


def test_chunks_cut_the_model_into_p_times_v_stages() -> None:
    pipeline = Pipeline(devices=4, microbatches=8, chunks=2, placement="vshape")
    instance = model_instance(GPT_1_5B, A100, pipeline)
    assert instance.num_stages == 8
    assert instance.placement == (0, 1, 2, 3, 3, 2, 1, 0)
    assert layer_split(GPT_1_5B, pipeline) == (3,) * 8


def test_p2p_time_is_latency_plus_one_activation_over_the_link() -> None:
    instance = model_instance(GPT_1_5B, A100, P8)
    message = 1024 * 1 * 2304 * 2
    assert instance.p2p_time == pytest.approx(10e-3 + message / 50e9 * 1e3, rel=ROUNDING)
    faster = model_instance(GPT_1_5B, dataclasses.replace(A100, bandwidth=100, latency=0), P8)
    assert faster.p2p_time == pytest.approx(message / 100e9 * 1e3, rel=ROUNDING)


def test_throughput_and_efficiency_scale_times() -> None:
    base = model_instance(GPT_1_5B, A100, P8)
    doubled = model_instance(GPT_1_5B, dataclasses.replace(A100, efficiency=1.0), P8)
    assert doubled.forward_times[0] == pytest.approx(base.forward_times[0] / 2, rel=ROUNDING)


def test_explain_shows_the_formulas_and_every_stage() -> None:
    lines = explain(GPT_1_5B, A100, P8)
    text = "\n".join(lines)
    assert "s·b·h·(24h+4s)" in text and "32·s·b·h" in text and "34h+5a·s" in text
    assert "156 TFLOP/s effective" in text
    stage_rows = [line for line in lines if line.split()[:1] and line.split()[0].isdigit()]
    assert len(stage_rows) == 8
    assert "+ head" in stage_rows[-1] and "+ embedding" in stage_rows[0]


def test_model_instance_runs_a_heuristic_that_validates() -> None:
    instance = model_instance(GPT_1_5B, A100, P8)
    schedule = run_heuristic("1f1b", instance)
    assert validate(schedule) == []


@pytest.mark.parametrize(
    ("model", "hardware", "pipeline", "message"),
    [
        (
            GPT_1_5B,
            A100,
            Pipeline(7, 24),
            "24 layers do not split evenly over 7 x 1 = 7 stages; give --layers-per-stage",
        ),
        (dataclasses.replace(GPT_1_5B, heads=0), A100, P8, "heads must be at least 1, got 0"),
        (dataclasses.replace(GPT_1_5B, heads=25), A100, P8, "hidden 2304 is not divisible by heads 25"),
        (dataclasses.replace(GPT_1_5B, layers=0), A100, P8, "layers must be at least 1, got 0"),
        (dataclasses.replace(GPT_1_5B, vocab=-1), A100, P8, "vocab must be at least 0, got -1"),
        (GPT_1_5B, dataclasses.replace(A100, tflops=-1), P8, "tflops must be a positive number, got -1"),
        (GPT_1_5B, dataclasses.replace(A100, efficiency=1.5), P8, "efficiency must be in (0, 1]"),
        (GPT_1_5B, dataclasses.replace(A100, bandwidth=0), P8, "bandwidth must be a positive number, got 0"),
        (GPT_1_5B, dataclasses.replace(A100, latency=-1), P8, "latency must be a non-negative number"),
        (GPT_1_5B, A100, Pipeline(0, 24), "devices must be at least 1, got 0"),
        (
            GPT_1_5B,
            A100,
            Pipeline(8, 24, layers_per_stage=(3,) * 7),
            "layers per stage lists 7 counts but there are 8 x 1 = 8 stages",
        ),
        (
            GPT_1_5B,
            A100,
            Pipeline(8, 24, layers_per_stage=(3,) * 7 + (4,)),
            "layers per stage sum to 25 but the model has 24 layers",
        ),
        (
            GPT_1_5B,
            A100,
            Pipeline(8, 24, layers_per_stage=(3,) * 7 + (-3,)),
            "layers per stage [7] must be at least 0, got -3",
        ),
        (
            GPT_1_5B,
            A100,
            Pipeline(8, 24, layers_per_stage=(0, 4, 4, 4, 3, 3, 3, 3)),
            "stage 0 has 0 layers and only the embedding lookup",
        ),
        (GPT_1_5B, A100, Pipeline(2, 24, chunks=2, placement="linear"), "placement 'linear' needs chunks 1"),
    ],
)
def test_bad_descriptions_give_one_clear_line(
    model: Transformer, hardware: Hardware, pipeline: Pipeline, message: str
) -> None:
    with pytest.raises(InstanceError) as error:
        model_instance(model, hardware, pipeline)
    assert message in str(error.value)
    assert "\n" not in str(error.value)


def test_a_zero_layer_last_stage_with_the_head_is_allowed() -> None:
    pipeline = Pipeline(8, 24, layers_per_stage=(4, 4, 4, 3, 3, 3, 3, 0))
    instance = model_instance(GPT_1_5B, A100, pipeline)
    assert instance.forward_times[-1] > 0
    assert instance.weight_memory[-1] == instance.activation_memory[-1]


# --- pipesat instance from-model ----------------------------------------------------------------

FROM_MODEL_1_5B = [
    "instance",
    "from-model",
    "--layers=24",
    "--hidden=2304",
    "--heads=24",
    "--seq-len=1024",
    "--vocab=50257",
    "-p",
    "8",
    "-m",
    "24",
    "--tflops=312",
]


def test_from_model_writes_an_instance_that_loads_back(tmp_path: Path) -> None:
    path = tmp_path / "gpt.yaml"
    result = run_cli(*FROM_MODEL_1_5B, "-o", str(path), "--name", "gpt-1.5b")
    assert result.exit_code == 0, result.output
    assert f"wrote {path}" in result.stdout
    loaded = load_instance(path)
    assert loaded == model_instance(GPT_1_5B, A100, P8, name="gpt-1.5b")
    text = path.read_text()
    # The file starts with the command that makes it and the derivation, as comments.
    assert text.startswith("# pipesat instance from-model --layers 24 --hidden 2304")
    assert "# per transformer layer (ZB paper" in text


def test_from_model_refuses_to_overwrite_without_force(tmp_path: Path) -> None:
    path = tmp_path / "gpt.json"
    path.write_text("{}")
    result = run_cli(*FROM_MODEL_1_5B, "-o", str(path))
    assert result.exit_code == EXIT_BAD_INPUT
    assert result.stderr.strip() == f"error: {path} already exists; add --force to replace it, or write to another file"
    assert path.read_text() == "{}"
    assert run_cli(*FROM_MODEL_1_5B, "-o", str(path), "--force").exit_code == 0
    assert load_instance(path).num_devices == 8


def test_from_model_explain_and_stdout() -> None:
    result = run_cli(*FROM_MODEL_1_5B, "--explain")
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("model: 24 layers, hidden h=2304")
    assert "\nnum_devices: 8\n" in result.stdout


def test_from_model_uneven_split_option() -> None:
    result = run_cli(*FROM_MODEL_1_5B, "--layers-per-stage", "2,3,3,4,4,3,3,2")
    assert result.exit_code == 0, result.output
    forward = yaml.safe_load(result.stdout)["forward_times"]
    assert forward[3] > forward[1] > forward[0]


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        (["--layers=25"], "25 layers do not split evenly over 8 x 1 = 8 stages"),
        (["--heads=0"], "heads must be at least 1, got 0"),
        (["--heads=25"], "hidden 2304 is not divisible by heads 25"),
        (["--tflops=-5"], "tflops must be a positive number, got -5"),
        (["--layers-per-stage", "3,3"], "layers per stage lists 2 counts but there are 8 x 1 = 8 stages"),
        (["--layers-per-stage", "3,x"], "--layers-per-stage takes whole numbers"),
        (["--placement", "zigzag"], "unknown placement 'zigzag'"),
    ],
)
def test_from_model_bad_descriptions_exit_2(changes: list[str], message: str) -> None:
    result = run_cli(*FROM_MODEL_1_5B, *changes)
    assert result.exit_code == EXIT_BAD_INPUT, result.output
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0]


def test_flash_attention_drops_the_scores_from_memory_and_recomputes_them() -> None:
    s, b, h = 1024, 1, 2304
    flash = model_instance(dataclasses.replace(GPT_1_5B, flash_attention=True), A100, P8)
    stage = 1  # transformer layers only
    ratio = Fraction(flash.weight_memory[stage]) / Fraction(flash.activation_memory[stage])
    assert ratio == Fraction(32, 34)
    recompute_ms = 3 * 2 * s * b * h * s / (312e12 * 0.5) * 1e3
    f, bw, w = flash.forward_times[stage], flash.backward_times[stage], flash.weight_times[stage]
    assert bw + w == pytest.approx(2 * f + recompute_ms, rel=ROUNDING)
    result = run_cli(*FROM_MODEL_1_5B, "--flash-attention")
    assert result.exit_code == 0, result.output
    assert "--flash-attention" in result.stdout.splitlines()[0]
    assert yaml.safe_load(result.stdout)["activation_memory"] == list(flash.activation_memory)


# --- instances made for issue 7 -------------------------------------------------------------------


@pytest.mark.parametrize("path", sorted((INSTANCES_DIR / "modern").glob("*.yaml")), ids=lambda path: path.name)
def test_modern_instances_are_what_their_command_makes(path: Path) -> None:
    # Each file carries the from-model command that made it; running it again must give the same instance.
    command = next(line for line in path.read_text().splitlines() if line.startswith("# pipesat instance from-model"))
    stored = load_instance(path)
    result = run_cli(*shlex.split(command.removeprefix("# pipesat ")), "--name", stored.name)
    assert result.exit_code == 0, result.output
    assert Instance.from_dict(yaml.safe_load(result.stdout)) == stored
    heuristic = {"linear": "1f1b", "interleaved": "interleaved", "vshape": "zb-v"}[stored.placement_name()]
    assert validate(run_heuristic(heuristic, stored)) == []


@pytest.mark.parametrize("path", sorted((INSTANCES_DIR / "zb-paper").glob("*.yaml")), ids=lambda path: path.name)
def test_zb_paper_instances_reproduce_the_published_1f1b_bubble(path: Path) -> None:
    instance = load_instance(path)
    assert (instance.activation_memory, instance.weight_memory) == (
        (2.0,) * instance.num_stages,
        (1.0,) * instance.num_stages,
    )
    schedule = run_heuristic("1f1b", instance)
    assert validate(schedule) == []
    busy = instance.num_microbatches * (
        instance.forward_times[0] + instance.backward_times[0] + instance.weight_times[0]
    )
    max_span = compute_metrics(schedule).max_span
    published = instance.metadata["published_bubble_rates"]["1f1b"]
    assert round((max_span - busy) / max_span, 4) == published
