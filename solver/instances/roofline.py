"""The time of one pass's work on one GPU, by shape: the GPU-aware part of the cost model.

A pass is GEMMs, flash attention and elementwise kernels (`Work`), timed on the GPU (`Roofline`):

- **A GEMM** C (m x n) = A (m x k) · B (k x n) takes the longer of its compute and its memory
  traffic (a roofline). Compute is its 2mnk FLOPs at `peak · gemm_efficiency`, reduced twice: by
  *tile quantization* (a kernel computes C in TILE x TILE output tiles, and the last row and column
  of tiles are padded: m·n / (tiles · TILE²) of the work is useful) and by *wave quantization* (the
  tiles run in waves of one tile an SM; a last, partial wave leaves SMs idle: tiles / (waves · SMs)).
  Memory traffic is reading A and B and writing C once, at the memory's bandwidth. So the smaller
  per-GPU GEMMs of higher tensor parallelism or of a smaller microbatch run further from the peak:
  fewer tiles fill fewer SMs, and a skinny GEMM becomes memory-bound.
- **Flash attention** is compute-bound: its FLOPs at `peak · attention_efficiency` (its backward
  does 2.5 times the forward's FLOPs, recomputing QKᵀ; the caller counts them).
- **Elementwise kernels** (norms, residual adds, the MLP's activation, rotary embeddings, the loss)
  are memory-bound: the bytes they read and write, at the memory's bandwidth.

`gemm_efficiency` and `attention_efficiency` are the one setting a GPU type takes (`gpus`): what a
large, well-shaped kernel reaches; everything below it here comes from the shapes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum, auto

TILE = 128
"""The side of a GEMM kernel's output tile: cuBLAS's and CUTLASS's bf16 kernels on Ampere and Hopper
compute 128 x 128 (up to 128 x 256 and 256 x 128) output tiles on an SM at a time; 128 is their
common side, so padding and waves are counted on 128 x 128 tiles."""


@dataclass(frozen=True)
class Roofline:
    """One GPU as the shape model sees it: peak TFLOP/s for the values trained, the memory's GB/s,
    its streaming multiprocessors and the fractions of the peak its GEMMs and flash attention reach."""

    tflops: float
    memory_bandwidth: float
    sms: int
    gemm_efficiency: float
    attention_efficiency: float


class Matmul(Enum):
    """Which of a transformer's matmuls a GEMM is: what the cost model picks GEMMs by (a GEMM's
    `name` is for display only)."""

    QKV = auto()
    ATTENTION_OUTPUT = auto()
    ROUTER = auto()
    MLP_UP = auto()
    """An MLP's up projection, or SwiGLU's gate and up projections."""
    MLP_DOWN = auto()
    HEAD = auto()


@dataclass(frozen=True)
class Gemm:
    """C (m x n) = A (m x k) · B (k x n), the weight B when it is a layer's matmul, its name (for
    display) and which matmul it is (None: not a transformer's)."""

    m: float
    n: float
    k: float
    name: str = ""
    matmul: Matmul | None = None

    @property
    def flops(self) -> float:
        return 2 * self.m * self.n * self.k

    def input_gradient(self) -> Gemm:
        """dA = dC · Bᵀ: m x k, summed over n (B's `dgrad`)."""
        return Gemm(self.m, self.k, self.n, self.name, self.matmul)

    def weight_gradient(self) -> Gemm:
        """dB = Aᵀ · dC: k x n, summed over the m tokens (B's `wgrad`)."""
        return Gemm(self.k, self.n, self.m, self.name, self.matmul)


@dataclass(frozen=True)
class Work:
    """One pass's work on one GPU: its GEMMs, its attention FLOPs and the bytes its elementwise
    kernels move."""

    gemms: tuple[Gemm, ...] = ()
    attention_flops: float = 0.0
    elementwise_bytes: float = 0.0

    @property
    def flops(self) -> float:
        """The GEMMs' and the attention's FLOPs (elementwise work is not counted in FLOPs)."""
        return sum(gemm.flops for gemm in self.gemms) + self.attention_flops

    def ms(self, bytes_per_value: float, gpu: Roofline) -> float:
        """The pass's time in ms: each kernel on the roofline, one after another."""
        gemms = sum(gemm_ms(gemm, bytes_per_value, gpu) for gemm in self.gemms)
        return gemms + attention_ms(self.attention_flops, gpu) + memory_ms(self.elementwise_bytes, gpu)


def tiles(gemm: Gemm) -> int:
    """The TILE x TILE output tiles that cover C."""
    return math.ceil(gemm.m / TILE) * math.ceil(gemm.n / TILE)


def tile_efficiency(gemm: Gemm) -> float:
    """The useful part of the tiles' work: C's area over the tiles' (padding wasted in the last ones)."""
    return gemm.m * gemm.n / (tiles(gemm) * TILE * TILE)


def wave_efficiency(gemm: Gemm, sms: int) -> float:
    """The busy part of the SMs over the waves of tiles: tiles / (waves · SMs)."""
    count = tiles(gemm)
    return count / (math.ceil(count / sms) * sms)


def gemm_efficiency(gemm: Gemm, gpu: Roofline) -> float:
    """The fraction of the peak a GEMM's compute reaches: the GPU's GEMM efficiency, less the tiles'
    padding and the last wave's idle SMs."""
    return gpu.gemm_efficiency * tile_efficiency(gemm) * wave_efficiency(gemm, gpu.sms)


def gemm_ms(gemm: Gemm, bytes_per_value: float, gpu: Roofline) -> float:
    """A GEMM's time in ms: the longer of its compute and its memory traffic (A and B read, C written)."""
    if gemm.flops == 0:
        return 0.0
    compute = gemm.flops / (gpu.tflops * 1e12 * gemm_efficiency(gemm, gpu)) * 1e3
    traffic = (gemm.m * gemm.k + gemm.k * gemm.n + gemm.m * gemm.n) * bytes_per_value
    return max(compute, memory_ms(traffic, gpu))


def attention_ms(flops: float, gpu: Roofline) -> float:
    """Flash attention's time in ms: its FLOPs at the fraction of the peak it reaches."""
    return flops / (gpu.tflops * 1e12 * gpu.attention_efficiency) * 1e3


def memory_ms(size: float, gpu: Roofline) -> float:
    """Moving `size` bytes through the GPU's memory, in ms."""
    return size / (gpu.memory_bandwidth * 1e9) * 1e3
