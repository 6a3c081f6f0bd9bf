"""An analytic cost model: a transformer, how it is trained and its hardware -> an `Instance`.

Per transformer layer (docs/cost-model.md derives every term and names its source), with n = s·b
tokens (s·b/cp on a GPU with context parallelism cp), h hidden, a heads, g key/value heads of size
d = h/a, f the MLP width and t the tensor-parallel degree, each GPU of a pipeline device does

    linear FLOPs  L = 2n·h·(h + 2g·d) + 2n·h² + (4 GELU | 6 SwiGLU)·n·h·f
    scores FLOPs  S = 4n·s·h·c            (c = 1/2 for causal flash attention, else 1)
    F = (L + S) / t      B = (L + 2S + S/2 with flash + recomputed) / t      W = L / t

(a cp-th of each with context parallelism) as GEMMs of the shapes `layer_gemms` lists, flash
attention and elementwise kernels (`layer_passes`), and keeps, from F to its B, the activations `layer_activations` lists tensor by tensor (M_B), and
from B to its W what the weight gradients need (M_W: each weight matmul's input and output gradient).
Tensors inside the attention and the MLP are split over the t GPUs; the layer's inputs, the norms'
outputs and the dropout masks are split only with sequence parallelism (Megatron's layout).

A mixture-of-experts layer (`experts` > 0; all but the first `dense_layers`) replaces the MLP by a
router (an h x E matmul, whole on every GPU) and E routed experts of width f_e, each token going to
top_k = k of them, plus `shared_experts` s_e every token goes to: (k + s_e) expert MLPs a token,
routing taken as balanced. Expert parallelism EP puts E/EP experts on a GPU, out of the data-parallel
replicas; F dispatches the n·k routed copies and combines them back (two all-to-alls among the EP
GPUs), B mirrors them: that communication is part of F's and B's times, and apart (`forward_a2a_ms`,
`backward_a2a_ms`) it is what an overlapped pair can hide (`from_model` writes it as the instance's
`forward_comm_times` and `backward_comm_times`).

The layers are split over the p·v stages (evenly, by an explicit per-stage count, or balanced by
`solver.instances.layer_balance`). The embedding sits on the first stage and is a lookup: no FLOPs and
no activation memory, only the rows it reads and writes and its tensor-parallel reduction, which
the shape model times (`embedding_cost`). The output head sits on the last stage: one h x V matmul (split over t), so F,
B and W each cost 2n·h·V / t FLOPs, and it keeps its input and the logits (then their gradient).

Times come from the work's shapes on the GPU's roofline (`solver.instances.roofline`) when the
hardware names a `gpu` and no `efficiency`; else they are FLOPs over the effective throughput
(TFLOP/s x efficiency). To them come the exposed communication: tensor parallelism's collectives
and ring attention's key/value exchange beyond the attention it hides under, when their link's
bandwidth is given (`solver.instances.collectives`). Times are in milliseconds rounded to 6
significant digits; memory is in MiB (bytes over 2^20, no rounding); the p2p time is the link
latency plus one microbatch's activation (its 1/t shard with sequence parallelism) over the link. Weights, gradients and optimizer
state are in `solver.instances.model_state`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields, replace

from pipesat.models import InstanceError
from pipesat.solver.instances.collectives import Collective, Link, collective_ms
from pipesat.solver.instances.gpus import CATALOGUE, GPU_NAMES
from pipesat.solver.instances.keys import Keyed, key, keys
from pipesat.solver.instances.kinds import AMOUNT, FLAG, NUMBER, SHARE, TEXT, WHOLE, Wholes, Word
from pipesat.solver.instances.roofline import Gemm, Roofline, Work

TIME_UNIT = "ms"
MEMORY_UNIT = "MiB"
MIB = 2**20
RECOMPUTE = ("none", "selective", "full")
MASK_BYTES = 1  # a dropout mask keeps one byte a value
LOSS_BYTES = 4
"""The loss computes the softmax of the logits in fp32 (Megatron's vocabulary-parallel cross entropy)."""
BACKWARD_ELEMENTWISE = 2
"""An elementwise kernel's backward moves about twice its forward's bytes: it reads the kept input and
the output's gradient and writes the input's gradient, where the forward read one and wrote one."""


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
    experts: int = key(WHOLE, "Routed experts E of a mixture-of-experts layer's MLP (0: a dense MLP).", 0, at_least=0)
    top_k: int = key(WHOLE, "Routed experts each token goes to (with experts).", 1, at_least=1)
    shared_experts: int = key(
        WHOLE, "Experts every token goes to besides its routed ones (with experts).", 0, at_least=0
    )
    expert_ffn_hidden: int = key(
        WHOLE, "An expert's MLP width (0: as the dense MLP's, ffn_hidden or 4h).", 0, at_least=0
    )
    dense_layers: int = key(
        WHOLE, "Leading layers with a dense MLP of width ffn_hidden, the rest mixture-of-experts.", 0, at_least=0
    )

    @property
    def swiglu(self) -> bool:
        return self.ffn_hidden > 0

    @property
    def moe(self) -> bool:
        """Whether the layers (but the `dense_layers` first) are mixture-of-experts layers."""
        return self.experts > 0

    @property
    def expert_width(self) -> int:
        """An expert's MLP width."""
        return self.expert_ffn_hidden or self.mlp_width

    @property
    def moe_layers(self) -> int:
        """The mixture-of-experts layers: all but the leading dense ones (none of a dense model)."""
        return self.layers - self.dense_layers if self.moe else 0

    def dense(self) -> Transformer:
        """The model's dense layer: the same model with a dense MLP (what its first `dense_layers` are)."""
        return replace(self, experts=0, dense_layers=0)

    def layer_kinds(self, first: int, count: int) -> tuple[int, int]:
        """(dense, mixture-of-experts) layers among the `count` layers from layer `first` on."""
        dense = max(0, min(first + count, self.layers - self.moe_layers) - first)
        return dense, count - dense

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
    recompute_layers: int = key(
        WHOLE,
        "With recompute full: how many layers of each stage are recomputed, its first ones (Megatron's block "
        "method); the rest keep their activations (0: every layer).",
        0,
        at_least=0,
    )
    tensor_parallel: int = key(WHOLE, "GPUs t per pipeline device (Megatron-style tensor parallelism).", 1, at_least=1)
    sequence_parallel: bool = key(FLAG, "Split the layer inputs, norms and dropout masks over the t GPUs too.", False)
    context_parallel: int = key(
        WHOLE, "GPUs cp that split each sequence (context parallelism: ring attention).", 1, at_least=1
    )
    data_parallel: int = key(WHOLE, "Data-parallel replicas (for zero).", 1, at_least=1)
    expert_parallel: int = key(
        WHOLE,
        "GPUs EP that split the routed experts (expert parallelism), out of the data-parallel replicas.",
        1,
        at_least=1,
    )
    zero: int = key(
        WHOLE,
        "What is sharded over the data-parallel replicas (the ZeRO stage): 0 nothing, 1 the optimizer state "
        "(Megatron's distributed optimizer), 2 and the gradients, 3 and the weights (FSDP).",
        0,
        at_least=0,
        at_most=3,
    )
    overlap_grad_reduce: bool = key(
        FLAG, "Overlap the data-parallel gradient reduction with the backward (Megatron, FSDP).", True
    )
    overlap_tp_comm: bool = key(
        FLAG,
        "Overlap B's tensor-parallel reduction of a block's input gradient with its weight-gradient GEMM "
        "(Megatron's asynchronous tensor-parallel communication).",
        False,
    )
    scatter_gather_p2p: bool = key(
        FLAG,
        "Without sequence parallelism, send a 1/t slice of a stage's activation over the pipeline link and "
        "all-gather it among the t GPUs (Megatron's scatter/gather; DeepSpeed's pipeline engine sends it whole).",
        True,
    )
    overlap_param_gather: bool = key(
        FLAG,
        "Overlap the all-gathers of sharded weights with the compute (ZeRO 1 and 2: the next iteration's "
        "first forward; 3: each F and B).",
        True,
    )
    weight_bytes: float = key(NUMBER, "Bytes per weight.", 2.0, above=0)
    grad_bytes: float = key(NUMBER, "Bytes per gradient.", 4.0, at_least=0)
    optimizer_bytes: float = key(
        NUMBER, "Optimizer bytes per parameter (Adam: master weights, two moments).", 12.0, at_least=0
    )


MOE_KEYS = ("experts", "top_k", "shared_experts", "expert_ffn_hidden", "dense_layers")
"""The `Transformer` keys of a mixture of experts (`pipesat profile` builds dense layers: it takes the others)."""
DENSE_KEYS = tuple(name for name in keys(Transformer) if name not in MOE_KEYS)

ZB_PAPER_TRAINING = Training(flash_attention=False, causal=False, dropout=True)
"""The layer of the ZB paper's formulas: attention scores kept, no causal saving, dropout masks."""


@dataclass(frozen=True)
class Hardware(Keyed):
    """One GPU: a type of the catalogue (`gpus`) or its peak TFLOP/s and the fraction reached, the
    pipeline link, the tensor-parallel and context-parallel links (bandwidth 0: not timed), the
    data-parallel link (0: ZeRO-3's exchanges in the ops are not timed), the GPU memory's bandwidth
    and size (0: no budgets). A `gpu` fills the keys left out (`HARDWARE_FROM_GPU`)
    and, without an `efficiency`, times the work by its shape (`roofline`)."""

    tflops: float = key(
        NUMBER, "Peak throughput of one GPU (default: the gpu's bf16 peak).", None, unit="TFLOP/s", above=0
    )
    gpu: str | None = key(
        Word(GPU_NAMES),
        "A GPU of the catalogue: fills the hardware keys not given, and times each GEMM by its shape unless "
        "efficiency is given.",
        None,
    )
    efficiency: float | None = key(NUMBER, "The fraction of peak throughput reached.", None, above=0, at_most=1)
    bandwidth: float = key(
        NUMBER, "The pipeline link, one GPU's share (default: the gpu's network, else 50).", None, unit="GB/s", above=0
    )
    latency: float = key(NUMBER, "The pipeline link's latency.", 10.0, unit="µs", at_least=0)
    tp_bandwidth: float = key(
        NUMBER,
        "The tensor-parallel link, to time its collectives (default: the gpu's NVLink, else 0: not timed).",
        None,
        unit="GB/s",
        at_least=0,
    )
    tp_latency: float = key(
        NUMBER,
        "The tensor-parallel link's latency a ring step (default: the gpu's NVLink's, else as latency).",
        unit="µs",
        at_least=0,
        default_from="latency",
    )
    cp_bandwidth: float = key(
        NUMBER,
        "The context-parallel link, to time ring attention's exchange (default: as tp_bandwidth).",
        unit="GB/s",
        at_least=0,
        default_from="tp_bandwidth",
    )
    cp_latency: float = key(
        NUMBER,
        "The context-parallel link's latency a ring step (default: as tp_latency).",
        unit="µs",
        at_least=0,
        default_from="tp_latency",
    )
    dp_bandwidth: float = key(
        NUMBER,
        "The data-parallel link, to time ZeRO-3's gathers and reductions in the ops (default: the gpu's network, "
        "else 0: not timed).",
        None,
        unit="GB/s",
        at_least=0,
    )
    dp_latency: float = key(
        NUMBER,
        "The data-parallel link's latency (default: the pipeline link's).",
        unit="µs",
        at_least=0,
        default_from="latency",
    )
    ep_bandwidth: float = key(
        NUMBER,
        "The expert-parallel link, to time the experts' all-to-all (default: as dp_bandwidth).",
        unit="GB/s",
        at_least=0,
        default_from="dp_bandwidth",
    )
    ep_latency: float = key(
        NUMBER,
        "The expert-parallel link's latency a step (default: as dp_latency).",
        unit="µs",
        at_least=0,
        default_from="dp_latency",
    )
    memory_bandwidth: float = key(
        NUMBER,
        "The GPU memory's bandwidth: elementwise work, memory-bound GEMMs and the optimizer step "
        "(default: the gpu's, else an A100-40GB's 1555).",
        None,
        unit="GB/s",
        above=0,
    )
    gpu_memory: float = key(
        AMOUNT,
        "Memory of one GPU; given, each device's activation budget becomes its memory limit (default: the gpu's).",
        None,
        at_least=0,
    )
    reserve: float = key(SHARE, "Kept back from each GPU's memory: a percentage or an amount.", 0.1, at_least=0)

    def __post_init__(self) -> None:
        fill_from_gpu(self, self.gpu, HARDWARE_FROM_GPU, HARDWARE_WITHOUT_GPU)
        super().__post_init__()


HARDWARE_FROM_GPU = {
    "tflops": "bf16_tflops",
    "bandwidth": "network",
    "tp_bandwidth": "nvlink",
    "tp_latency": "nvlink_latency",
    "dp_bandwidth": "network",
    "memory_bandwidth": "memory_bandwidth",
    "gpu_memory": "memory",
}
"""The `Hardware` keys a `gpu` fills when they are not given, from its catalogue fields."""
HARDWARE_WITHOUT_GPU = {
    "efficiency": 0.5,
    "bandwidth": 50.0,
    "tp_bandwidth": 0.0,
    "dp_bandwidth": 0.0,
    "memory_bandwidth": 1555.0,
    "gpu_memory": 0.0,
}
"""What those keys (and `efficiency`) are without a `gpu`: today's flat model, collectives not timed."""


def fill_from_gpu(
    record: Keyed, name: str | None, from_gpu: Mapping[str, str], without_gpu: Mapping[str, float]
) -> None:
    """Give each key of `record` left at None the catalogue field `from_gpu[key]` of its GPU `name`,
    or without a GPU its value in `without_gpu`; raise one line for a key that neither fills (`tflops`
    without a gpu). Keys left at None that take another key's value (`default_from`) are left to
    `Keyed`."""
    declared = keys(type(record))
    values = dict(without_gpu)
    if name is not None:
        declared["gpu"].check(name, "gpu")
        values = {field: getattr(CATALOGUE[name], entry) for field, entry in from_gpu.items()}
    for field, value in values.items():
        if getattr(record, field) is None:
            object.__setattr__(record, field, value)
    for field in from_gpu:
        if getattr(record, field) is None and not declared[field].default_from:
            raise InstanceError(f"{field} is missing; give it, or gpu: one of {', '.join(GPU_NAMES)}")


@dataclass(frozen=True)
class Pipeline(Keyed):
    """How the model is cut: p devices, v chunks each, m microbatches, and optionally the layers per
    stage (or `balance` to choose them)."""

    devices: int = key(WHOLE, "Pipeline devices p.", short="-p", at_least=1)
    microbatches: int = key(WHOLE, "Microbatches m per iteration.", short="-m", at_least=1)
    chunks: int = key(WHOLE, "Stages (chunks) per device v.", 1, at_least=1)
    placement: str | None = key(
        TEXT,
        "linear, interleaved, vshape or bidirectional (DualPipe: two copies of p stages; chunks 2) (default: "
        "linear, or interleaved with chunks).",
        None,
    )
    layers_per_stage: tuple[int, ...] | None = key(
        Wholes(), "Explicit layer counts, one per stage (p x chunks), for uneven splits.", None, at_least=0
    )
    balance: bool = key(FLAG, "Choose the layers per stage that make the slowest stage fastest.", False)


@dataclass(frozen=True)
class Cost:
    """Of one GPU: the FLOPs of the three passes, the memory (bytes) held from F to B (M_B) and from B
    to W (M_W), the exposed tensor-, context- and expert-parallel communication (ms) in F and in B, of
    which `forward_a2a_ms` and `backward_a2a_ms` are the experts' all-to-all (what an overlapped pair
    can hide), and the compute time (ms) of each pass, of which `recompute_ms` is the part of B that
    recomputes."""

    forward_flops: float
    backward_flops: float
    weight_flops: float
    activation_bytes: float
    weight_bytes: float
    forward_comm_ms: float = 0.0
    backward_comm_ms: float = 0.0
    forward_ms: float = 0.0
    backward_ms: float = 0.0
    weight_ms: float = 0.0
    recompute_ms: float = 0.0
    forward_a2a_ms: float = 0.0
    backward_a2a_ms: float = 0.0

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
    """One stage: its layer count (of which `moe_layers` mixture-of-experts), whether it holds the
    embedding or the head, and its total cost."""

    layers: int
    has_embedding: bool
    has_head: bool
    cost: Cost
    moe_layers: int = 0


@dataclass(frozen=True)
class Mlp:
    """One MLP of a layer as one GPU runs it: `tokens` rows through it (the microbatch's n, or its n·k
    routed copies), its width, and `groups` equal GEMMs the rows are split into (a GPU's E/EP
    experts, each with its share of the routed tokens, balanced). `label` names its GEMMs and, but
    for the dense MLP, prefixes its tensors' names."""

    label: str
    tokens: float
    width: int
    groups: int = 1

    @property
    def prefix(self) -> str:
        return "" if self.label == DENSE_MLP else f"{self.label}: "


DENSE_MLP = "MLP"
ROUTED = "routed experts"


def layer_mlps(model: Transformer, tokens: float, experts_per_gpu: int) -> list[Mlp]:
    """A layer's MLPs for `tokens` tokens: the dense MLP, or the routed experts (each token to top_k
    of them, `experts_per_gpu` on one GPU) and the shared experts (every token, one MLP of their
    joint width)."""
    if not model.moe:
        return [Mlp(DENSE_MLP, tokens, model.mlp_width)]
    mlps = [Mlp(ROUTED, tokens * model.top_k, model.expert_width, experts_per_gpu)]
    if model.shared_experts:
        mlps.append(Mlp("shared experts", tokens, model.shared_experts * model.expert_width))
    return mlps


def gpu_mlps(model: Transformer, training: Training) -> list[Mlp]:
    """A layer's MLPs on one GPU: its n tokens, its E/EP experts."""
    return layer_mlps(model, local_tokens(model, training), model.experts // training.expert_parallel)


def linear_flops(model: Transformer) -> float:
    """L: the matmul FLOPs of one layer's forward (QKV, attention output, MLP), on one GPU without TP;
    of a mixture-of-experts layer, its top_k routed and its shared experts a token, and the router."""
    n, h = model.tokens, model.hidden
    mlp = sum((6 if model.swiglu else 4) * mlp.tokens * h * mlp.width for mlp in layer_mlps(model, n, model.experts))
    return 2 * n * h * (h + 2 * model.kv_width) + 2 * n * h * h + mlp + 2 * n * h * model.experts


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
    n, h, bpv = local_tokens(model, training), model.hidden, training.bytes_per_value
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
    if model.moe:
        tensors.append(Tensor("router probabilities (fp32)", n * model.experts, 4, sharded=False))
    for mlp in gpu_mlps(model, training):
        rows, width, name = mlp.tokens, mlp.width, mlp.prefix
        if mlp.label == ROUTED:
            # The dispatched copies enter the experts; the experts' outputs are kept for the combine's
            # backward (the gradient of each token's routing weight is its gradient times them).
            tensors.append(Tensor(f"{name}input (the dispatched tokens)", rows * h, bpv, sharded=False))
            tensors.append(Tensor(f"{name}outputs (for the combine's backward)", rows * h, bpv, sharded=False))
        if model.swiglu:
            tensors += [
                Tensor(f"{name}gate and up outputs", 2 * rows * width, bpv, sharded=True),
                Tensor(f"{name}down projection input", rows * width, bpv, sharded=True),
            ]
        else:
            tensors += [
                Tensor(f"{name}GELU input", rows * width, bpv, sharded=True),
                Tensor(f"{name}GELU output (down projection input)", rows * width, bpv, sharded=True),
            ]
    if training.dropout:
        tensors.append(Tensor("MLP dropout mask", n * h, MASK_BYTES, sharded=False))
    return tensors


def weight_gradient_inputs(model: Transformer, training: Training) -> list[Tensor]:
    """What one layer's W needs after its B: each weight matmul's input and its output's gradient (the
    router's and the shared experts' input is the MLP input; the routed experts' the dispatched tokens)."""
    n, h, bpv = local_tokens(model, training), model.hidden, training.bytes_per_value
    tensors = [
        Tensor("QKV input", n * h, bpv, sharded=False),
        Tensor("QKV output gradient", n * (h + 2 * model.kv_width), bpv, sharded=True),
        Tensor("output projection input", n * h, bpv, sharded=True),
        Tensor("output projection output gradient", n * h, bpv, sharded=False),
        Tensor("MLP input", n * h, bpv, sharded=False),
    ]
    if model.moe:
        tensors.append(Tensor("router output gradient", n * model.experts, bpv, sharded=False))
    for mlp in gpu_mlps(model, training):
        rows, name = mlp.tokens, mlp.prefix
        if mlp.label == ROUTED:
            tensors.append(Tensor(f"{name}input (the dispatched tokens)", rows * h, bpv, sharded=False))
        up = (2 if model.swiglu else 1) * rows * mlp.width
        tensors += [
            Tensor(f"{name}up projection output gradient", up, bpv, sharded=True),
            Tensor(f"{name}down projection input", rows * mlp.width, bpv, sharded=True),
            Tensor(f"{name}down projection output gradient", rows * h, bpv, sharded=False),
        ]
    return tensors


def held_bytes(tensors: list[Tensor], training: Training) -> float:
    return sum(tensor.bytes_per_gpu(training) for tensor in tensors)


def local_tokens(model: Transformer, training: Training) -> float:
    """n on one GPU: the s·b tokens of a microbatch, a cp-th of them with context parallelism."""
    return model.tokens / training.context_parallel


def layer_gemms(model: Transformer, training: Training) -> tuple[Gemm, ...]:
    """One layer's matmuls in F on one GPU, as (tokens, outputs, inputs): the QKV projection and the
    MLP's up (and gate) projection split their outputs over the t GPUs, the attention output and the
    MLP's down projection their inputs (Megatron's column- then row-parallel pairs)."""
    n, h, t = local_tokens(model, training), model.hidden, training.tensor_parallel
    gemms = [
        Gemm(n, (h + 2 * model.kv_width) / t, h, "QKV projection"),
        Gemm(n, h, h / t, "attention output projection"),
    ]
    if model.moe:
        gemms.append(Gemm(n, model.experts, h, "router"))
    for mlp in gpu_mlps(model, training):
        rows, up = mlp.tokens / mlp.groups, (2 if model.swiglu else 1) * mlp.width
        gemms += [
            Gemm(
                rows,
                up / t,
                h,
                f"{mlp.label} gate and up projections" if model.swiglu else f"{mlp.label} up projection",
            ),
            Gemm(rows, h, mlp.width / t, f"{mlp.label} down projection"),
        ] * mlp.groups
    return tuple(gemms)


def elementwise_traffic(model: Transformer, training: Training) -> list[Tensor]:
    """What one layer's F reads and writes outside its GEMMs and attention. The norms and residual
    adds work on whole n·h activations, which every tensor-parallel GPU repeats unless sequence
    parallelism splits them; the MLP's activation and the rotary embedding work on split tensors."""
    n, h, bpv = local_tokens(model, training), model.hidden, training.bytes_per_value
    tensors = [
        Tensor("two norms: n·h read and written each", 4 * n * h, bpv, sharded=False),
        Tensor("two residual adds: 2n·h read and n·h written each", 6 * n * h, bpv, sharded=False),
    ]
    for mlp in gpu_mlps(model, training):
        activation = "MLP activation: SwiGLU's gate and up read, product written" if model.swiglu else "GELU"
        tensors.append(
            Tensor(
                f"{mlp.prefix}{activation}{'' if model.swiglu else ': read and written'}",
                (3 if model.swiglu else 2) * mlp.tokens * mlp.width,
                bpv,
                sharded=True,
            )
        )
    if model.moe:
        # Permute: the n tokens read, their n·k copies written in expert order; unpermute: read back,
        # weighted and summed into n.
        copies = n * model.top_k
        tensors.append(Tensor("token permutation and its inverse", 2 * (n + copies) * h, bpv, sharded=False))
    tensors.append(
        Tensor("rotary embedding: queries and keys read and written", 2 * n * (h + model.kv_width), bpv, sharded=True)
    )
    return tensors


def score_traffic(model: Transformer, training: Training) -> list[Tensor]:
    """What the attention's elementwise kernels read and write when the a·s x s scores are made
    (without flash attention, which keeps them on chip): the fused scale, mask and softmax read the
    scores and write the probabilities; dropout reads them and writes the dropped-out scores and the
    mask. Causal or not, the whole score matrix is computed and masked."""
    if training.flash_attention:
        return []
    scores = model.heads * model.seq_len * local_tokens(model, training)
    bpv = training.bytes_per_value
    tensors = [Tensor("attention scores: scale, mask and softmax read and write them", 2 * scores, bpv, sharded=True)]
    if training.dropout:
        tensors += [
            Tensor("score dropout: scores read, dropped-out scores written", 2 * scores, bpv, sharded=True),
            Tensor("score dropout mask written", scores, MASK_BYTES, sharded=True),
        ]
    return tensors


@dataclass(frozen=True)
class Passes:
    """The work of a layer (or the head) on one GPU: F, B without recomputation, W, and what B
    recomputes first."""

    forward: Work
    backward: Work
    weight: Work
    recompute: Work


def layer_passes(model: Transformer, training: Training) -> Passes:
    """One layer's work per pass (docs/cost-model.md): F its GEMMs, attention and elementwise kernels;
    B each GEMM's input gradient, the attention's backward (2S, and S/2 more where flash attention
    recomputes QKᵀ) and the elementwise backward; W each GEMM's weight gradient."""
    gemms = layer_gemms(model, training)
    scores = score_flops(model, training) / (training.tensor_parallel * training.context_parallel)
    score_bytes = held_bytes(score_traffic(model, training), training)
    elementwise = held_bytes(elementwise_traffic(model, training), training) + score_bytes
    forward = Work(gemms, scores, elementwise)
    backward = Work(
        tuple(gemm.input_gradient() for gemm in gemms),
        (2.5 if training.flash_attention else 2) * scores,
        BACKWARD_ELEMENTWISE * elementwise,
    )
    weight = Work(tuple(gemm.weight_gradient() for gemm in gemms))
    return Passes(forward, backward, weight, recomputed(forward, score_bytes, training))


def recomputed(forward: Work, score_bytes: float, training: Training) -> Work:
    """What B runs again before its own work: the whole forward (full), the attention core and its
    scores' elementwise kernels (selective, without flash attention, which recomputes it anyway),
    else nothing."""
    if training.recompute == "full":
        return forward
    if training.recompute == "selective" and not training.flash_attention:
        return Work(attention_flops=forward.attention_flops, elementwise_bytes=score_bytes)
    return Work()


def head_passes(model: Transformer, training: Training) -> Passes:
    """The output head's work: one (tokens, V/t, h) GEMM a pass, and the loss's elementwise kernels,
    which read the logits and write their fp32 softmax in F, and read it and write the logits'
    gradient in B."""
    n, t = local_tokens(model, training), training.tensor_parallel
    gemm = Gemm(n, model.vocab / t, model.hidden, "output head")
    loss = held_bytes(
        [Tensor("cross entropy", n * model.vocab, training.bytes_per_value + LOSS_BYTES, sharded=True)], training
    )
    forward, backward = Work((gemm,), 0.0, loss), Work((gemm.input_gradient(),), 0.0, loss)
    return Passes(forward, backward, Work((gemm.weight_gradient(),)), recompute=Work())


def roofline(hardware: Hardware) -> Roofline | None:
    """The GPU the shape model times work on: the catalogue's `gpu` at the hardware's peak and memory
    bandwidth; None where the work is timed flat (an efficiency given, or no gpu)."""
    if hardware.efficiency is not None or hardware.gpu is None:
        return None
    gpu = CATALOGUE[hardware.gpu]
    return Roofline(hardware.tflops, hardware.memory_bandwidth, gpu.sms, gpu.gemm_efficiency, gpu.attention_efficiency)


def pass_ms(work: Work, training: Training, hardware: Hardware) -> float:
    """A pass's compute time in ms: by shape on the GPU's roofline, or its FLOPs at the flat rate."""
    gpu = roofline(hardware)
    if gpu is not None:
        return work.ms(training.bytes_per_value, gpu)
    return work.flops / effective_flops_per_ms(hardware)


def compute(passes: Passes, training: Training, hardware: Hardware) -> dict[str, float]:
    """The `Cost` fields of the passes' compute: FLOPs and times, B's including what it recomputes."""
    recompute_ms = pass_ms(passes.recompute, training, hardware)
    return {
        "forward_flops": passes.forward.flops,
        "backward_flops": passes.backward.flops + passes.recompute.flops,
        "weight_flops": passes.weight.flops,
        "forward_ms": pass_ms(passes.forward, training, hardware),
        "backward_ms": pass_ms(passes.backward, training, hardware) + recompute_ms,
        "weight_ms": pass_ms(passes.weight, training, hardware),
        "recompute_ms": recompute_ms,
    }


def tensor_parallel_ms(collective: Collective, model: Transformer, training: Training, hardware: Hardware) -> float:
    """One collective of a microbatch's n·h activation among the t GPUs over their link, in ms; 0
    when the link is not timed."""
    if hardware.tp_bandwidth <= 0:
        return 0.0
    size = local_tokens(model, training) * model.hidden * training.bytes_per_value
    link = Link(hardware.tp_bandwidth, hardware.tp_latency)
    return collective_ms(collective, size, training.tensor_parallel, link)


def block_exchange_ms(model: Transformer, training: Training, hardware: Hardware) -> float:
    """What the attention or the MLP block exchanges in a pass: the all-reduce of its row-parallel
    output (F) or of its column-parallel input's gradient (B), or with sequence parallelism an
    all-gather and a reduce-scatter, which move the same bytes."""
    collectives: tuple[Collective, ...] = (Collective.ALL_REDUCE,)
    if training.sequence_parallel:
        collectives = (Collective.ALL_GATHER, Collective.REDUCE_SCATTER)
    return sum(tensor_parallel_ms(collective, model, training, hardware) for collective in collectives)


def backward_exchange_ms(model: Transformer, training: Training, hardware: Hardware) -> float:
    """B's tensor-parallel collectives of a layer's two blocks, in ms. Each block reduces its
    column-parallel input's gradient (all-reduce, or reduce-scatter with sequence parallelism); with
    `overlap_tp_comm` that runs beside the block's column-parallel weight-gradient GEMMs (the QKV
    projection's; the MLP's up or gate and up projections'), as Megatron's asynchronous communication
    does, and shows only beyond them. Sequence parallelism's all-gather of the row-parallel output's
    gradient, which B needs first, stays exposed."""
    if not training.overlap_tp_comm:
        return 2 * block_exchange_ms(model, training, hardware)
    parallel = training.sequence_parallel
    reduce = tensor_parallel_ms(
        Collective.REDUCE_SCATTER if parallel else Collective.ALL_REDUCE, model, training, hardware
    )
    gather = tensor_parallel_ms(Collective.ALL_GATHER, model, training, hardware) if parallel else 0.0
    gemms = layer_gemms(model, training)
    blocks = [
        [gemm for gemm in gemms if gemm.name == "QKV projection"],
        [gemm for gemm in gemms if gemm.name.endswith("up projections") or gemm.name.endswith("up projection")],
    ]
    hidden = [pass_ms(Work(tuple(gemm.weight_gradient() for gemm in block)), training, hardware) for block in blocks]
    return sum(gather + max(0.0, reduce - under) for under in hidden)


def kv_exchange_ms(model: Transformer, training: Training, hardware: Hardware) -> float:
    """Ring attention's exchange in F: in cp-1 steps each GPU passes on its keys and values (2·g·d/t
    values a token of its n tokens) around the cp GPUs, an all-gather's ring, in ms; 0 without
    context parallelism or when its link is not timed."""
    if hardware.cp_bandwidth <= 0:
        return 0.0
    cp = training.context_parallel
    shard = 2 * local_tokens(model, training) * model.kv_width / training.tensor_parallel * training.bytes_per_value
    return collective_ms(Collective.ALL_GATHER, cp * shard, cp, Link(hardware.cp_bandwidth, hardware.cp_latency))


def exposed_ms(communication: float, attention_flops: float, training: Training, hardware: Hardware) -> float:
    """The part of ring attention's exchange that the attention computed meanwhile does not hide."""
    return max(0.0, communication - pass_ms(Work(attention_flops=attention_flops), training, hardware))


def all_to_all_ms(model: Transformer, training: Training, hardware: Hardware) -> float:
    """One all-to-all of a mixture-of-experts layer among the EP GPUs over their link, in ms: each
    token's hidden vector to (or back from) its top_k experts, n·k·h values (a t-th of them with
    sequence parallelism), (EP-1)/EP of it leaving the GPU; 0 for a dense layer, EP = 1 or a link not
    timed."""
    if not model.moe or hardware.ep_bandwidth <= 0:
        return 0.0
    size = model.top_k * activation_message_bytes(model, training)
    link = Link(hardware.ep_bandwidth, hardware.ep_latency)
    return collective_ms(Collective.ALL_TO_ALL, size, training.expert_parallel, link)


def layer_comm_ms(
    model: Transformer, training: Training, hardware: Hardware, passes: Passes
) -> tuple[float, float, float, float]:
    """One layer's exposed communication in F and in B, and of them the experts' all-to-all, in ms:
    two tensor-parallel block exchanges a pass, ring attention's exchange beyond the attention it
    overlaps (B passes the keys and values and their gradients, twice F's bytes), and a
    mixture-of-experts layer's dispatch and combine (two all-to-alls in F, their two mirrors in B).
    Full recomputation runs F's communication again in B."""
    ring = kv_exchange_ms(model, training, hardware)
    a2a = 2 * all_to_all_ms(model, training, hardware)
    forward = 2 * block_exchange_ms(model, training, hardware)
    forward += exposed_ms(ring, passes.forward.attention_flops, training, hardware) + a2a
    backward = backward_exchange_ms(model, training, hardware)
    backward += exposed_ms(2 * ring, passes.backward.attention_flops, training, hardware) + a2a
    again = training.recompute == "full"
    return forward, backward + (forward if again else 0.0), a2a, a2a * (2 if again else 1)


def layer_cost(model: Transformer, training: Training, hardware: Hardware) -> Cost:
    """One transformer layer on one GPU (see the module notes)."""
    passes = layer_passes(model, training)
    activation = held_bytes(layer_activations(model, training), training)
    # W frees at most what F allocated (the memory model's rule); with full recomputation B makes
    # more than F kept, which this caps (docs/cost-model.md says so).
    weight = min(held_bytes(weight_gradient_inputs(model, training), training), activation)
    forward_comm, backward_comm, forward_a2a, backward_a2a = layer_comm_ms(model, training, hardware, passes)
    return Cost(
        activation_bytes=activation,
        weight_bytes=weight,
        forward_comm_ms=forward_comm,
        backward_comm_ms=backward_comm,
        forward_a2a_ms=forward_a2a,
        backward_a2a_ms=backward_a2a,
        **compute(passes, training, hardware),
    )


def embedding_cost(model: Transformer, training: Training, hardware: Hardware) -> Cost:
    """The embedding lookup on the first stage, memory-bound, timed by the shape model only (the flat
    model counts FLOPs, and a lookup has none): F reads the n looked-up rows of h and writes them, and
    its vocabulary-parallel output is all-reduced over the t GPUs (reduce-scattered with sequence
    parallelism); B adds the output's gradient into those rows of the table's gradient (gathering it
    first with sequence parallelism). The table's gradient is B's: W has nothing left to do."""
    if roofline(hardware) is None or model.vocab == 0:
        return NO_COST
    n, h, bpv = local_tokens(model, training), model.hidden, training.bytes_per_value
    forward = Work(elementwise_bytes=2 * n * h * bpv)
    backward = Work(elementwise_bytes=n * h * (bpv + 2 * training.grad_bytes))
    parallel = training.sequence_parallel
    reduce = Collective.REDUCE_SCATTER if parallel else Collective.ALL_REDUCE
    gather = tensor_parallel_ms(Collective.ALL_GATHER, model, training, hardware) if parallel else 0.0
    return Cost(
        activation_bytes=0.0,
        weight_bytes=0.0,
        forward_comm_ms=tensor_parallel_ms(reduce, model, training, hardware),
        backward_comm_ms=gather,
        **compute(Passes(forward, backward, Work(), Work()), training, hardware),
    )


def head_cost(model: Transformer, training: Training, hardware: Hardware) -> Cost:
    """The output head (h x V matmul, vocabulary split over t) and the loss: its input and the logits
    held until B, its input and their gradient until W. Its column-parallel matmul gathers its input
    in F with sequence parallelism, and reduces its input's gradient in B."""
    n, h, vocab, bpv = local_tokens(model, training), model.hidden, model.vocab, training.bytes_per_value
    held = held_bytes(
        [Tensor("head input", n * h, bpv, sharded=False), Tensor("logits", n * vocab, bpv, sharded=True)], training
    )
    parallel = training.sequence_parallel
    gather = tensor_parallel_ms(Collective.ALL_GATHER, model, training, hardware) if parallel else 0.0
    reduce = Collective.REDUCE_SCATTER if parallel else Collective.ALL_REDUCE
    return Cost(
        activation_bytes=held,
        weight_bytes=held,
        forward_comm_ms=gather,
        backward_comm_ms=tensor_parallel_ms(reduce, model, training, hardware),
        **compute(head_passes(model, training), training, hardware),
    )


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
    widths = (("ffn_hidden", model.mlp_width),) + ((("expert_ffn_hidden", model.expert_width),) if model.moe else ())
    for what, count in (("heads", model.heads), ("kv_heads", kv_heads), *widths):
        if count % t:
            raise InstanceError(
                f"tensor parallelism {t} does not divide {what} {count}; choose a tensor-parallel degree that does"
            )
    if training.sequence_parallel and t == 1:
        raise InstanceError(
            "sequence parallelism splits over the tensor-parallel GPUs; give --tensor-parallel 2 or more"
        )
    cp = training.context_parallel
    if model.seq_len % cp:
        raise InstanceError(
            f"context parallelism {cp} does not divide seq_len {model.seq_len}; each GPU takes a cp-th of a sequence"
        )
    if training.sequence_parallel and model.seq_len // cp % t:
        share = f"seq_len {model.seq_len}" + (f" / context parallelism {cp}" if cp > 1 else "")
        raise InstanceError(f"sequence parallelism needs {share} divisible by tensor parallelism {t}")
    if training.recompute_layers and training.recompute != "full":
        raise InstanceError(
            f"recompute_layers counts layers recomputed in full, but recompute is {training.recompute}; "
            "give --recompute full, or drop --recompute-layers"
        )
    if training.zero and training.data_parallel == 1:
        raise InstanceError(
            f"ZeRO stage {training.zero} shards over data parallelism; give --data-parallel 2 or more, or --zero 0"
        )
    check_expert_parallel(model, training)


def check_expert_parallel(model: Transformer, training: Training) -> None:
    """Raise `InstanceError` when expert parallelism does not fit: it splits the experts, and its GPUs
    are data-parallel replicas (as Megatron-Core carves the expert-parallel group out of the
    data-parallel one), so EP divides both; ZeRO 3 of experts is not modelled."""
    ep, d = training.expert_parallel, training.data_parallel
    if not model.moe:
        if ep > 1:
            raise InstanceError(f"expert parallelism {ep} needs experts; give experts, or --expert-parallel 1")
        return
    if model.experts % ep:
        raise InstanceError(
            f"expert parallelism {ep} does not divide the {model.experts} experts; each GPU holds experts/EP of them"
        )
    if d % ep:
        raise InstanceError(
            f"expert parallelism {ep} does not divide data parallelism {d}; the expert-parallel GPUs are "
            "data-parallel replicas, give --data-parallel a multiple of it"
        )
    if training.zero == 3:
        raise InstanceError("ZeRO 3 with experts is not modelled; give --zero 0, 1 or 2")


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
    check_experts(model)


def check_experts(model: Transformer) -> None:
    """Raise `InstanceError` when the mixture-of-experts keys do not fit together: a dense model
    given expert keys, more experts a token than there are, no mixture-of-experts layer left."""
    if not model.moe:
        given = [name for name in ("shared_experts", "expert_ffn_hidden", "dense_layers") if getattr(model, name)]
        if given or model.top_k > 1:
            name = given[0] if given else "top_k"
            raise InstanceError(f"{name} is given but experts is 0 (a dense model); give experts, or leave {name} out")
        return
    if model.top_k > model.experts:
        raise InstanceError(
            f"top_k {model.top_k} is more than the {model.experts} experts; a token goes to top_k distinct experts"
        )
    if model.dense_layers >= model.layers:
        raise InstanceError(
            f"dense_layers {model.dense_layers} leaves none of the {model.layers} layers a mixture of experts; "
            "give fewer, or experts 0"
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


@dataclass(frozen=True)
class LayerCosts:
    """A layer's cost by kind, dense or mixture-of-experts (`NO_COST` without experts): `recomputed` as
    the training recomputes it, `kept` keeping its activations. With `recompute_layers` r > 0 a stage's
    first r layers are recomputed and the rest kept (Megatron's block method); with 0 every layer is."""

    model: Transformer
    recompute_layers: int
    recomputed: tuple[Cost, Cost]
    kept: tuple[Cost, Cost]

    def recomputed_count(self, count: int) -> int:
        """How many of a stage's `count` layers are recomputed."""
        return count if self.recompute_layers == 0 else min(self.recompute_layers, count)

    def stage(self, first: int, count: int) -> Cost:
        """The `count` layers of a stage from layer `first` on."""
        recomputed = self.recomputed_count(count)
        total = NO_COST
        for (dense, moe), start, n in (
            (self.recomputed, first, recomputed),
            (self.kept, first + recomputed, count - recomputed),
        ):
            dense_count, moe_count = self.model.layer_kinds(start, n)
            total = total.plus(dense, dense_count).plus(moe, moe_count)
        return total


def without_recomputation(training: Training) -> Training:
    """The training of a layer that `recompute_layers` keeps whole: no recomputation."""
    return replace(training, recompute="none", recompute_layers=0)


def layer_costs(model: Transformer, training: Training, hardware: Hardware, dense: Cost | None = None) -> LayerCosts:
    """The layers' costs; `dense` is one dense layer's cost when known otherwise (measured:
    `solver.instances.calibration`), else the model's."""
    kept = without_recomputation(training)

    def kinds(training: Training) -> tuple[Cost, Cost]:
        return layer_cost(model.dense(), training, hardware), (
            layer_cost(model, training, hardware) if model.moe else NO_COST
        )

    recomputed = kinds(training)
    if dense is not None:
        recomputed = (dense, recomputed[1])
    return LayerCosts(
        model, training.recompute_layers, recomputed, kinds(kept) if training.recompute_layers else recomputed
    )


def stage_costs(
    model: Transformer, training: Training, hardware: Hardware, split: tuple[int, ...], layer: Cost | None = None
) -> list[StageCost]:
    """Per-stage costs (FLOPs, times, memory) for `split` (layers per stage); the embedding on stage 0,
    the head and loss on the last stage; of a mixture-of-experts model, the first `dense_layers` dense;
    with `recompute_layers`, each stage's first layers recomputed (`LayerCosts`). `layer` is one dense
    layer's cost when known otherwise (measured: `solver.instances.calibration`), else the model's."""
    layers = layer_costs(model, training, hardware, layer)
    head = head_cost(model, training, hardware)
    last = len(split) - 1
    costs = []
    for s, count in enumerate(split):
        with_head = s == last and model.vocab > 0
        first = sum(split[:s])
        _, moe_count = model.layer_kinds(first, count)
        cost = (head if with_head else NO_COST).plus(layers.stage(first, count))
        if s == 0:
            cost = cost.plus(embedding_cost(model, training, hardware))
        forward, backward, _ = stage_times(cost)
        if forward <= 0 or backward <= 0:
            what = "the embedding lookup, which only a gpu's shape model times" if s == 0 else "nothing"
            raise InstanceError(
                f"stage {s} has 0 layers and only {what}, so it does no work; give it at least one layer"
            )
        costs.append(StageCost(count, s == 0, with_head, cost, moe_count))
    return costs


def stage_times(cost: Cost) -> tuple[float, float, float]:
    """F, B and W of a stage in ms: its compute, plus its exposed communication in F and B."""
    return (
        cost.forward_ms + cost.forward_comm_ms,
        cost.backward_ms + cost.backward_comm_ms,
        cost.weight_ms,
    )


def effective_flops_per_ms(hardware: Hardware) -> float:
    """The flat model's rate: the peak times the efficiency reached, in FLOP a ms."""
    assert hardware.efficiency is not None, "the shape model (a gpu, no efficiency) has no flat rate"
    return hardware.tflops * 1e12 * hardware.efficiency / 1e3


def activation_message_bytes(model: Transformer, training: Training) -> float:
    """What one microbatch sends between stages on each GPU: its n·h activation (or its gradient),
    a 1/t shard of it with sequence parallelism."""
    shard = training.tensor_parallel if training.sequence_parallel else 1
    return local_tokens(model, training) * model.hidden * training.bytes_per_value / shard


def scatters_p2p(training: Training) -> bool:
    """Whether a stage's activation goes over the pipeline link as t slices gathered on arrival:
    `scatter_gather_p2p` without sequence parallelism (which already holds a 1/t slice), at t > 1."""
    return training.scatter_gather_p2p and training.tensor_parallel > 1 and not training.sequence_parallel


def p2p_time(model: Transformer, training: Training, hardware: Hardware) -> float:
    """Latency plus one microbatch's activation over the link, in ms. When it `scatters_p2p` each of
    the t GPUs sends a 1/t slice and the receivers all-gather it over the tensor-parallel link (when it
    is timed)."""
    message = activation_message_bytes(model, training)
    gather_ms = 0.0
    if scatters_p2p(training):
        gather_ms = tensor_parallel_ms(Collective.ALL_GATHER, model, training, hardware)
        message /= training.tensor_parallel
    return hardware.latency / 1e3 + message / (hardware.bandwidth * 1e9) * 1e3 + gather_ms


def significant(value: float) -> float:
    """Times keep 6 significant digits: the model is far less precise, and the files stay readable."""
    return float(f"{value:.6g}")
