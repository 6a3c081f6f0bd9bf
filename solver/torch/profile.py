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

`calibrate` measures one layer alone (no embedding, no head) for each layer shape a plan needs and
returns a `Calibration` (`solver.instances.calibration`): the blocks are then one GPU's share of a
t-way tensor-parallel layer (heads/t and kv_heads/t of the same head size, Megatron's column-parallel
QKV and MLP input projections and row-parallel output projections: the MLP f/t wide), and under
recomputation they run under torch's activation checkpointing (non-reentrant): `full` checkpoints the
whole block, so F keeps only its input, and `selective` the attention core (scaled_dot_product_attention),
so F keeps its queries, keys and values in place of its output. B then runs the checkpointed part
again, which is timed apart (`recompute_ms`, part of B). A shape the device cannot measure is refused
before any measuring: one too big for its free memory, or on the CPU one whose forward is more than
`CPU_MAX_FORWARD_FLOPS`. With two or more CUDA GPUs visible, the all-reduce bus bandwidth is measured
too (`solver.torch.bus_bandwidth`).

torch is optional (the `torch` extra): it is imported only when a profile runs.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import platform
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pipesat.models import Instance, InstanceError
from pipesat.models.training_modes import Recompute
from pipesat.models.units import MIB, memory_text
from pipesat.solver.instances.calibration import (
    DTYPE_BYTES,
    BusBandwidth,
    Calibration,
    LayerShape,
    MeasuredLayer,
    layer_shape,
)
from pipesat.solver.instances.cost_model import MEMORY_UNIT, TIME_UNIT
from pipesat.solver.instances.description import Pipeline, Training, Transformer
from pipesat.solver.instances.description_checks import check_model, check_pipeline, check_training
from pipesat.solver.instances.layer_split import even_split
from pipesat.solver.instances.layer_work import held_bytes, layer_activations, linear_flops, score_flops
from pipesat.solver.instances.model_state import layer_parameters

INSTALL_HINT = "pipesat profile and calibrate need torch: pip install -e '.[torch]'"
# The dtypes a profile runs in, by their option names (a calibration file's `DTYPE_BYTES`).
DTYPES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}
# Texts of the RuntimeErrors torch raises when the memory runs out (besides torch.OutOfMemoryError).
OUT_OF_MEMORY = ("out of memory", "CUBLAS_STATUS_ALLOC_FAILED", "can't allocate memory")
LOWER = (
    "lower --seq-len, --microbatch-size or --hidden, or put fewer layers on each stage (fewer --layers, "
    "or more -p or --chunks)"
)
LOWER_LAYER = "leave it out with --tensor-parallel or --microbatch-sizes, or measure on a larger device"
CPU_MAX_FORWARD_FLOPS = 5e9
"""The most FLOPs a layer's forward may take to be measured on the CPU: at some tens of GFLOP/s a core,
a sample (F, B, W, then F and the whole backward: about 6 forwards) takes a second or two, and a shape
takes up to WARMUP + MAX_ROUNDS x repeats samples."""
MEASURING_COPIES = 3
"""A measured layer holds its saved activations, what W keeps and the gradients flowing at once: about
this many times the model's activation memory (which keeps no attention scores)."""
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


@dataclass(frozen=True)
class StageProfile:
    """Medians in ms of F, B, W, the whole (unsplit) backward and the part of B that recomputes; M_B
    and M_W in bytes."""

    forward: float
    backward: float
    weight: float
    full_backward: float
    activation_bytes: int
    weight_bytes: int
    rounds: int
    stable: bool
    recompute: float = 0.0


def profile_instance(spec: ProfileSpec, name: str = "") -> Instance:
    """Profile every stage of the model and return the measured instance (times in ms, memory in MiB)."""
    _check_spec(spec)
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


def calibrate(
    layers: Sequence[tuple[Transformer, Training]],
    device: str = "cpu",
    dtype: str = "fp32",
    repeats: int = 5,
    progress: Callable[[MeasuredLayer], None] | None = None,
) -> Calibration:
    """Measure one layer of each distinct shape of `layers` (a model and how it is trained each) on
    `device` in `dtype` and return the calibration; every shape is checked to be measurable before any
    is measured (module notes). `progress` hears of each row as it is measured."""
    specs: dict[LayerShape, ProfileSpec] = {}
    for model, training in layers:
        spec = ProfileSpec(
            devices=1,
            microbatches=1,
            layers=1,
            hidden=model.hidden,
            heads=model.heads,
            seq_len=model.seq_len,
            microbatch_size=model.microbatch_size,
            kv_heads=model.kv_heads,
            ffn_hidden=model.ffn_hidden,
            repeats=repeats,
            device=device,
            dtype=dtype,
            tensor_parallel=training.tensor_parallel,
            recompute=training.recompute,
        )
        _check_spec(spec)
        specs.setdefault(layer_shape(spec.model, spec.training), spec)
    torch = _import_torch()
    torch_device = _torch_device(torch, device)
    for shape, spec in specs.items():
        _check_measurable(torch, torch_device, spec, shape)
    rows = []
    for shape, spec in specs.items():
        what = f"the layer of t{spec.tensor_parallel} ({shape.label}, {spec.dtype_name})"
        measure = functools.partial(_profile_stage, torch, spec, torch_device, 1, False, False)
        row = _measured_layer(shape, spec, _explained(torch, spec, what, LOWER_LAYER, measure))
        if progress is not None:
            progress(row)
        rows.append(row)
    gpus = torch.cuda.device_count() if torch_device.type == "cuda" else 0
    all_reduce: tuple[BusBandwidth, ...] = ()
    if gpus >= 2:
        from pipesat.solver.torch.bus_bandwidth import measure_all_reduce

        all_reduce = measure_all_reduce("nccl", gpus)
    return Calibration(
        device=_device_name(torch, torch_device),
        dtype=dtype,
        torch=str(torch.__version__),
        repeats=repeats,
        all_reduce_gpus=gpus if all_reduce else 0,
        layers=tuple(rows),
        all_reduce=all_reduce,
    )


def calibration_table(calibration: Calibration) -> list[str]:
    """What a calibration measured, as readable lines: the device, one row per layer shape, the bus bandwidth."""
    lines = [
        f"measured on {calibration.device} (torch {calibration.torch}), {calibration.dtype}, one layer each, "
        f"medians of rounds of {calibration.repeats}",
        f"{'t':>3} {'heads':>5} {'kv':>3} {'mlp':>12} {'seq':>6} {'b':>3} {'recompute':>9} {'F ms':>8} "
        f"{'B ms':>8} {'W ms':>8} {'R ms':>8} {'M_B MiB':>9} {'M_W MiB':>9}",
    ]
    for row in calibration.layers:
        lines.append(
            f"{row.tensor_parallel:>3} {row.heads:>5} {row.kv_heads:>3} {f'{row.mlp} {row.mlp_width}':>12} "
            f"{row.seq_len:>6} {row.microbatch_size:>3} {row.recompute:>9} {row.forward_ms:>8.4g} "
            f"{row.backward_ms:>8.4g} {row.weight_ms:>8.4g} {row.recompute_ms:>8.4g} "
            f"{row.activation_bytes / MIB:>9.4g} {row.weight_bytes / MIB:>9.4g}"
        )
    lines.append("heads, kv and mlp are one GPU's share (of t); R = the part of B that recomputes")
    if calibration.all_reduce:
        sizes = ", ".join(
            f"{memory_text(size.size_bytes, 'B')} {size.bus_bandwidth:.4g} GB/s" for size in calibration.all_reduce
        )
        lines.append(f"all-reduce bus bandwidth over {calibration.all_reduce_gpus} GPUs: {sizes}")
    else:
        lines.append("all-reduce bus bandwidth: not measured (needs two or more CUDA GPUs)")
    return lines


def _measured_layer(shape: LayerShape, spec: ProfileSpec, profile: StageProfile) -> MeasuredLayer:
    return MeasuredLayer(
        **dataclasses.asdict(shape),
        tensor_parallel=spec.tensor_parallel,
        forward_ms=profile.forward,
        backward_ms=profile.backward,
        weight_ms=profile.weight,
        recompute_ms=profile.recompute,
        activation_bytes=profile.activation_bytes,
        weight_bytes=profile.weight_bytes,
    )


def _check_spec(spec: ProfileSpec) -> None:
    """Refuse, in one line, a model, a shard, a count of repeats or a dtype that cannot be profiled."""
    check_model(spec.model)
    check_training(spec.model, spec.training)
    if spec.repeats < 1:
        raise InstanceError(f"repeats must be at least 1, got {spec.repeats}")
    if spec.dtype_name not in DTYPES:
        raise InstanceError(f"dtype must be one of {', '.join(DTYPES)}, got {spec.dtype_name!r}")


def _check_measurable(torch: Any, device: Any, spec: ProfileSpec, shape: LayerShape) -> None:
    """Refuse a layer the device cannot measure: on the CPU, one whose forward is more than
    CPU_MAX_FORWARD_FLOPS; anywhere, one that needs more than the device's free memory."""
    model, training = spec.model, spec.training
    what = f"the layer of t{spec.tensor_parallel} ({shape.label})"
    forward = (linear_flops(model) + score_flops(model, training)) / training.tensor_parallel
    if device.type == "cpu" and forward > CPU_MAX_FORWARD_FLOPS:
        raise InstanceError(
            f"{what}: its forward is {forward / 1e9:.3g} GFLOP, more than the {CPU_MAX_FORWARD_FLOPS / 1e9:g} GFLOP "
            f"a CPU measures in reasonable time; {LOWER_LAYER} (--device cuda)"
        )
    size = DTYPE_BYTES[spec.dtype_name]
    whole = dataclasses.replace(training, recompute="none", bytes_per_value=size)
    need = MEASURING_COPIES * held_bytes(layer_activations(model, whole), whole)
    need += 2 * size * layer_parameters(model, training)  # weights and their gradients
    free = _free_bytes(torch, device)
    if free is not None and need > free:
        raise InstanceError(
            f"{what} needs about {memory_text(need, 'B')} to measure but {device.type} has "
            f"{memory_text(free, 'B')} free; {LOWER_LAYER}"
        )


def _free_bytes(torch: Any, device: Any) -> float | None:
    """The device's free memory in bytes (None where the system does not say)."""
    if device.type == "cuda":
        return float(torch.cuda.mem_get_info(device)[0])
    try:
        return float(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return None


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
        _synchronize(self.torch, self.device)
        start = time.perf_counter()
        try:
            return work(*args)
        finally:  # torch stops a recomputation early, by an exception, once it has what B needs
            _synchronize(self.torch, self.device)
            self.ms += (time.perf_counter() - start) * 1e3


def _synchronize(torch: Any, device: Any) -> None:
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


def _profile_or_explain(torch: Any, spec: ProfileSpec, device: Any, index: int, split: tuple[int, ...]) -> StageProfile:
    """Profile one stage of the pipeline (`_explained`)."""
    layers = f"{split[index]} layer{'s' if split[index] > 1 else ''}"
    first, last = index == 0, index == len(split) - 1
    measure = functools.partial(_profile_stage, torch, spec, device, split[index], first, last)
    return _explained(torch, spec, f"stage {index} ({layers}, {spec.dtype_name})", LOWER, measure)


def _explained(
    torch: Any, spec: ProfileSpec, what: str, lower: str, measure: Callable[[], StageProfile]
) -> StageProfile:
    """`measure()`; running out of memory (saying `what` ran out and what to `lower`), or a dtype torch
    cannot run there, is one line (`InstanceError`)."""
    try:
        return measure()
    except RuntimeError as error:  # torch.OutOfMemoryError is a RuntimeError
        text = str(error)
        if isinstance(error, torch.OutOfMemoryError) or any(marker in text for marker in OUT_OF_MEMORY):
            raise InstanceError(f"{what} ran out of memory on {spec.device}; {lower}") from None
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


def _profile_stage(torch: Any, spec: ProfileSpec, device: Any, layers: int, first: bool, last: bool) -> StageProfile:
    """Time F, B, W, the whole backward and B's recomputation of one stage (`layers` blocks, with the
    embedding when `first`, the head and loss when `last`), in rounds until their medians are stable."""
    runner = _StageRunner(torch, spec, device, layers, first, last)
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
    forward, backward, weight, recompute, full_backward = (measured_value(value) for value in medians)
    activation_bytes, weight_bytes = runner.memory
    return StageProfile(
        forward, backward, weight, full_backward, activation_bytes, weight_bytes, rounds, stable, recompute
    )


class _StageRunner:
    """One stage with fixed inputs; `sample` runs F, B, W, then F and the whole backward, timing each
    (and the recomputation within B)."""

    def __init__(self, torch: Any, spec: ProfileSpec, device: Any, layers: int, first: bool, last: bool) -> None:
        torch.manual_seed(spec.seed)
        self.torch, self.first = torch, first
        self.store = WeightGradStore()
        self.recomputation = Recomputation(torch, device)
        stage_class, deferred_linear = _model_classes(torch)
        self.dtype = getattr(torch, DTYPES[spec.dtype_name])
        stage = stage_class(self.store, self.recomputation, spec, layers, first, last)
        self.stage = stage.to(device=device, dtype=self.dtype)
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

    def sample(self) -> tuple[float, float, float, float, float]:
        """Milliseconds of F, B, W, B's recomputation and the whole backward; also records M_B and M_W
        in `memory`."""
        stage_input = self.torch.randn(self.shape, device=self.device, dtype=self.dtype, requires_grad=True)
        return (*self.split_pass(stage_input), self.full_pass(stage_input))

    def split_pass(self, stage_input: Any) -> tuple[float, float, float, float]:
        """F, then B (input gradient only, weight work deferred; the recomputation in it timed apart),
        then W; leaves the weights' gradients in `.grad`."""
        torch, store, recomputation = self.torch, self.store, self.recomputation
        self.stage.zero_grad(set_to_none=True)
        store.deferring = True
        with _SavedTensors(torch, self.stage.parameters()) as saved:
            forward_ms, (embedded, x, output) = self._timed(self._forward, stage_input)
        recomputation.timing, recomputation.ms = True, 0.0
        try:
            backward_ms, (grad_x,) = self._timed(torch.autograd.grad, output, [x], self.grad_output)
        finally:
            recomputation.timing = False
        held = [*store.held_tensors(), grad_x] if self.first else store.held_tensors()
        self.memory = (saved.bytes(), _storage_bytes(held, ()))
        weight_ms, _ = self._timed(self._weight, embedded, grad_x)
        return forward_ms, backward_ms, weight_ms, recomputation.ms

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
        _synchronize(self.torch, self.device)
        start = time.perf_counter()
        result = work(*args)
        _synchronize(self.torch, self.device)
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


def measured_value(value: float) -> float:
    """Measured times keep 4 significant digits; the noise is far larger."""
    return float(f"{value:.4g}")
