"""A layer's work and what it keeps: the score and matmul FLOPs, the elementwise bytes, the experts' GEMMs,
and GEMMs and MLPs told apart by their key, not their label."""

from __future__ import annotations

import dataclasses
from collections import Counter

import pytest

from pipesat.solver.instances.cost_model import layer_cost
from pipesat.solver.instances.description import ZB_PAPER_TRAINING, Hardware, Training
from pipesat.solver.instances.layer_work import MlpKind, gpu_mlps, layer_gemms, layer_passes, linear_flops, score_flops
from pipesat.solver.instances.roofline import Matmul
from tests.solver.instances.transformers import A100, GPT_1_5B, LLAMA_8B, MOE, B, H, S


def test_causal_flash_attention_does_half_the_score_flops() -> None:
    causal = dataclasses.replace(ZB_PAPER_TRAINING, flash_attention=True, causal=True)
    assert score_flops(GPT_1_5B, causal) == 2 * S * S * B * H
    # Without flash the full s x s scores are computed and masked.
    assert score_flops(GPT_1_5B, dataclasses.replace(ZB_PAPER_TRAINING, causal=True)) == 4 * S * S * B * H


def test_grouped_query_attention_and_swiglu_change_the_matmuls() -> None:
    n, h, g_d, f = 4096, 4096, 8 * 128, 14336
    assert LLAMA_8B.kv_width == g_d
    assert linear_flops(LLAMA_8B) == 2 * n * h * (h + 2 * g_d) + 2 * n * h * h + 6 * n * h * f
    # With every head its own key/value head and a 4h GELU MLP, the matmuls are the ZB paper's 24sbh².
    assert linear_flops(GPT_1_5B) == 24 * S * B * H * H
    mha = dataclasses.replace(LLAMA_8B, kv_heads=32)
    assert layer_cost(mha, Training(), A100).activation_bytes > layer_cost(LLAMA_8B, Training(), A100).activation_bytes


def test_sequence_parallelism_splits_the_norms_and_adds_every_gpu_would_repeat() -> None:
    hardware = Hardware(gpu="H100-SXM")
    training = Training(tensor_parallel=4)
    repeated = layer_passes(LLAMA_8B, training).forward.elementwise_bytes
    split = layer_passes(LLAMA_8B, dataclasses.replace(training, sequence_parallel=True)).forward.elementwise_bytes
    n, h, f, kv = 4096, 4096, 14336, 1024
    assert repeated == pytest.approx(2 * (10 * n * h + (3 * n * f + 2 * n * (h + kv)) / 4))
    assert split == pytest.approx(2 * (10 * n * h + 3 * n * f + 2 * n * (h + kv)) / 4)
    parallel = layer_cost(LLAMA_8B, dataclasses.replace(training, sequence_parallel=True), hardware)
    assert parallel.forward_ms < layer_cost(LLAMA_8B, training, hardware).forward_ms


def test_a_mixture_of_experts_layer_does_top_k_and_shared_expert_mlps_a_token_and_the_router() -> None:
    h, f_e, n = 1024, 512, 2048
    attention = 2 * h * (h + 2 * h) + 2 * h * h
    assert linear_flops(MOE) / n == attention + 6 * (2 + 1) * h * f_e + 2 * h * 16
    assert linear_flops(MOE.dense()) / n == attention + 6 * h * 2816
    # Expert parallelism moves the experts, not the work: each GPU's experts take n·k routed copies.
    for ep in (1, 4, 16):
        training = Training(expert_parallel=ep, data_parallel=16)
        passes = layer_passes(MOE, training)
        assert passes.forward.flops == pytest.approx(linear_flops(MOE) + score_flops(MOE, training))
        mlps = [gemm for gemm in layer_gemms(MOE, training) if gemm.matmul in (Matmul.MLP_UP, Matmul.MLP_DOWN)]
        routed = mlps[:-2]  # the shared expert's two GEMMs come last
        assert len(routed) == 2 * 16 // ep and {gemm.m for gemm in routed} == {n * 2 * ep / 16}


def test_each_gemm_and_mlp_has_a_key_and_its_gradients_keep_it() -> None:
    training = Training(expert_parallel=4, data_parallel=16)
    gemms = layer_gemms(MOE, training)
    counts = Counter(gemm.matmul for gemm in gemms)
    # A GPU's 16/4 routed experts and the shared one: an up and a down projection each.
    assert counts == {Matmul.QKV: 1, Matmul.ATTENTION_OUTPUT: 1, Matmul.ROUTER: 1, Matmul.MLP_UP: 5, Matmul.MLP_DOWN: 5}
    assert all(gemm.input_gradient().matmul is gemm.weight_gradient().matmul is gemm.matmul for gemm in gemms)
    assert [mlp.kind for mlp in gpu_mlps(MOE, training)] == [MlpKind.ROUTED, MlpKind.SHARED]
    assert [(mlp.kind, mlp.prefix) for mlp in gpu_mlps(MOE.dense(), training)] == [(MlpKind.DENSE, "")]
