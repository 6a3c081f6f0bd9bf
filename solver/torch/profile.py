"""A measured instance: a small GPT-like model built from torch.nn, profiled stage by stage.

Per stage we time F, B (gradients with respect to the stage's input only) and W (gradients with
respect to the weights), and measure what stays alive from F to B and from B to W. Splitting the
backward needs the weight-gradient work to be put aside during B: every linear layer here is a
`DeferredLinear` whose backward, when a `WeightGradStore` is deferring, returns only the input
gradient and stores a closure (holding the layer's input and its output gradient) that W runs later.
This is how zero-bubble implementations split the backward, and it means B + W does the same
matrix products as one whole backward, which the profile also times as a check.

The blocks are those the cost model describes: causal attention through torch's
`scaled_dot_product_attention` (grouped-query, `enable_gqa`, with fewer key/value heads than heads),
then a 4h GELU MLP or, with `ffn_hidden`, a SwiGLU MLP (gate, up and down projections). The whole
stage runs in one dtype (bf16 by default on CUDA, fp32 on the CPU), parameters included.

The memory held from F to B (M_B) is the size of the tensors autograd saves during F, found with
`torch.autograd.graph.saved_tensors_hooks`; the memory held from B to W (M_W) is the size of the
tensors the stored closures keep (and, on the first stage, the input gradient the embedding's weight
gradient needs). Both count each storage once and leave out parameters. M_W can come out slightly
above M_B (the output gradients it keeps are new tensors); the instance then caps weight_memory at
activation_memory, since W can free no more than F allocated, and keeps the measured value in metadata.

torch is optional (the `torch` extra): it is imported only when a profile runs.
"""

from __future__ import annotations

import dataclasses
import functools
import platform
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pipesat.models import Instance, InstanceError
from pipesat.solver.instances.cost_model import (
    MEMORY_UNIT,
    MIB,
    TIME_UNIT,
    Pipeline,
    Transformer,
    check_model,
    check_pipeline,
    even_split,
)

INSTALL_HINT = "pipesat profile needs torch: pip install -e '.[torch]'"
# The dtypes a profile runs in, by their option names.
DTYPES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}
# Texts of the RuntimeErrors torch raises when the memory runs out (besides torch.OutOfMemoryError).
OUT_OF_MEMORY = ("out of memory", "CUBLAS_STATUS_ALLOC_FAILED", "can't allocate memory")
LOWER = (
    "lower --seq-len, --microbatch-size or --hidden, or put fewer layers on each stage (fewer --layers, "
    "or more -p or --chunks)"
)
# A round of samples is stable when no median moved more than this since the previous round.
STABLE_CHANGE = 0.05
MAX_ROUNDS = 4
WARMUP = 2


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
    def dtype_name(self) -> str:
        """The dtype the profile runs in: the one given, else bf16 on cuda and fp32 on cpu."""
        return self.dtype or ("bf16" if self.device == "cuda" else "fp32")


@dataclass(frozen=True)
class StageProfile:
    """Medians in ms of F, B, W and the whole (unsplit) backward; M_B and M_W in bytes."""

    forward: float
    backward: float
    weight: float
    full_backward: float
    activation_bytes: int
    weight_bytes: int
    rounds: int
    stable: bool


def profile_instance(spec: ProfileSpec, name: str = "") -> Instance:
    """Profile every stage of the model and return the measured instance (times in ms, memory in MiB)."""
    check_model(spec.model)
    if spec.repeats < 1:
        raise InstanceError(f"repeats must be at least 1, got {spec.repeats}")
    if spec.dtype_name not in DTYPES:
        raise InstanceError(f"dtype must be one of {', '.join(DTYPES)}, got {spec.dtype_name!r}")
    pipeline = Pipeline(spec.devices, spec.microbatches, spec.chunks)
    check_pipeline(pipeline)
    split = even_split(spec.model, pipeline, f"choose --layers as a multiple of {spec.devices * spec.chunks}")
    torch = _import_torch()
    device = _torch_device(torch, spec.device)
    stages = [_profile_or_explain(torch, spec, device, s, split) for s in range(len(split))]
    data: dict[str, Any] = {
        "name": name,
        "num_devices": spec.devices,
        "num_microbatches": spec.microbatches,
        "chunks": spec.chunks,
        "forward_times": [st.forward for st in stages],
        "backward_times": [st.backward for st in stages],
        "weight_times": [st.weight for st in stages],
        "activation_memory": [st.activation_bytes / MIB for st in stages],
        "weight_memory": [min(st.weight_bytes, st.activation_bytes) / MIB for st in stages],
        "p2p_time": 0.0,
        "time_unit": TIME_UNIT,
        "memory_unit": MEMORY_UNIT,
        "metadata": {
            "source": "pipesat profile",
            "device": _device_name(torch, device),
            "torch": str(torch.__version__),
            "dtype": spec.dtype_name,
            "model": _model_metadata(spec.model, split),
            "full_backward_times": [st.full_backward for st in stages],
            "measured_weight_memory": [st.weight_bytes / MIB for st in stages],
            "repeats": spec.repeats,
            "rounds": [st.rounds for st in stages],
            "stable_medians": all(st.stable for st in stages),
            "p2p_time": "not measured (one device); set it with --p2p-time when you use the instance",
        },
    }
    if spec.placement is not None:
        data["placement"] = spec.placement
    return Instance.from_dict(data)


def profile_lines(instance: Instance) -> list[str]:
    """What a profile measured, as readable lines: the device, then one row per stage."""
    metadata = instance.metadata
    model = metadata["model"]
    lines = [
        f"measured on {metadata['device']} (torch {metadata['torch']}), medians of rounds of {metadata['repeats']}"
        + (
            ""
            if metadata["stable_medians"]
            else f"; some medians still moved over {STABLE_CHANGE:.0%} in the last round"
        ),
        f"model: {model['layers']} layers, hidden {model['hidden']}, {_heads_text(model)}, {model['mlp']} MLP "
        f"{model['mlp_width']}, sequence {model['seq_len']}, microbatch {model['microbatch_size']}, vocabulary "
        f"{model['vocab']}, {metadata['dtype']}; p2p_time not measured (0)",
        f"{'stage':>5} {'layers':>6} {'F ms':>8} {'B ms':>8} {'W ms':>8} {'B+W ms':>8} {'bwd ms':>8} {'M_B MiB':>9} {'M_W MiB':>9}",
    ]
    weights = instance.weight_times
    assert weights is not None  # a profile measures W apart
    for s in range(instance.num_stages):
        b, w = instance.backward_times[s], weights[s]
        lines.append(
            f"{s:>5} {model['layers_per_stage'][s]:>6} {instance.forward_times[s]:>8.4g} {b:>8.4g} {w:>8.4g} "
            f"{b + w:>8.4g} {metadata['full_backward_times'][s]:>8.4g} {instance.activation_memory[s]:>9.4g} "
            f"{metadata['measured_weight_memory'][s]:>9.4g}"
        )
    lines.append("bwd = the whole backward timed in one go; B + W does the same products, split")
    over = [s for s, held in enumerate(metadata["measured_weight_memory"]) if held > instance.weight_memory[s]]
    if over:
        lines.append(
            f"M_W measured above M_B on stage(s) {', '.join(map(str, over))}: weight_memory is capped at "
            "activation_memory there (an instance's W frees at most what its F allocated)"
        )
    return lines


def _model_metadata(model: Transformer, split: tuple[int, ...]) -> dict[str, Any]:
    grouped = ", grouped-query (enable_gqa)" if model.kv_heads not in (0, model.heads) else ""
    return dataclasses.asdict(model) | {
        "attention": f"torch scaled_dot_product_attention, causal{grouped}",
        "mlp": "SwiGLU" if model.swiglu else "GELU",
        "mlp_width": model.mlp_width,
        "layers_per_stage": list(split),
    }


def _heads_text(model: dict[str, Any]) -> str:
    """`heads 8`, or `heads 8 (2 key/value)` with grouped-query attention."""
    kv_heads = model["kv_heads"] or model["heads"]
    return f"heads {model['heads']}" + (f" ({kv_heads} key/value)" if kv_heads != model["heads"] else "")


def _import_torch() -> Any:
    try:
        import torch
    except ImportError:
        raise InstanceError(INSTALL_HINT) from None
    return torch


def _torch_device(torch: Any, name: str) -> Any:
    if name not in ("cpu", "cuda"):
        raise InstanceError(f"device must be cpu or cuda, got {name!r}")
    if name == "cuda" and not torch.cuda.is_available():
        raise InstanceError("device cuda asked for but torch sees no CUDA device; use --device cpu")
    return torch.device(name)


def _device_name(torch: Any, device: Any) -> str:
    if device.type == "cuda":
        return f"cuda: {torch.cuda.get_device_name(device)}"
    return f"cpu: {platform.processor() or platform.machine()}, torch threads: {torch.get_num_threads()}"


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


def _profile_or_explain(torch: Any, spec: ProfileSpec, device: Any, index: int, split: tuple[int, ...]) -> StageProfile:
    """Profile one stage; running out of memory, or a dtype torch cannot run there, is one line (`InstanceError`)."""
    try:
        return _profile_stage(torch, spec, device, index, split[index], len(split))
    except RuntimeError as error:  # torch.OutOfMemoryError is a RuntimeError
        text = str(error)
        if isinstance(error, torch.OutOfMemoryError) or any(marker in text for marker in OUT_OF_MEMORY):
            layers = f"{split[index]} layer{'s' if split[index] > 1 else ''}"
            raise InstanceError(
                f"stage {index} ({layers}, {spec.dtype_name}) ran out of memory on {spec.device}; {LOWER}"
            ) from None
        if "not implemented for" in text:
            reason = text.strip().splitlines()[0]
            raise InstanceError(
                f"torch {torch.__version__} cannot run the model in {spec.dtype_name} on {spec.device} ({reason}); "
                "choose another --dtype"
            ) from None
        raise


@functools.cache
def _model_classes(torch: Any) -> tuple[Any, Any]:
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
        """Causal attention with `kv_heads` key/value heads, each serving heads/kv_heads query heads."""

        def __init__(self, store: WeightGradStore, model: Transformer) -> None:
            super().__init__()
            h = model.hidden
            self.heads, self.kv_heads = model.heads, model.kv_heads or model.heads
            self.widths = [h, model.kv_width, model.kv_width]
            self.qkv, self.proj = DeferredLinear(store, h, sum(self.widths)), DeferredLinear(store, h, h)

        def forward(self, x: Any) -> Any:
            b, s, h = x.shape
            q, k, v = self.qkv(x).split(self.widths, dim=-1)
            q = q.reshape(b, s, self.heads, -1).transpose(1, 2)
            k, v = (t.reshape(b, s, self.kv_heads, -1).transpose(1, 2) for t in (k, v))
            grouped = self.kv_heads != self.heads
            attention = functional.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=grouped)
            return self.proj(attention.transpose(1, 2).reshape(b, s, h))

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
        """Pre-norm transformer block: attention, then the MLP (norms without affine)."""

        def __init__(self, store: WeightGradStore, model: Transformer) -> None:
            super().__init__()
            self.attention = Attention(store, model)
            self.mlp = (SwiGLU if model.swiglu else GeluMLP)(store, model.hidden, model.mlp_width)

        def forward(self, x: Any) -> Any:
            h = x.shape[-1]
            x = x + self.attention(functional.layer_norm(x, (h,)))
            return x + self.mlp(functional.layer_norm(x, (h,)))

    class Stage(nn.Module):
        """[token + position embedding] + blocks + [final norm, output head and cross-entropy loss]."""

        def __init__(self, store: WeightGradStore, spec: ProfileSpec, layers: int, first: bool, last: bool) -> None:
            super().__init__()
            h, vocab = spec.hidden, spec.vocab
            self.embedding = nn.Embedding(vocab, h) if first else None
            self.position = nn.Parameter(torch.zeros(spec.seq_len, h)) if first else None
            self.blocks = nn.Sequential(*(Block(store, spec.model) for _ in range(layers)))
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


def _profile_stage(
    torch: Any, spec: ProfileSpec, device: Any, index: int, layers: int, num_stages: int
) -> StageProfile:
    """Time F, B, W and the whole backward of one stage, in rounds until their medians are stable."""
    runner = _StageRunner(torch, spec, device, layers, first=index == 0, last=index == num_stages - 1)
    for _ in range(WARMUP):
        runner.sample()
    samples: list[tuple[float, ...]] = []
    medians: tuple[float, ...] = ()
    rounds, stable = 0, False
    while rounds < MAX_ROUNDS and not stable:
        rounds += 1
        samples += [runner.sample() for _ in range(spec.repeats)]
        latest = tuple(statistics.median(column) for column in zip(*samples, strict=True))
        stable = bool(medians) and all(
            abs(new - old) <= STABLE_CHANGE * old for new, old in zip(latest, medians, strict=True)
        )
        medians = latest
    forward, backward, weight, full_backward = (_measured(value) for value in medians)
    activation_bytes, weight_bytes = runner.memory
    return StageProfile(forward, backward, weight, full_backward, activation_bytes, weight_bytes, rounds, stable)


class _StageRunner:
    """One stage with fixed inputs; `sample` runs F, B, W, then F and the whole backward, timing each."""

    def __init__(self, torch: Any, spec: ProfileSpec, device: Any, layers: int, first: bool, last: bool) -> None:
        torch.manual_seed(spec.seed)
        self.torch, self.first = torch, first
        self.store = WeightGradStore()
        stage_class, deferred_linear = _model_classes(torch)
        self.dtype = getattr(torch, DTYPES[spec.dtype_name])
        self.stage = stage_class(self.store, spec, layers, first, last).to(device=device, dtype=self.dtype)
        # Parameters whose gradients come through the deferred layers (the embedding's come from its own backward).
        self.deferred_params = [
            p for module in self.stage.modules() if isinstance(module, deferred_linear) for p in module.parameters()
        ]
        self.shape = (spec.microbatch_size, spec.seq_len, spec.hidden)
        self.device = device
        self.tokens = torch.randint(spec.vocab, self.shape[:2], device=device)
        self.targets = torch.randint(spec.vocab, self.shape[:2], device=device) if last else None
        self.grad_output = None if last else torch.randn(self.shape, device=device, dtype=self.dtype)
        self.memory = (0, 0)

    def sample(self) -> tuple[float, float, float, float]:
        """Milliseconds of F, B, W and the whole backward; also records M_B and M_W in `memory`."""
        stage_input = self.torch.randn(self.shape, device=self.device, dtype=self.dtype, requires_grad=True)
        return (*self.split_pass(stage_input), self.full_pass(stage_input))

    def split_pass(self, stage_input: Any) -> tuple[float, float, float]:
        """F, then B (input gradient only, weight work deferred), then W; leaves the weights' gradients in `.grad`."""
        torch, store = self.torch, self.store
        self.stage.zero_grad(set_to_none=True)
        store.deferring = True
        with _SavedTensors(torch, self.stage.parameters()) as saved:
            forward_ms, (embedded, x, output) = self._timed(self._forward, stage_input)
        backward_ms, (grad_x,) = self._timed(torch.autograd.grad, output, [x], self.grad_output)
        held = [*store.held_tensors(), grad_x] if self.first else store.held_tensors()
        self.memory = (saved.bytes(), _storage_bytes(held, ()))
        weight_ms, _ = self._timed(self._weight, embedded, grad_x)
        return forward_ms, backward_ms, weight_ms

    def full_pass(self, stage_input: Any) -> float:
        """F (untimed), then the whole backward in one autograd call."""
        self.store.deferring = False
        full_ms, _ = self._timed(self._full_backward, *self._forward(stage_input))
        return full_ms

    def _forward(self, stage_input: Any) -> tuple[Any, Any, Any]:
        """(embedding output or None, the tensor B differentiates for, the stage output or loss)."""
        if self.first:
            embedded = self.stage.embed(self.tokens)
            x = embedded.detach().requires_grad_()
            return embedded, x, self.stage(x, self.targets)
        return None, stage_input, self.stage(stage_input, self.targets)

    def _weight(self, embedded: Any, grad_x: Any) -> None:
        self.store.flush()
        if self.first:
            self.torch.autograd.backward(embedded, grad_x)

    def _full_backward(self, embedded: Any, x: Any, output: Any) -> None:
        grads = self.torch.autograd.grad(output, [x, *self.deferred_params], self.grad_output)
        if self.first:
            self.torch.autograd.backward(embedded, grads[0])

    def _timed(self, work: Callable[..., Any], *args: Any) -> tuple[float, Any]:
        if self.device.type == "cuda":
            self.torch.cuda.synchronize()
        start = time.perf_counter()
        result = work(*args)
        if self.device.type == "cuda":
            self.torch.cuda.synchronize()
        return (time.perf_counter() - start) * 1e3, result


class _SavedTensors:
    """Records the tensors autograd saves for the backward while active (parameters left out)."""

    def __init__(self, torch: Any, parameters: Any) -> None:
        self.hooks = torch.autograd.graph.saved_tensors_hooks(self._pack, lambda tensor: tensor)
        self.parameters = list(parameters)
        self.tensors: list[Any] = []

    def _pack(self, tensor: Any) -> Any:
        self.tensors.append(tensor)
        return tensor

    def bytes(self) -> int:
        return _storage_bytes(self.tensors, self.parameters)

    def __enter__(self) -> _SavedTensors:
        self.hooks.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.hooks.__exit__(*exc)


def _storage_bytes(tensors: Any, excluded: Any) -> int:
    """Bytes of the distinct storages behind `tensors`, leaving out those of `excluded`."""
    skip = {t.untyped_storage().data_ptr() for t in excluded}
    sizes = {}
    for tensor in tensors:
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in skip:
            sizes[storage.data_ptr()] = storage.nbytes()
    return sum(sizes.values())


def _measured(value: float) -> float:
    """Measured times keep 4 significant digits; the noise is far larger."""
    return float(f"{value:.4g}")
