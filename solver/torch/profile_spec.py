"""What a profile measures: the model, how it is cut, how often to repeat, where and in which dtype."""

from __future__ import annotations

from dataclasses import dataclass

from pipesat.models.training_modes import Recompute
from pipesat.solver.instances.description import Training, Transformer

# The dtypes a profile runs in, by their option names (a calibration file's `DTYPE_BYTES`).
DTYPES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}


@dataclass(frozen=True)
class ProfileSpec:
    """What to profile: the model, how it is cut, how often to repeat, and where to run."""

    devices: int
    microbatches: int
    chunks: int = 1
    layers: int = 4
    hidden: int = 64
    heads: int = 4
    seq_len: int = 32
    microbatch_size: int = 1
    vocab: int = 256
    kv_heads: int = 0
    ffn_hidden: int = 0
    repeats: int = 5
    device: str = "cpu"
    dtype: str | None = None  # bf16, fp16 or fp32; None: bf16 on cuda, fp32 on cpu
    placement: str | None = None
    seed: int = 0
    tensor_parallel: int = 1  # the blocks are one GPU's share of a t-way tensor-parallel layer
    recompute: Recompute = "none"  # none, selective (the attention core) or full (the whole block)

    @property
    def model(self) -> Transformer:
        return Transformer(
            layers=self.layers,
            hidden=self.hidden,
            heads=self.heads,
            seq_len=self.seq_len,
            microbatch_size=self.microbatch_size,
            vocab=self.vocab,
            kv_heads=self.kv_heads,
            ffn_hidden=self.ffn_hidden,
        )

    @property
    def training(self) -> Training:
        """The tensor parallelism and recomputation the blocks are built with."""
        return Training(tensor_parallel=self.tensor_parallel, recompute=self.recompute)

    @property
    def dtype_name(self) -> str:
        """The dtype the profile runs in: the one given, else bf16 on cuda and fp32 on cpu."""
        return self.dtype or ("bf16" if self.device == "cuda" else "fp32")
