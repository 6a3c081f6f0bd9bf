"""The GPT-like stage a profile measures, built from torch.nn (its classes are defined once torch is imported).

Splitting the backward needs the weight-gradient work to be put aside during B: every linear layer here
is a `DeferredLinear` whose backward, when a `WeightGradStore` is deferring, returns only the input
gradient and stores a closure (holding the layer's input and its output gradient) that W runs later.
This is how zero-bubble implementations split the backward, and it means B + W does the same
matrix products as one whole backward.

The blocks are those the cost model describes: causal attention through torch's
`scaled_dot_product_attention` (grouped-query, `enable_gqa`, with fewer key/value heads than heads),
then a 4h GELU MLP or, with `ffn_hidden`, a SwiGLU MLP (gate, up and down projections). Under tensor
parallelism t a block is one GPU's share (heads/t and kv_heads/t of the same head size, the MLP f/t
wide); under recomputation a `Recomputation` runs the whole block (`full`) or its attention core
(`selective`) under torch's activation checkpointing.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import Any

from pipesat.solver.torch.profile_spec import ProfileSpec


class Recomputation:
    """Runs a part of a block under activation checkpointing: F keeps only that part's inputs and B runs
    it again. While `timing`, each run again is timed into `ms` (the part of B that recomputes)."""

    def __init__(self, torch: Any, device: Any) -> None:
        from torch.utils.checkpoint import checkpoint

        self.torch, self.device, self.checkpoint = torch, device, checkpoint
        self.timing = False
        self.ms = 0.0

    def run(self, work: Callable[..., Any], *args: Any) -> Any:
        return self.checkpoint(self._timed, work, *args, use_reentrant=False)

    def _timed(self, work: Callable[..., Any], *args: Any) -> Any:
        if not self.timing:
            return work(*args)
        synchronize(self.torch, self.device)
        start = time.perf_counter()
        try:
            return work(*args)
        finally:  # torch stops a recomputation early, by an exception, once it has what B needs
            synchronize(self.torch, self.device)
            self.ms += (time.perf_counter() - start) * 1e3


def synchronize(torch: Any, device: Any) -> None:
    """Wait for the device's queued work, so that a clock read after it has seen it done."""
    if device.type == "cuda":
        torch.cuda.synchronize()


class WeightGradStore:
    """Weight-gradient work put aside during B; `flush` runs it (that is W)."""

    def __init__(self) -> None:
        self.deferring = False
        self.pending: list[tuple[Callable[[], None], tuple[Any, ...]]] = []

    def put(self, work: Callable[[], None], held: tuple[Any, ...]) -> None:
        self.pending.append((work, held))

    def held_tensors(self) -> list[Any]:
        return [tensor for _, held in self.pending for tensor in held]

    def flush(self) -> None:
        for work, _ in self.pending:
            work()
        self.pending.clear()


@functools.cache
def model_classes(torch: Any) -> tuple[Any, Any]:
    """The GPT-like stage and its deferred linear layer, defined once torch is imported."""
    nn: Any = torch.nn
    functional: Any = torch.nn.functional

    class DeferredLinearFunction(torch.autograd.Function):
        """A linear layer whose weight gradients wait in the store while it is deferring."""

        @staticmethod
        def forward(ctx: Any, x: Any, weight: Any, bias: Any, layer: Any) -> Any:
            ctx.save_for_backward(x, weight)
            ctx.layer = layer
            return functional.linear(x, weight, bias)

        @staticmethod
        def backward(ctx: Any, grad: Any) -> Any:
            x, weight = ctx.saved_tensors
            layer = ctx.layer

            def weight_grads() -> tuple[Any, Any]:
                flat_grad = grad.reshape(-1, grad.shape[-1])
                return flat_grad.t() @ x.reshape(-1, x.shape[-1]), flat_grad.sum(0)

            def accumulate() -> None:
                layer.weight.grad, layer.bias.grad = weight_grads()

            grad_x = grad @ weight
            if not layer.store.deferring:
                return (grad_x, *weight_grads(), None)
            layer.store.put(accumulate, (x, grad))
            return grad_x, None, None, None

    class DeferredLinear(nn.Linear):
        def __init__(self, store: WeightGradStore, size_in: int, size_out: int) -> None:
            super().__init__(size_in, size_out)
            self.store = store

        def forward(self, x: Any) -> Any:
            return DeferredLinearFunction.apply(x, self.weight, self.bias, self)

    class Attention(nn.Module):
        """Causal attention with `kv_heads` key/value heads, each serving heads/kv_heads query heads: one
        GPU's share of them under tensor parallelism t (heads/t and kv_heads/t of the same size), its
        core run under `recomputation` when one is given (selective recomputation)."""

        def __init__(self, store: WeightGradStore, spec: ProfileSpec, recomputation: Recomputation | None) -> None:
            super().__init__()
            model, t = spec.model, spec.tensor_parallel
            h, size = model.hidden, model.hidden // model.heads
            self.heads, self.kv_heads = model.heads // t, (model.kv_heads or model.heads) // t
            self.widths = [self.heads * size, self.kv_heads * size, self.kv_heads * size]
            self.qkv = DeferredLinear(store, h, sum(self.widths))
            self.proj = DeferredLinear(store, self.widths[0], h)
            self.recomputation = recomputation

        def core(self, q: Any, k: Any, v: Any) -> Any:
            grouped = self.kv_heads != self.heads
            return functional.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=grouped)

        def forward(self, x: Any) -> Any:
            b, s, _ = x.shape
            q, k, v = self.qkv(x).split(self.widths, dim=-1)
            q = q.reshape(b, s, self.heads, -1).transpose(1, 2)
            k, v = (t.reshape(b, s, self.kv_heads, -1).transpose(1, 2) for t in (k, v))
            core = self.core if self.recomputation is None else functools.partial(self.recomputation.run, self.core)
            return self.proj(core(q, k, v).transpose(1, 2).reshape(b, s, self.widths[0]))

    class GeluMLP(nn.Module):
        def __init__(self, store: WeightGradStore, hidden: int, width: int) -> None:
            super().__init__()
            self.fc1, self.fc2 = DeferredLinear(store, hidden, width), DeferredLinear(store, width, hidden)

        def forward(self, x: Any) -> Any:
            return self.fc2(functional.gelu(self.fc1(x)))

    class SwiGLU(nn.Module):
        def __init__(self, store: WeightGradStore, hidden: int, width: int) -> None:
            super().__init__()
            self.gate, self.up = DeferredLinear(store, hidden, width), DeferredLinear(store, hidden, width)
            self.down = DeferredLinear(store, width, hidden)

        def forward(self, x: Any) -> Any:
            return self.down(functional.silu(self.gate(x)) * self.up(x))

    class Block(nn.Module):
        """Pre-norm transformer block: attention, then the MLP (norms without affine), one GPU's share
        of it under tensor parallelism, the whole block run under `recomputation` with full
        recomputation and its attention core with selective."""

        def __init__(self, store: WeightGradStore, spec: ProfileSpec, recomputation: Recomputation) -> None:
            super().__init__()
            model = spec.model
            self.attention = Attention(store, spec, recomputation if spec.recompute == "selective" else None)
            mlp = SwiGLU if model.swiglu else GeluMLP
            self.mlp = mlp(store, model.hidden, model.mlp_width // spec.tensor_parallel)
            self.recomputation = recomputation if spec.recompute == "full" else None

        def layer(self, x: Any) -> Any:
            h = x.shape[-1]
            x = x + self.attention(functional.layer_norm(x, (h,)))
            return x + self.mlp(functional.layer_norm(x, (h,)))

        def forward(self, x: Any) -> Any:
            return self.layer(x) if self.recomputation is None else self.recomputation.run(self.layer, x)

    class Stage(nn.Module):
        """[token + position embedding] + blocks + [final norm, output head and cross-entropy loss]."""

        def __init__(
            self,
            store: WeightGradStore,
            recomputation: Recomputation,
            spec: ProfileSpec,
            layers: int,
            first: bool,
            last: bool,
        ) -> None:
            super().__init__()
            h, vocab = spec.hidden, spec.vocab
            self.embedding = nn.Embedding(vocab, h) if first else None
            self.position = nn.Parameter(torch.zeros(spec.seq_len, h)) if first else None
            self.blocks = nn.Sequential(*(Block(store, spec, recomputation) for _ in range(layers)))
            self.head = DeferredLinear(store, h, vocab) if last else None

        def embed(self, tokens: Any) -> Any:
            assert self.embedding is not None  # only the first stage embeds
            return self.embedding(tokens) + self.position

        def forward(self, x: Any, targets: Any) -> Any:
            x = self.blocks(x)
            if self.head is None:
                return x
            logits = self.head(functional.layer_norm(x, (x.shape[-1],)))
            return functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))

    return Stage, DeferredLinear
