"""An analytic cost model: a transformer, how it is trained and its hardware -> an `Instance`.

Per transformer layer (docs/cost-model.md derives every term and names its source), with n = s·b
tokens, h hidden, a heads, g key/value heads of size d = h/a, f the MLP width and t the tensor-parallel
degree, each GPU of a pipeline device does

    linear FLOPs  L = 2n·h·(h + 2g·d) + 2n·h² + (4 GELU | 6 SwiGLU)·n·h·f
    scores FLOPs  S = 4n·s·h·c            (c = 1/2 for causal flash attention, else 1)
    F = (L + S) / t      B = (L + 2S + S/2 with flash + recomputed) / t      W = L / t

and keeps, from F to its B, the activations `layer_activations` lists tensor by tensor (M_B), and
from B to its W what the weight gradients need (M_W: each weight matmul's input and output gradient).
Tensors inside the attention and the MLP are split over the t GPUs; the layer's inputs, the norms'
outputs and the dropout masks are split only with sequence parallelism (Megatron's layout).

The layers are split over the p·v stages (evenly, by an explicit per-stage count, or balanced by
`solver.instances.layer_balance`). The embedding sits on the first stage and is a lookup: no FLOPs and
no activation memory. The output head sits on the last stage: one h x V matmul (split over t), so F,
B and W each cost 2n·h·V / t FLOPs, and it keeps its input and the logits (then their gradient).

Times are FLOPs over the effective throughput (TFLOP/s x efficiency), plus the tensor-parallel
all-reduces when their bandwidth is given, in milliseconds rounded to 6 significant digits; memory is
in MiB (bytes over 2^20, no rounding); the p2p time is the link latency plus one microbatch's
activation (its 1/t shard with sequence parallelism) over the link. Weights, gradients and optimizer
state are in `solver.instances.model_state`.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from pipesat.models import InstanceError
from pipesat.solver.instances.keys import Keyed, key
from pipesat.solver.instances.kinds import AMOUNT, FLAG, NUMBER, SHARE, TEXT, WHOLE, Wholes, Word

TIME_UNIT = "ms"
MEMORY_UNIT = "MiB"
MIB = 2**20
RECOMPUTE = ("none", "selective", "full")
MASK_BYTES = 1  # a dropout mask keeps one byte a value


@dataclass(frozen=True)
class Transformer(Keyed):
    """A dense decoder: `layers` blocks of attention (grouped-query with `kv_heads` < `heads`) and an
    MLP (a 4h GELU MLP, or SwiGLU of width `ffn_hidden` when given), and an output head over `vocab`."""

    layers: int = key(WHOLE, "Transformer layers L.", at_least=1)
    hidden: int = key(WHOLE, "Hidden size h.", at_least=1)
    heads: int = key(WHOLE, "Attention (query) heads a; they must divide the hidden size.", at_least=1)
    seq_len: int = key(WHOLE, "Sequence length s.", at_least=1)
    microbatch_size: int = key(WHOLE, "Sequences per microbatch b.", 1, at_least=1)
    vocab: int = key(WHOLE, "Vocabulary V of the embedding and the output head (0: neither).", 0, at_least=0)
    kv_heads: int = key(WHOLE, "Key/value heads g, for grouped-query attention (0: as many as heads).", 0, at_least=0)
    ffn_hidden: int = key(WHOLE, "MLP width f; given, the MLP is SwiGLU (0: a GELU MLP of width 4h).", 0, at_least=0)

    @property
    def swiglu(self) -> bool:
        return self.ffn_hidden > 0

    @property
    def mlp_width(self) -> int:
        """f: the MLP's inner width."""
        return self.ffn_hidden or 4 * self.hidden

    @property
    def kv_width(self) -> int:
        """g·d: the width of the keys (and of the values)."""
        return (self.kv_heads or self.heads) * (self.hidden // self.heads)

    @property
    def tokens(self) -> int:
        """n = s·b: the tokens of one microbatch."""
        return self.seq_len * self.microbatch_size


@dataclass(frozen=True)
class Training(Keyed):
    """How the model is trained: precision, attention kernel, recomputation, parallelism and the
    optimizer state a parameter costs (`solver.instances.model_state`)."""

    bytes_per_value: float = key(NUMBER, "Bytes per activation value (2: bf16).", 2.0, above=0)
    flash_attention: bool = key(FLAG, "Flash attention: the attention scores are recomputed in B, not kept.", True)
    causal: bool = key(FLAG, "Causal attention (flash attention skips the masked half).", True)
    dropout: bool = key(FLAG, "Count dropout masks (today's LLMs train without dropout).", False)
    recompute: str = key(Word(RECOMPUTE), "Activation recomputation.", "none")
    tensor_parallel: int = key(WHOLE, "GPUs t per pipeline device (Megatron-style tensor parallelism).", 1, at_least=1)
    sequence_parallel: bool = key(FLAG, "Split the layer inputs, norms and dropout masks over the t GPUs too.", False)
    data_parallel: int = key(WHOLE, "Data-parallel replicas (for zero1).", 1, at_least=1)
    zero1: bool = key(FLAG, "Shard the optimizer state over the data-parallel replicas (ZeRO-1).", False)
    weight_bytes: float = key(NUMBER, "Bytes per weight.", 2.0, above=0)
    grad_bytes: float = key(NUMBER, "Bytes per gradient.", 4.0, at_least=0)
    optimizer_bytes: float = key(
        NUMBER, "Optimizer bytes per parameter (Adam: master weights, two moments).", 12.0, at_least=0
    )


ZB_PAPER_TRAINING = Training(flash_attention=False, causal=False, dropout=True)
"""The layer of the ZB paper's formulas: attention scores kept, no causal saving, dropout masks."""


@dataclass(frozen=True)
class Hardware(Keyed):
    """Device throughput (peak TFLOP/s and the fraction reached), the pipeline link, the tensor-parallel
    link (0: its all-reduces are not timed) and the GPU's memory (0: no budgets)."""

    tflops: float = key(NUMBER, "Peak throughput of one GPU.", unit="TFLOP/s", above=0)
    efficiency: float = key(NUMBER, "The fraction of peak throughput reached.", 0.5, above=0, at_most=1)
    bandwidth: float = key(NUMBER, "The pipeline link, one GPU's share.", 50.0, unit="GB/s", above=0)
    latency: float = key(NUMBER, "The pipeline link's latency.", 10.0, unit="µs", at_least=0)
    tp_bandwidth: float = key(
        NUMBER, "The tensor-parallel link, to time its all-reduces (0: not timed).", 0.0, unit="GB/s", at_least=0
    )
    gpu_memory: float = key(
        AMOUNT,
        "Memory of one GPU; given, each device's activation budget becomes its memory limit.",
        0.0,
        at_least=0,
    )
    reserve: float = key(SHARE, "Kept back from each GPU's memory: a percentage or an amount.", 0.1, at_least=0)


@dataclass(frozen=True)
class Pipeline(Keyed):
    """How the model is cut: p devices, v chunks each, m microbatches, and optionally the layers per
    stage (or `balance` to choose them)."""

    devices: int = key(WHOLE, "Pipeline devices p.", short="-p", at_least=1)
    microbatches: int = key(WHOLE, "Microbatches m per iteration.", short="-m", at_least=1)
    chunks: int = key(WHOLE, "Stages (chunks) per device v.", 1, at_least=1)
    placement: str | None = key(
        TEXT, "linear, interleaved or vshape (default: linear, or interleaved with chunks).", None
    )
    layers_per_stage: tuple[int, ...] | None = key(
        Wholes(), "Explicit layer counts, one per stage (p x chunks), for uneven splits.", None, at_least=0
    )
    balance: bool = key(FLAG, "Choose the layers per stage that make the slowest stage fastest.", False)


@dataclass(frozen=True)
class Cost:
    """FLOPs of the three passes per GPU, the memory (bytes) held from F to B (M_B) and from B to W
    (M_W), and the tensor-parallel communication time (ms) in F and in B."""

    forward_flops: float
    backward_flops: float
    weight_flops: float
    activation_bytes: float
    weight_bytes: float
    forward_comm_ms: float = 0.0
    backward_comm_ms: float = 0.0

    def plus(self, other: Cost, times: int = 1) -> Cost:
        """This cost plus `times` copies of `other`."""
        return Cost(*(getattr(self, f.name) + times * getattr(other, f.name) for f in fields(Cost)))


NO_COST = Cost(0, 0, 0, 0, 0)


@dataclass(frozen=True)
class Tensor:
    """One tensor a layer keeps: its values, bytes a value, and whether tensor parallelism splits it
    (`sharded`) or only sequence parallelism does."""

    name: str
    values: float
    bytes_per_value: float
    sharded: bool

    def bytes_per_gpu(self, training: Training) -> float:
        split = self.sharded or training.sequence_parallel
        return self.values * self.bytes_per_value / (training.tensor_parallel if split else 1)


@dataclass(frozen=True)
class StageCost:
    """One stage: its layer count, whether it holds the embedding or the head, and its total cost."""

    layers: int
    has_embedding: bool
    has_head: bool
    cost: Cost


def linear_flops(model: Transformer) -> float:
    """L: the matmul FLOPs of one layer's forward (QKV, attention output, MLP), on one GPU without TP."""
    n, h, f = model.tokens, model.hidden, model.mlp_width
    mlp = (6 if model.swiglu else 4) * n * h * f
    return 2 * n * h * (h + 2 * model.kv_width) + 2 * n * h * h + mlp


def score_flops(model: Transformer, training: Training) -> float:
    """S: QKᵀ and the weighted sum of the values, 2n·s·h each; causal flash attention skips half."""
    causal_saving = 0.5 if training.causal and training.flash_attention else 1.0
    return 4 * model.tokens * model.seq_len * model.hidden * causal_saving


def keeps_scores(training: Training) -> bool:
    """Whether F keeps the a·s x s attention scores for B (not with flash attention or recomputation)."""
    return not training.flash_attention and training.recompute == "none"


def layer_activations(model: Transformer, training: Training) -> list[Tensor]:
    """What one layer keeps from F for B, tensor by tensor (Korthikanti et al.'s accounting); with
    full recomputation only the layer's input."""
    n, h, f, bpv = model.tokens, model.hidden, model.mlp_width, training.bytes_per_value
    if training.recompute == "full":
        return [Tensor("layer input (all else recomputed in B)", n * h, bpv, sharded=False)]
    scores = model.heads * model.seq_len * n
    tensors = [
        Tensor("attention norm input", n * h, bpv, sharded=False),
        Tensor("QKV input", n * h, bpv, sharded=False),
        Tensor("queries", n * h, bpv, sharded=True),
        Tensor("keys and values", 2 * n * model.kv_width, bpv, sharded=True),
    ]
    if keeps_scores(training):
        tensors.append(Tensor("attention scores (softmax output)", scores, bpv, sharded=True))
        if training.dropout:
            tensors.append(Tensor("score dropout mask", scores, MASK_BYTES, sharded=True))
            tensors.append(Tensor("dropped-out scores", scores, bpv, sharded=True))
    if training.flash_attention:
        tensors.append(Tensor("softmax statistics (flash, fp32)", model.heads * n, 4, sharded=True))
    tensors.append(Tensor("attention output (output projection input)", n * h, bpv, sharded=True))
    if training.dropout:
        tensors.append(Tensor("attention dropout mask", n * h, MASK_BYTES, sharded=False))
    tensors += [Tensor("MLP norm input", n * h, bpv, sharded=False), Tensor("MLP input", n * h, bpv, sharded=False)]
    if model.swiglu:
        tensors += [
            Tensor("gate and up outputs", 2 * n * f, bpv, sharded=True),
            Tensor("down projection input", n * f, bpv, sharded=True),
        ]
    else:
        tensors += [
            Tensor("GELU input", n * f, bpv, sharded=True),
            Tensor("GELU output (down projection input)", n * f, bpv, sharded=True),
        ]
    if training.dropout:
        tensors.append(Tensor("MLP dropout mask", n * h, MASK_BYTES, sharded=False))
    return tensors


def weight_gradient_inputs(model: Transformer, training: Training) -> list[Tensor]:
    """What one layer's W needs after its B: each weight matmul's input and its output's gradient."""
    n, h, f, bpv = model.tokens, model.hidden, model.mlp_width, training.bytes_per_value
    return [
        Tensor("QKV input", n * h, bpv, sharded=False),
        Tensor("QKV output gradient", n * (h + 2 * model.kv_width), bpv, sharded=True),
        Tensor("output projection input", n * h, bpv, sharded=True),
        Tensor("output projection output gradient", n * h, bpv, sharded=False),
        Tensor("MLP input", n * h, bpv, sharded=False),
        Tensor("up projection output gradient", (2 if model.swiglu else 1) * n * f, bpv, sharded=True),
        Tensor("down projection input", n * f, bpv, sharded=True),
        Tensor("down projection output gradient", n * h, bpv, sharded=False),
    ]


def held_bytes(tensors: list[Tensor], training: Training) -> float:
    return sum(tensor.bytes_per_gpu(training) for tensor in tensors)


def all_reduce_ms(model: Transformer, training: Training, hardware: Hardware) -> float:
    """One tensor-parallel all-reduce of a layer's s·b·h output (ring: 2(t-1)/t of it per GPU), in
    ms; 0 without tensor parallelism or without a tensor-parallel bandwidth."""
    t = training.tensor_parallel
    if t == 1 or hardware.tp_bandwidth <= 0:
        return 0.0
    moved = 2 * (t - 1) / t * model.tokens * model.hidden * training.bytes_per_value
    return moved / (hardware.tp_bandwidth * 1e9) * 1e3


def layer_cost(model: Transformer, training: Training, hardware: Hardware) -> Cost:
    """One transformer layer on one GPU (see the module notes)."""
    t = training.tensor_parallel
    linear, scores = linear_flops(model), score_flops(model, training)
    forward = linear + scores
    backward = linear + 2 * scores
    if training.flash_attention:
        backward += scores / 2  # flash attention recomputes QKᵀ in its backward
    if training.recompute == "selective" and not training.flash_attention:
        backward += scores  # the attention core's forward, run again
    full = training.recompute == "full"
    if full:
        backward += forward
    activation = held_bytes(layer_activations(model, training), training)
    # W frees at most what F allocated (the memory model's rule); with full recomputation B makes
    # more than F kept, which this caps (docs/cost-model.md says so).
    weight = min(held_bytes(weight_gradient_inputs(model, training), training), activation)
    reduce = all_reduce_ms(model, training, hardware)
    return Cost(
        forward_flops=forward / t,
        backward_flops=backward / t,
        weight_flops=linear / t,
        activation_bytes=activation,
        weight_bytes=weight,
        forward_comm_ms=2 * reduce,
        backward_comm_ms=(4 if full else 2) * reduce,
    )


def head_cost(model: Transformer, training: Training) -> Cost:
    """The output head (h x V matmul, vocabulary split over t) and the loss: its input and the logits
    held until B, its input and their gradient until W."""
    n, h, vocab, bpv = model.tokens, model.hidden, model.vocab, training.bytes_per_value
    flops = 2 * n * h * vocab / training.tensor_parallel
    held = held_bytes(
        [Tensor("head input", n * h, bpv, sharded=False), Tensor("logits", n * vocab, bpv, sharded=True)], training
    )
    return Cost(flops, flops, flops, held, held)


def check_description(model: Transformer, training: Training, hardware: Hardware, pipeline: Pipeline) -> None:
    """Raise `InstanceError` with one line for the first thing wrong in how the description's keys fit
    together (each key alone was checked when its record was made)."""
    check_model(model)
    check_training(model, training)
    check_pipeline(pipeline)


def check_training(model: Transformer, training: Training) -> None:
    """Raise `InstanceError` when the parallelism does not fit the model or itself."""
    t = training.tensor_parallel
    kv_heads = model.kv_heads or model.heads
    for what, count in (("heads", model.heads), ("kv_heads", kv_heads), ("ffn_hidden", model.mlp_width)):
        if count % t:
            raise InstanceError(
                f"tensor parallelism {t} does not divide {what} {count}; choose a tensor-parallel degree that does"
            )
    if training.sequence_parallel and t == 1:
        raise InstanceError(
            "sequence parallelism splits over the tensor-parallel GPUs; give --tensor-parallel 2 or more"
        )
    if training.sequence_parallel and model.seq_len % t:
        raise InstanceError(f"sequence parallelism needs seq_len {model.seq_len} divisible by tensor parallelism {t}")
    if training.zero1 and training.data_parallel == 1:
        raise InstanceError("ZeRO-1 shards the optimizer over data parallelism; give --data-parallel 2 or more")


def check_pipeline(pipeline: Pipeline) -> None:
    """Raise `InstanceError` when both an explicit split and `balance` are asked for."""
    if pipeline.balance and pipeline.layers_per_stage is not None:
        raise InstanceError("give --balance or --layers-per-stage, not both")


def check_model(model: Transformer) -> None:
    """Raise `InstanceError` when the transformer's sizes do not fit together (heads dividing hidden,
    key/value heads dividing heads)."""
    if model.hidden % model.heads:
        raise InstanceError(
            f"hidden {model.hidden} is not divisible by heads {model.heads}; the head size hidden/heads must be whole"
        )
    if model.kv_heads and model.heads % model.kv_heads:
        raise InstanceError(
            f"heads {model.heads} is not divisible by kv_heads {model.kv_heads}; each key/value head serves a "
            "whole group of query heads"
        )


def even_split(model: Transformer, pipeline: Pipeline, remedy: str = "") -> tuple[int, ...]:
    """The layers split evenly over the stages; an error saying `remedy` (by default: add `--balance`
    or give `--layers-per-stage`) when they do not divide."""
    num_stages = pipeline.devices * pipeline.chunks
    if model.layers % num_stages:
        remedy = remedy or (
            f"add --balance, or give --layers-per-stage with {num_stages} counts summing to {model.layers}"
        )
        raise InstanceError(
            f"{model.layers} layers do not split evenly over {pipeline.devices} x {pipeline.chunks} = "
            f"{num_stages} stages; {remedy}"
        )
    return (model.layers // num_stages,) * num_stages


def layer_split(model: Transformer, pipeline: Pipeline) -> tuple[int, ...]:
    """Layers per stage: the explicit split when given (checked), else an even split."""
    if pipeline.layers_per_stage is None:
        return even_split(model, pipeline)
    return check_split(model, pipeline, pipeline.layers_per_stage)


def check_split(model: Transformer, pipeline: Pipeline, split: tuple[int, ...]) -> tuple[int, ...]:
    """An explicit split, checked: one count per stage (each a whole number, as its key says), summing
    to the layers."""
    num_stages = pipeline.devices * pipeline.chunks
    if len(split) != num_stages:
        raise InstanceError(
            f"layers per stage lists {len(split)} counts but there are {pipeline.devices} x {pipeline.chunks} = "
            f"{num_stages} stages; give one count per stage"
        )
    if sum(split) != model.layers:
        raise InstanceError(
            f"layers per stage sum to {sum(split)} but the model has {model.layers} layers; make them add up"
        )
    return tuple(split)


def stage_costs(model: Transformer, training: Training, hardware: Hardware, split: tuple[int, ...]) -> list[StageCost]:
    """Per-stage FLOPs and memory for `split` (layers per stage); the embedding on stage 0, the head
    and loss on the last stage."""
    layer, head = layer_cost(model, training, hardware), head_cost(model, training)
    last = len(split) - 1
    costs = []
    for s, count in enumerate(split):
        with_head = s == last and model.vocab > 0
        cost = (head if with_head else NO_COST).plus(layer, count)
        if cost.forward_flops == 0:
            what = "the embedding lookup" if s == 0 else "nothing"
            raise InstanceError(
                f"stage {s} has 0 layers and only {what}, so it does no work; give it at least one layer"
            )
        costs.append(StageCost(layers=count, has_embedding=s == 0, has_head=with_head, cost=cost))
    return costs


def stage_times(cost: Cost, hardware: Hardware) -> tuple[float, float, float]:
    """F, B and W of a stage in ms: its FLOPs at the effective rate, plus its communication."""
    rate = effective_flops_per_ms(hardware)
    return (
        cost.forward_flops / rate + cost.forward_comm_ms,
        cost.backward_flops / rate + cost.backward_comm_ms,
        cost.weight_flops / rate,
    )


def effective_flops_per_ms(hardware: Hardware) -> float:
    return hardware.tflops * 1e12 * hardware.efficiency / 1e3


def activation_message_bytes(model: Transformer, training: Training) -> float:
    """What one microbatch sends between stages on each GPU: its s·b·h activation (or its gradient),
    a 1/t shard of it with sequence parallelism."""
    shard = training.tensor_parallel if training.sequence_parallel else 1
    return model.tokens * model.hidden * training.bytes_per_value / shard


def p2p_time(model: Transformer, training: Training, hardware: Hardware) -> float:
    """Latency plus one microbatch's activation over the link, in ms."""
    transfer_ms = activation_message_bytes(model, training) / (hardware.bandwidth * 1e9) * 1e3
    return hardware.latency / 1e3 + transfer_ms


def significant(value: float) -> float:
    """Times keep 6 significant digits: the model is far less precise, and the files stay readable."""
    return float(f"{value:.6g}")
