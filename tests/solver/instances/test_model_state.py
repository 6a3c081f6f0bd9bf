"""Model state: parameters per GPU (Llama 3 8B's published count), bytes per parameter, ZeRO-1, and
the activation budgets a GPU's memory leaves."""

from __future__ import annotations

import dataclasses

import pytest

from pipesat.models import InstanceError
from pipesat.solver.instances.cost_model import Hardware, Training, Transformer, stage_costs
from pipesat.solver.instances.model_state import (
    activation_budgets,
    bytes_per_parameter,
    device_states,
    layer_parameters,
    reserve_bytes,
)

LLAMA_8B = Transformer(32, 4096, 32, 4096, vocab=128256, kv_heads=8, ffn_hidden=14336)
H100 = Hardware(tflops=989, efficiency=0.45, gpu_memory=80 * 2**30)
GIB = 2**30


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


def test_mixed_precision_adam_costs_18_bytes_and_zero1_shards_its_12() -> None:
    assert bytes_per_parameter(Training()) == 18
    assert bytes_per_parameter(Training(data_parallel=8, zero1=True)) == 2 + 4 + 12 / 8


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
        match=r"device 0 holds .* GiB of weights, gradients and optimizer state plus a 8 GiB reserve, more than --gpu-memory 80 GiB",
    ):
        activation_budgets(H100, states)
