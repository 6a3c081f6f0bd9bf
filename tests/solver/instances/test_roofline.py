"""The shape model's roofline: tile and wave quantization over the SMs, the memory-bound regime of
skinny GEMMs, flash attention and elementwise work, and a layer's GEMMs losing efficiency as tensor
parallelism splits them."""

from __future__ import annotations

import dataclasses

import pytest

from pipesat.solver.instances.description import Hardware, Training, Transformer
from pipesat.solver.instances.layer_work import layer_gemms
from pipesat.solver.instances.pass_times import roofline
from pipesat.solver.instances.roofline import (
    TILE,
    Gemm,
    Roofline,
    Work,
    attention_ms,
    gemm_efficiency,
    gemm_ms,
    memory_ms,
    tile_efficiency,
    wave_efficiency,
)

H100 = Roofline(tflops=989.0, memory_bandwidth=3350.0, sms=132, gemm_efficiency=0.7, attention_efficiency=0.45)
K = 8192  # deep enough that every GEMM below but the skinny ones is compute-bound


def achieved(gemm: Gemm, gpu: Roofline = H100) -> float:
    """The fraction of the peak a GEMM reaches."""
    return gemm.flops / (gemm_ms(gemm, 2, gpu) * gpu.tflops * 1e9)


def test_one_tile_more_than_the_sms_takes_a_second_wave() -> None:
    full = Gemm(12 * TILE, 11 * TILE, K)  # 132 tiles: one wave on 132 SMs
    one_more = Gemm(7 * TILE, 19 * TILE, K)  # 133 tiles: a second wave for one tile
    assert wave_efficiency(full, H100.sms) == 1 and wave_efficiency(one_more, H100.sms) == pytest.approx(133 / 264)
    # Each tile does the same work, so the time is the waves': twice as long for one tile more.
    assert gemm_ms(one_more, 2, H100) == pytest.approx(2 * gemm_ms(full, 2, H100))
    assert gemm_ms(full, 2, H100) == pytest.approx(full.flops / (989e12 * 0.7) * 1e3)


def test_padded_tiles_cost_as_much_as_full_ones() -> None:
    full = Gemm(2 * TILE, 66 * TILE, K)  # 132 tiles, none padded
    padded = Gemm(TILE + 1, 66 * TILE, K)  # as many tiles, the second row of them almost empty
    assert tile_efficiency(padded) == pytest.approx((TILE + 1) / (2 * TILE))
    assert gemm_ms(padded, 2, H100) == pytest.approx(gemm_ms(full, 2, H100))
    assert achieved(padded) == pytest.approx(0.7 * (TILE + 1) / (2 * TILE))


def test_a_skinny_gemm_is_bound_by_memory() -> None:
    skinny = Gemm(8192, 8192, 16)  # 2 GFLOP, but a 128 MiB output to write
    traffic = (8192 * 16 * 2 + 8192 * 8192) * 2
    assert gemm_ms(skinny, 2, H100) == pytest.approx(memory_ms(traffic, H100))
    assert gemm_ms(skinny, 2, H100) > 10 * skinny.flops / (989e12 * gemm_efficiency(skinny, H100)) * 1e3
    # Twice the bytes a value, twice the time; a faster GEMM unit changes nothing.
    assert gemm_ms(skinny, 4, H100) == pytest.approx(2 * gemm_ms(skinny, 2, H100))
    assert gemm_ms(skinny, 2, dataclasses.replace(H100, gemm_efficiency=1.0)) == gemm_ms(skinny, 2, H100)
    # A square GEMM of the same output is compute-bound.
    square = Gemm(8192, 8192, 8192)
    assert gemm_ms(square, 2, H100) > 2 * memory_ms((3 * 8192 * 8192) * 2, H100)


def test_gradient_gemms_have_the_transposed_shapes() -> None:
    gemm = Gemm(4096, 1536, 4096, "QKV")
    assert gemm.input_gradient() == Gemm(4096, 4096, 1536, "QKV")  # dX = dY · Wᵀ
    assert gemm.weight_gradient() == Gemm(4096, 1536, 4096, "QKV")  # dW = Xᵀ · dY, summed over tokens
    assert gemm.flops == gemm.input_gradient().flops == gemm.weight_gradient().flops == 2 * 4096 * 1536 * 4096


def test_a_pass_adds_its_kernels_and_counts_flops_without_elementwise_work() -> None:
    gemm = Gemm(12 * TILE, 11 * TILE, K)
    work = Work((gemm, gemm), attention_flops=1e12, elementwise_bytes=3.35e9)
    assert work.flops == 2 * gemm.flops + 1e12
    assert attention_ms(1e12, H100) == pytest.approx(1e12 / (989e12 * 0.45) * 1e3)
    assert memory_ms(3.35e9, H100) == pytest.approx(1.0)
    assert work.ms(2, H100) == pytest.approx(2 * gemm_ms(gemm, 2, H100) + attention_ms(1e12, H100) + 1.0)
    assert Work().ms(2, H100) == Work().flops == 0


def test_a_layers_gemms_reach_less_of_the_peak_as_tensor_parallelism_splits_them() -> None:
    # Llama 3 8B at 2048 tokens: the QKV projection's 6 x 16 tiles at t = 8 fill 96 of 132 SMs.
    model = Transformer(32, 4096, 32, 2048, kv_heads=8, ffn_hidden=14336)
    gpu = roofline(Hardware(gpu="H100-SXM"))
    assert gpu is not None and gpu.sms == 132

    def layer_fraction(t: int) -> float:
        gemms = layer_gemms(model, Training(tensor_parallel=t))
        return sum(gemm.flops for gemm in gemms) / (sum(gemm_ms(g, 2, gpu) for g in gemms) * gpu.tflops * 1e9)

    fractions = [layer_fraction(t) for t in (1, 2, 4, 8)]
    assert fractions == sorted(fractions, reverse=True)
    assert fractions[-1] < 0.92 * fractions[0]
    qkv = layer_gemms(model, Training(tensor_parallel=8))[0]
    assert (qkv.m, qkv.n, qkv.k) == (2048, (4096 + 2 * 1024) / 8, 4096)
    assert achieved(qkv, gpu) == pytest.approx(gpu.gemm_efficiency * 96 / 132)
