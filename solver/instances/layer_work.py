"""What one GPU computes and keeps of a transformer layer (and of the output head): its GEMMs, its
attention FLOPs and elementwise bytes per pass, and the tensors it holds.

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
replicas.

Each GEMM carries its `Matmul` (which of the layer's matmuls it is) and each MLP its `MlpKind`: the
cost model selects by those, and their names are for display only.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from pipesat.solver.instances.description import Training, Transformer
from pipesat.solver.instances.roofline import Gemm, Matmul, Work

MASK_BYTES = 1  # a dropout mask keeps one byte a value
LOSS_BYTES = 4
"""The loss computes the softmax of the logits in fp32 (Megatron's vocabulary-parallel cross entropy)."""
BACKWARD_ELEMENTWISE = 2
"""An elementwise kernel's backward moves about twice its forward's bytes: it reads the kept input and
the output's gradient and writes the input's gradient, where the forward read one and wrote one."""


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


class MlpKind(Enum):
    """Which MLP of a layer an `Mlp` is, what the cost model tells them apart by; the value is its
    label, for display only."""

    DENSE = "MLP"
    ROUTED = "routed experts"
    SHARED = "shared experts"


@dataclass(frozen=True)
class Mlp:
    """One MLP of a layer as one GPU runs it: which it is, `tokens` rows through it (the microbatch's
    n, or its n·k routed copies), its width, and `groups` equal GEMMs the rows are split into (a GPU's
    E/EP experts, each with its share of the routed tokens, balanced). Its `label` names its GEMMs
    and, but for the dense MLP, prefixes its tensors' names."""

    kind: MlpKind
    tokens: float
    width: int
    groups: int = 1

    @property
    def label(self) -> str:
        return self.kind.value

    @property
    def prefix(self) -> str:
        return "" if self.kind is MlpKind.DENSE else f"{self.label}: "


def layer_mlps(model: Transformer, tokens: float, experts_per_gpu: int) -> list[Mlp]:
    """A layer's MLPs for `tokens` tokens: the dense MLP, or the routed experts (each token to top_k
    of them, `experts_per_gpu` on one GPU) and the shared experts (every token, one MLP of their
    joint width)."""
    if not model.moe:
        return [Mlp(MlpKind.DENSE, tokens, model.mlp_width)]
    mlps = [Mlp(MlpKind.ROUTED, tokens * model.top_k, model.expert_width, experts_per_gpu)]
    if model.shared_experts:
        mlps.append(Mlp(MlpKind.SHARED, tokens, model.shared_experts * model.expert_width))
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
        if mlp.kind is MlpKind.ROUTED:
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
        if mlp.kind is MlpKind.ROUTED:
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
        Gemm(n, (h + 2 * model.kv_width) / t, h, "QKV projection", Matmul.QKV),
        Gemm(n, h, h / t, "attention output projection", Matmul.ATTENTION_OUTPUT),
    ]
    if model.moe:
        gemms.append(Gemm(n, model.experts, h, "router", Matmul.ROUTER))
    for mlp in gpu_mlps(model, training):
        rows, up = mlp.tokens / mlp.groups, (2 if model.swiglu else 1) * mlp.width
        gemms += [
            Gemm(
                rows,
                up / t,
                h,
                f"{mlp.label} gate and up projections" if model.swiglu else f"{mlp.label} up projection",
                Matmul.MLP_UP,
            ),
            Gemm(rows, h, mlp.width / t, f"{mlp.label} down projection", Matmul.MLP_DOWN),
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
    gemm = Gemm(n, model.vocab / t, model.hidden, "output head", Matmul.HEAD)
    loss = held_bytes(
        [Tensor("cross entropy", n * model.vocab, training.bytes_per_value + LOSS_BYTES, sharded=True)], training
    )
    forward, backward = Work((gemm,), 0.0, loss), Work((gemm.input_gradient(),), 0.0, loss)
    return Passes(forward, backward, Work((gemm.weight_gradient(),)), recompute=Work())
