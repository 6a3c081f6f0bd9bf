"""From a model description to an instance: times and memory from the cost model, budgets from the
model state, and the arithmetic explained."""

from __future__ import annotations

import dataclasses

import pytest

from pipesat.models import InstanceError, Status
from pipesat.models.units import MIB
from pipesat.solver.evaluate.metrics import compute_metrics
from pipesat.solver.heuristics import run_heuristic
from pipesat.solver.instances.communication import all_to_all_ms
from pipesat.solver.instances.description import ZB_PAPER_TRAINING, Hardware, Pipeline, Training, Transformer
from pipesat.solver.instances.explain import TRAINING_OPTIONS, command_line, explain
from pipesat.solver.instances.from_model import Description, derive, model_instance
from pipesat.solver.instances.keys import keys
from pipesat.solver.solve import solve
from tests.strategies import assert_valid

GPT_1_5B = Transformer(layers=24, hidden=2304, heads=24, seq_len=1024, microbatch_size=1, vocab=50257)
A100 = Hardware(tflops=312, efficiency=0.5, bandwidth=50, latency=10)
ZB_1_5B = Description(GPT_1_5B, ZB_PAPER_TRAINING, A100, Pipeline(devices=8, microbatches=24))
LLAMA_8B = Transformer(32, 4096, 32, 4096, vocab=128256, kv_heads=8, ffn_hidden=14336)
LLAMA_TP2 = Description(
    LLAMA_8B,
    Training(tensor_parallel=2),
    Hardware(tflops=989, efficiency=0.45, gpu_memory=80 * 2**30),
    Pipeline(devices=4, microbatches=16),
)
# Times keep 6 significant digits, so each is within 5e-6 relative of the exact FLOP ratio.
ROUNDING = 2e-5


def test_times_are_flops_at_the_effective_rate_and_memory_is_in_mib() -> None:
    instance = model_instance(ZB_1_5B)
    s, h = 1024, 2304
    assert instance.forward_times[1] == pytest.approx(3 * s * h * (24 * h + 4 * s) / 156e12 * 1e3, rel=ROUNDING)
    assert instance.activation_memory[1] * MIB == 3 * s * (34 * h + 5 * 24 * s)
    assert (instance.time_unit, instance.memory_unit) == ("ms", "MiB")
    for f, b, w in zip(instance.forward_times, instance.backward_times, instance.weight_times, strict=True):
        assert b + w == pytest.approx(2 * f, rel=ROUNDING) and w < f < b


def test_the_head_makes_the_last_stage_heavier() -> None:
    instance = model_instance(ZB_1_5B)
    head_ms = 2 * 1024 * 2304 * 50257 / 156e12 * 1e3
    assert instance.forward_times[-1] == pytest.approx(instance.forward_times[0] + head_ms, rel=ROUNDING)
    no_head = model_instance(dataclasses.replace(ZB_1_5B, model=dataclasses.replace(GPT_1_5B, vocab=0)))
    assert no_head.forward_times[-1] == no_head.forward_times[0]


def test_p2p_is_latency_plus_one_activation_over_the_link() -> None:
    message = 1024 * 2304 * 2
    assert model_instance(ZB_1_5B).p2p_time == pytest.approx(10e-3 + message / 50e9 * 1e3, rel=ROUNDING)
    sharded = dataclasses.replace(LLAMA_TP2, training=Training(tensor_parallel=2, sequence_parallel=True))
    assert model_instance(sharded).p2p_time == pytest.approx(10e-3 + 4096 * 4096 * 2 / 2 / 50e9 * 1e3, rel=ROUNDING)


def test_a_gpu_memory_writes_each_devices_budget_as_its_limit() -> None:
    derivation = derive(LLAMA_TP2)
    instance = derivation.instance
    assert instance.memory_limit == tuple(budget / MIB for budget in derivation.budgets)
    # The embedding and the head weigh on the first and the last device.
    first, middle, _, last = instance.memory_limit
    assert first < middle and last < middle
    assert instance.metadata["model_state_mib"][0] == derivation.states[0].bytes / MIB
    assert_valid(run_heuristic("1f1b", instance))
    without = model_instance(dataclasses.replace(LLAMA_TP2, hardware=Hardware(tflops=989, efficiency=0.45)))
    assert without.memory_limit is None


def test_balance_beats_the_even_split_under_1f1b() -> None:
    pipeline = Pipeline(devices=8, microbatches=32)
    even = dataclasses.replace(LLAMA_TP2, training=Training(), pipeline=pipeline)
    balanced = dataclasses.replace(even, pipeline=dataclasses.replace(pipeline, balance=True))
    spans = [compute_metrics(assert_valid(run_heuristic("1f1b", model_instance(d)))).makespan for d in (even, balanced)]
    assert spans[1] < spans[0]
    assert model_instance(balanced).metadata["model"]["layers_per_stage"] == [4, 4, 4, 4, 4, 5, 5, 2]


def test_the_command_line_names_every_option_that_is_not_a_default() -> None:
    line = command_line(LLAMA_TP2)
    assert line.startswith("pipesat instance from-model --layers 32 --hidden 4096 --heads 32 --seq-len 4096")
    assert "--kv-heads 8 --ffn-hidden 14336" in line and "--tensor-parallel 2" in line
    assert line.endswith("--gpu-memory 80GiB --reserve 10%")
    zb = command_line(ZB_1_5B)
    assert "--no-flash-attention --no-causal --dropout" in zb and "--gpu-memory" not in zb


def test_explain_shows_the_formulas_every_stage_and_every_device() -> None:
    derivation = derive(LLAMA_TP2)
    text = "\n".join(explain(LLAMA_TP2, derivation))
    assert "L = 2n·h·(h+2g·d) + 2n·h² + 6n·h·f" in text and "c = 1/2, causal flash attention" in text
    assert "gate and up outputs" in text and "x 18 bytes (2 weight + 4 gradient + 12 optimizer)" in text
    assert "activation budget = GPU memory 80 GiB - reserve 8 GiB - model state" in text
    assert text.count("+ embedding") == 1 and text.count("+ head") == 1


def test_explain_says_which_layers_are_recomputed_and_the_command_line_keeps_it() -> None:
    partial = dataclasses.replace(LLAMA_TP2.training, recompute="full", recompute_layers=2)
    description = dataclasses.replace(LLAMA_TP2, training=partial)
    text = "\n".join(explain(description, derive(description)))
    assert "recompute full (the first 2 layers of each stage; the rest keep their activations)" in text
    assert "the layers of a stage past its first 2 are not recomputed" in text
    assert "--recompute full --recompute-layers 2" in command_line(description)


def test_the_command_line_can_give_every_training_key() -> None:
    assert sorted(TRAINING_OPTIONS.split()) == sorted(keys(Training))


def test_a_mixture_of_experts_writes_its_all_to_all_as_the_ops_communication_and_pairs_hide_it() -> None:
    model = Transformer(
        8, 1024, 8, 2048, ffn_hidden=2816, experts=16, top_k=2, shared_experts=1, expert_ffn_hidden=512, dense_layers=2
    )
    training = Training(expert_parallel=8, data_parallel=8, zero=1)
    pipeline = Pipeline(devices=2, microbatches=8, chunks=2, placement="vshape")
    description = Description(model, training, Hardware(gpu="H100-SXM"), pipeline)
    derivation = derive(description)
    instance = derivation.instance
    a2a = all_to_all_ms(model, training, description.hardware)
    assert instance.forward_comm_times is not None and instance.backward_comm_times is not None
    # Layers 0 and 1 (stage 0) are dense: no all-to-all; each later stage has two MoE layers.
    assert instance.forward_comm_times == pytest.approx((0, 4 * a2a, 4 * a2a, 4 * a2a), rel=ROUNDING)
    assert instance.backward_comm_times == instance.forward_comm_times
    assert all(c < f for c, f in zip(instance.forward_comm_times, instance.forward_times, strict=True))
    lines = explain(description, derivation)
    assert any(line.startswith("  expert parallelism: an all-to-all") for line in lines)
    assert "--experts 16 --top-k 2" in command_line(description) and "--expert-parallel 8" in command_line(description)
    # DualPipeV's steady state runs overlapped pairs, which hide the all-to-all: each device is busy
    # for less than its ops' times.
    schedule = run_heuristic("dualpipe-v", instance)
    assert_valid(schedule)
    assert schedule.has_pairs
    busy = compute_metrics(schedule).busy
    for device in range(instance.num_devices):
        alone = instance.num_microbatches * sum(sum(derivation.times[s]) for s in instance.stages_of(device))
        assert busy[device] < alone
    # Without expert parallelism there is nothing to hide: no communication part.
    dense = derive(dataclasses.replace(description, training=Training())).instance
    assert dense.forward_comm_times is None and not dense.has_communication


def test_a_bidirectional_pipeline_holds_the_model_twice_and_runs_dualpipe() -> None:
    """DualPipe's placement: the layers are cut for one copy (p stages, mirrored by the instance), and
    every device holds a stage of each copy, so twice the model state of the linear cut."""
    bidirectional = dataclasses.replace(LLAMA_TP2, pipeline=Pipeline(4, 16, chunks=2, placement="bidirectional"))
    derivation = derive(bidirectional)
    instance = derivation.instance
    linear = derive(LLAMA_TP2)
    assert instance.bidirectional and derivation.split == (8, 8, 8, 8)
    assert instance.forward_times == linear.instance.forward_times * 2
    for d in range(4):  # device d holds stage d of the first copy and stage 3 - d of the replica
        assert derivation.states[d].parameters == linear.states[d].parameters + linear.states[3 - d].parameters
    assert sum(state.parameters for state in derivation.states) == 2 * sum(state.parameters for state in linear.states)
    assert instance.memory_limit is not None and linear.instance.memory_limit is not None
    assert all(mine < theirs for mine, theirs in zip(instance.memory_limit, linear.instance.memory_limit, strict=True))
    assert any("each of the two copies" in line for line in explain(bidirectional, derivation))
    assert_valid(run_heuristic("dualpipe", instance))


def test_the_python_twin_makes_the_commands_instance(tmp_path) -> None:
    """`instance_from_model(...)` is `pipesat instance from-model` with the same defaults; amounts are
    written as a spec writes them."""
    from click.testing import CliRunner

    from pipesat.cli import cli
    from pipesat.models import load_instance
    from pipesat.solver.instances.from_model import instance_from_model

    path = tmp_path / "made.yaml"
    command = "--layers 4 --hidden 512 --heads 8 --seq-len 256 -p 2 -m 4 --gpu H100-SXM --gpu-memory 8GiB"
    done = CliRunner().invoke(cli, ["instance", "from-model", *command.split(), "--save-instance", str(path)])
    assert done.exit_code == 0, done.output
    made = instance_from_model(
        layers=4,
        hidden=512,
        heads=8,
        seq_len=256,
        devices=2,
        microbatches=4,
        gpu="H100-SXM",
        gpu_memory="8GiB",
        name="made",
    )
    assert made == load_instance(path) and made.metadata == load_instance(path).metadata


@pytest.mark.parametrize(
    ("keys", "match"),
    [
        ({"kv_head": 2}, "unknown key 'kv_head'; did you mean 'kv_heads'"),
        ({"gpu_memory": "lots"}, "gpu_memory must be"),
        ({"layers": 10**9}, "model.layers 1,000,000,000 is more than"),
    ],
)
def test_the_python_twin_refuses_in_one_line(keys: dict, match: str) -> None:
    from pipesat.models import PipesatError
    from pipesat.solver.instances.from_model import instance_from_model

    given = {"layers": 4, "hidden": 512, "heads": 8, "seq_len": 256, "devices": 2, "microbatches": 4} | keys
    with pytest.raises(PipesatError, match=match):
        instance_from_model(**given)
    with pytest.raises(PipesatError, match="hidden is missing"):
        instance_from_model(layers=4, heads=8, seq_len=256, devices=2, microbatches=4)


# p = 2 with four interleaved chunks a device: 0.25x of 1F1B's peak is half of what one microbatch
# holds on a device, so no order fits it and only offloading does (tests/solver/cpsat/test_offload.py).
TINY = Transformer(layers=8, hidden=256, heads=8, seq_len=256)
TINY_PIPELINE = Pipeline(devices=2, microbatches=2, chunks=4)


def test_offload_gives_the_instance_the_gpus_host_link_in_its_units() -> None:
    for gpu, gb_per_s in (("H100-SXM", 64), ("A100-80GB", 32)):
        instance = model_instance(Description(TINY, Training(), Hardware(gpu=gpu, host_link=True), TINY_PIPELINE))
        assert instance.host_link_bandwidth == pytest.approx(gb_per_s * 1e9 / MIB / 1e3)  # MiB a ms
        assert instance.offload_fraction == 1 and instance.metadata["hardware"]["host_link_bandwidth"] == gb_per_s
    given = Hardware(tflops=100, host_link_bandwidth=25)
    assert model_instance(Description(TINY, Training(), given, TINY_PIPELINE)).host_link_bandwidth == pytest.approx(
        25e9 / MIB / 1e3
    )


def test_a_gpu_alone_gives_no_host_link_and_offload_needs_one() -> None:
    instance = model_instance(Description(TINY, Training(), Hardware(gpu="H100-SXM"), TINY_PIPELINE))
    assert instance.host_link_bandwidth is None and "host_link_bandwidth" not in instance.to_dict()
    with pytest.raises(InstanceError, match=r"hardware\.host_link needs its bandwidth"):
        Hardware(tflops=100, host_link=True)


def test_the_command_line_keeps_the_link_the_gpu_does_not_give() -> None:
    def line(hardware: Hardware) -> str:
        return command_line(Description(TINY, Training(), hardware, TINY_PIPELINE))

    assert line(Hardware(gpu="H100-SXM", host_link=True)).endswith("--gpu H100-SXM --host-link")
    assert line(Hardware(gpu="H100-SXM", host_link=True, host_link_bandwidth=25)).endswith(
        "--gpu H100-SXM --host-link --host-link-bandwidth 25"
    )
    assert "--host-link-bandwidth 25" in line(Hardware(tflops=100, host_link_bandwidth=25))


def test_a_derived_instance_with_the_gpus_link_offloads_below_what_any_order_fits() -> None:
    hardware = Hardware(gpu="H100-SXM", host_link=True)
    limited = model_instance(Description(TINY, Training(), hardware, TINY_PIPELINE)).with_limit("0.25x")
    assert solve(limited, time_limit=5, workers=1, seed=0).status == Status.INFEASIBLE
    result = solve(limited, time_limit=2, workers=1, seed=0, offload=True)
    assert result.schedule is not None and assert_valid(result.schedule).transfers
