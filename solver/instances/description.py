"""What a model description is made of: the transformer, how it is trained, its hardware and its pipeline.

Each is a record of keys (`solver.instances.keys`), each key checked alone when its record is made;
whether they fit together is `solver.instances.description_checks`'s. A `gpu` of the catalogue
(`solver.instances.gpus`) fills the hardware keys left out. `solver.instances.cost_model` turns a
description into each stage's cost.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from pipesat.models import InstanceError
from pipesat.models.limits import MAX_EXPERTS
from pipesat.models.training_modes import RECOMPUTE, Recompute, ZeroStage
from pipesat.solver.instances.gpus import CATALOGUE, GPU_NAMES
from pipesat.solver.instances.keys import Keyed, key, keys
from pipesat.solver.instances.value_kinds import AMOUNT, FLAG, NUMBER, SHARE, TEXT, WHOLE, Wholes, Word


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
    experts: int = key(
        WHOLE,
        "Routed experts E of a mixture-of-experts layer's MLP (0: a dense MLP).",
        0,
        at_least=0,
        at_most=MAX_EXPERTS,
    )
    top_k: int = key(WHOLE, "Routed experts each token goes to (with experts).", 1, at_least=1)
    shared_experts: int = key(
        WHOLE, "Experts every token goes to besides its routed ones (with experts).", 0, at_least=0, at_most=MAX_EXPERTS
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
    loss_bytes: float = key(
        NUMBER,
        "Bytes per value of the loss's softmax over the logits, kept for B (4: fp32, as Megatron's vocab-parallel "
        "cross entropy and torch's cross entropy of fp32 logits keep it).",
        None,
        at_least=0,
        default_from="bytes_per_value",
    )
    flash_attention: bool = key(FLAG, "Flash attention: the attention scores are recomputed in B, not kept.", True)
    causal: bool = key(FLAG, "Causal attention (flash attention skips the masked half).", True)
    dropout: bool = key(FLAG, "Count dropout masks (today's LLMs train without dropout).", False)
    recompute: Recompute = key(Word(RECOMPUTE), "Activation recomputation.", "none")
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
    zero: ZeroStage = key(
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
    gathered_weight_bytes: float = key(
        NUMBER,
        "Bytes per weight of a unit ZeRO 3 gathers to compute with (FSDP's mixed-precision param dtype: 2 with "
        "fp32 sharded weights).",
        None,
        above=0,
        default_from="weight_bytes",
    )
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
    and size (0: no budgets), and the host link activations are offloaded over (None: none). A `gpu`
    fills the keys left out (`HARDWARE_FROM_GPU`) and, without an `efficiency`, times the work by its
    shape (`roofline`). The host link is the gpu's only with `host_link`: an instance that has one is
    one a study offloads on (`pipesat pareto` gains its offload axis), so a gpu alone does not give it."""

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
    host_link: bool = key(
        FLAG,
        "Give each device a host link, so that a solve may offload its activations over it: host_link_bandwidth, "
        "or the gpu's (docs/offload.md).",
        False,
    )
    host_link_bandwidth: float | None = key(
        NUMBER,
        "Host link of each device, one direction, over which activations are offloaded; given, each device has "
        "it (default: with host_link, the gpu's: PCIe 4.0 x16 on A100, 5.0 x16 on the others; else none).",
        None,
        unit="GB/s",
        above=0,
    )

    def __post_init__(self) -> None:
        fill_from_gpu(self, self.gpu, HARDWARE_FROM_GPU, HARDWARE_WITHOUT_GPU)
        if self.host_link and self.host_link_bandwidth is None:
            if self.gpu is None:
                raise InstanceError(
                    "hardware.host_link needs its bandwidth; give hardware.host_link_bandwidth (GB/s a direction), "
                    "or hardware.gpu"
                )
            object.__setattr__(self, "host_link_bandwidth", CATALOGUE[self.gpu].host_link)
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
