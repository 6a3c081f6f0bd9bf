"""Model state: parameters per GPU (Llama 3 8B's published count), bytes per parameter, each ZeRO
stage, Korthikanti's 175B, and the activation budgets a GPU's memory leaves."""

from __future__ import annotations

import dataclasses

import pytest

from pipesat.models import InstanceError
from pipesat.models.units import GIB
from pipesat.solver.instances.cost_model import stage_costs
from pipesat.solver.instances.description import Hardware, Training, Transformer
from pipesat.solver.instances.model_state import (
    activation_budgets,
    bytes_per_parameter,
    device_states,
    expert_parameters,
    layer_parameters,
    reserve_bytes,
)

LLAMA_8B = Transformer(32, 4096, 32, 4096, vocab=128256, kv_heads=8, ffn_hidden=14336)
H100 = Hardware(tflops=989, efficiency=0.45, gpu_memory=80 * 2**30)


def _states(training: Training, devices: int = 4) -> list:
    split = (LLAMA_8B.layers // devices,) * devices
    stages = stage_costs(LLAMA_8B, training, H100, split)
    return device_states(LLAMA_8B, training, stages, list(range(devices)))


def test_llama_3_8b_has_its_published_parameter_count() -> None:
    assert sum(state.parameters for state in _states(Training())) == 8_030_261_248


def test_tensor_parallelism_splits_the_matrices_not_the_norms() -> None:
    whole, split = layer_parameters(LLAMA_8B, Training()), layer_parameters(LLAMA_8B, Training(tensor_parallel=2))
    norms = 2 * 4096
    assert split - norms == (whole - norms) / 2


def test_the_first_and_last_devices_hold_the_embedding_and_the_head() -> None:
    states = _states(Training())
    vocabulary = 128256 * 4096
    assert states[0].parameters == states[1].parameters + vocabulary
    assert states[3].parameters == states[1].parameters + vocabulary + 4096  # and the final norm
    # About 9 GB more on the first and the last device of an 8B model, with mixed-precision Adam.
    assert (states[0].bytes - states[1].bytes) / 1e9 == pytest.approx(9.46, abs=0.01)


def test_mixed_precision_adam_costs_18_bytes_and_each_zero_stage_shards_more_of_it() -> None:
    assert bytes_per_parameter(Training()) == 18
    assert bytes_per_parameter(Training(data_parallel=8)) == 18  # replicas alone shard nothing
    # Megatron's distributed optimizer table, bf16 weights and fp32 gradients: 6 + 12/d.
    assert bytes_per_parameter(Training(data_parallel=8, zero=1)) == 2 + 4 + 12 / 8
    assert bytes_per_parameter(Training(data_parallel=8, zero=2)) == 2 + (4 + 12) / 8
    assert bytes_per_parameter(Training(data_parallel=8, zero=3)) == 18 / 8
    assert bytes_per_parameter(Training(data_parallel=8, zero=1, grad_bytes=2)) == 2 + 2 + 12 / 8


def test_zero_3_holds_its_shards_and_two_gathered_units() -> None:
    training = Training(data_parallel=8, zero=3)
    states = _states(training)
    layer, vocabulary = layer_parameters(LLAMA_8B, training), 128256 * 4096
    # The middle devices gather two layers; the first its embedding and a layer; the last its head.
    assert states[1].bytes == pytest.approx(states[1].parameters * 18 / 8 + 2 * layer * 2)
    assert states[0].bytes == pytest.approx(states[0].parameters * 18 / 8 + (vocabulary + layer) * 2)
    assert states[3].bytes == pytest.approx(states[3].parameters * 18 / 8 + (vocabulary + 4096 + layer) * 2)
    # Parameters stay whole: they are what a device computes with and exchanges.
    assert [state.parameters for state in states] == [state.parameters for state in _states(Training())]
    assert sum(state.bytes for state in states) < sum(state.bytes for state in _states(Training())) / 5


def test_korthikantis_175b_holds_the_papers_45_6_gib_of_model_state() -> None:
    """Korthikanti et al. (MLSys'23), Figure 1: 45.6 GiB of parameters and optimizer state a GPU for
    the 175B model (96 layers, h 12288, 96 heads, vocabulary 51200) at t8 p8, mixed-precision Adam."""
    gpt_175b = Transformer(96, 12288, 96, 2048, vocab=51200)
    training = Training(tensor_parallel=8, sequence_parallel=True, recompute="selective")
    stages = stage_costs(gpt_175b, training, H100, (12,) * 8)
    states = device_states(gpt_175b, training, stages, list(range(8)))
    assert states[3].bytes / GIB == pytest.approx(45.57, abs=0.01)


def test_budgets_are_the_gpu_less_reserve_and_model_state() -> None:
    states = _states(Training(tensor_parallel=2))
    budgets = activation_budgets(H100, states)
    assert budgets[0] == pytest.approx(80 * GIB - 8 * GIB - states[0].bytes)
    assert budgets[0] < budgets[1] == budgets[2] and budgets[3] < budgets[1]
    exact_reserve = dataclasses.replace(H100, reserve=6 * GIB)
    assert reserve_bytes(exact_reserve) == 6 * GIB
    assert activation_budgets(exact_reserve, states)[1] == pytest.approx(74 * GIB - states[1].bytes)


def test_model_state_over_the_gpu_is_one_line() -> None:
    seventy_b = Transformer(80, 8192, 64, 4096, vocab=32000, kv_heads=8, ffn_hidden=28672)
    split = (40, 40)
    training = Training()
    states = device_states(seventy_b, training, stage_costs(seventy_b, training, H100, split), [0, 1])
    with pytest.raises(
        InstanceError,
        match=r"device 0 holds .* GiB of weights, gradients and optimizer state plus a 8 GiB reserve, more than hardware.gpu_memory 80 GiB",
    ):
        activation_budgets(H100, states)


# 8 layers, the first dense, 16 routed experts of width 512 and a shared one.
MOE = Transformer(
    8, 1024, 8, 2048, ffn_hidden=2816, experts=16, top_k=2, shared_experts=1, expert_ffn_hidden=512, dense_layers=1
)


def test_expert_parallelism_shards_the_routed_experts_and_their_state() -> None:
    h, f_e = 1024, 512
    routed = 16 * 3 * h * f_e
    one = layer_parameters(MOE, Training())
    assert one == h * 3 * h + h * h + 3 * h * f_e + routed + h * 16 + 2 * h  # attention, shared, routed, router, norms
    for ep in (2, 8):
        assert one - layer_parameters(MOE, Training(expert_parallel=ep, data_parallel=8)) == routed * (1 - 1 / ep)
    assert expert_parameters(MOE, Training(expert_parallel=8, data_parallel=8)) == routed / 8
    # With ZeRO 1 over 8 replicas, EP 4: the routed experts' optimizer state is sharded over the 2
    # replicas of the same experts, the rest over all 8.
    training = Training(expert_parallel=4, data_parallel=8, zero=1)
    stages = stage_costs(MOE, training, H100, (4, 4))
    assert [stage.moe_layers for stage in stages] == [3, 4]
    states = device_states(MOE, training, stages, [0, 1])
    experts = 4 * routed / 4
    assert states[1].expert_parameters == experts
    assert states[1].bytes == (states[1].parameters - experts) * (2 + 4 + 12 / 8) + experts * (2 + 4 + 12 / 2)
    assert states[0].parameters - states[0].expert_parameters == pytest.approx(
        layer_parameters(MOE.dense(), training) + 3 * (one - routed)
    )


def test_fsdp_with_fp32_sharded_weights_gathers_its_units_in_the_param_dtype() -> None:
    # torchtitan's FSDP2: fp32 weights, gradients and two Adam moments sharded (16 bytes over d), each
    # unit gathered in bf16 to compute with.
    fsdp2 = Training(data_parallel=8, zero=3, weight_bytes=4, grad_bytes=4, optimizer_bytes=8, gathered_weight_bytes=2)
    states = _states(fsdp2)
    layer = layer_parameters(LLAMA_8B, fsdp2)
    assert states[1].bytes == pytest.approx(states[1].parameters * 16 / 8 + 2 * layer * 2)
    assert Training(weight_bytes=4).gathered_weight_bytes == 4  # as the weights unless given
    assert _states(dataclasses.replace(fsdp2, gathered_weight_bytes=4))[1].bytes == pytest.approx(
        states[1].bytes + 2 * layer * 2
    )
