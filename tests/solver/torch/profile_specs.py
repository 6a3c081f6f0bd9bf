"""The small models the profile's tests measure, and one layer of them ready to run."""

from __future__ import annotations

import dataclasses

from pipesat.solver.torch.measure import _StageRunner
from pipesat.solver.torch.profile_spec import ProfileSpec

TINY = ProfileSpec(devices=2, microbatches=4, layers=2, hidden=64, heads=4, seq_len=32, repeats=3)
# One stage of everything (embedding, a block, head and loss), multi-head with a GELU MLP or
# grouped-query (one key/value head for two heads) with a SwiGLU MLP.
ONE_STAGE = ProfileSpec(devices=1, microbatches=1, layers=1, hidden=32, heads=2, seq_len=8, vocab=50)
MODERN = dataclasses.replace(ONE_STAGE, kv_heads=1, ffn_hidden=48)
# One block of hidden 32 with 4 heads (2 key/value) and a SwiGLU MLP of 48: t = 2 keeps 2 heads, 1 key/value head, 24.
BLOCK = ProfileSpec(devices=1, microbatches=1, layers=1, hidden=32, heads=4, kv_heads=2, ffn_hidden=48, seq_len=8)


def runner(spec: ProfileSpec) -> _StageRunner:
    """One layer of `spec` on the CPU, without the embedding and the head."""
    import torch

    return _StageRunner(torch, spec, torch.device("cpu"), layers=1, first=False, last=False)
