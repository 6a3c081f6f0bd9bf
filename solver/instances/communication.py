"""The communication a layer exposes, and the pipeline's p2p time, in ms.

Tensor parallelism's collectives, ring attention's key/value exchange beyond the attention it hides
under, and a mixture-of-experts layer's all-to-alls among the EP GPUs, each when its link's
bandwidth is given (`solver.instances.collectives`). The p2p time is the link latency plus one
microbatch's activation (its 1/t shard with sequence parallelism) over the link.
"""

from __future__ import annotations

from pipesat.solver.instances.collectives import Collective, Link, collective_ms
from pipesat.solver.instances.description import Hardware, Training, Transformer
from pipesat.solver.instances.layer_work import Passes, layer_gemms, local_tokens
from pipesat.solver.instances.pass_times import pass_ms
from pipesat.solver.instances.roofline import Matmul, Work


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
        [gemm for gemm in gemms if gemm.matmul is Matmul.QKV],
        [gemm for gemm in gemms if gemm.matmul is Matmul.MLP_UP],
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
