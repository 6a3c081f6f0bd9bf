"""Data-parallel communication: what a device exchanges with its d replicas, and what of it compute hides.

Each device exchanges its own parameters' gradients (and, sharded, its weights) with the GPUs that
hold the same stages in the other replicas, as the frameworks do it:

- **ZeRO 0** (Megatron's DDP): the gradients are all-reduced after the last microbatch's backward.
- **ZeRO 1 and 2** (Megatron's distributed optimizer): they are reduce-scattered, each replica
  updates its shard, and the updated weights are all-gathered before the next forward.
- **ZeRO 3** (FSDP): each unit's weights (a layer, the embedding, the head) are all-gathered before
  its F and again before its B, and its gradients reduce-scattered after its W, every microbatch:
  these belong to the ops, so `sharded_op_ms` adds them to the instance's op times. FSDP's backward
  runs a unit's B and W as one, so the reduce-scatters hide under the whole backward (B + W).

With expert parallelism EP a device's routed experts are exchanged among the d/EP replicas that
hold the same experts, in their own buckets (first in the backward's order), the rest among all d.
Gradients move at `grad_bytes` a value, weights at `weight_bytes` (ZeRO 3 gathers at
`gathered_weight_bytes`, FSDP's param dtype); every collective is
`collectives.collective_ms` over the data-parallel group's link. ZeRO 0 to 2 exchange in buckets of
max(40M, 1M·d) parameters (Megatron-Core's default bucket size), filled in the order the backward
makes the gradients: from the last layer back, so the last bucket holds the first layers.

**Overlap** (`overlap_grad_reduce`, `overlap_param_gather`, both on by default as in Megatron and
FSDP): a communication stream runs beside the compute. A bucket's (a unit's) reduction is issued
when the compute that makes its gradients ends; the gather of the next one is issued when the
compute of one starts, so at most two are gathered at once (the prefetch ZeRO-3's memory counts).
The stream runs one collective at a time, in the order they are issued. The compute moves through
the parameters at an even pace (a unit's share of an op's time is its share of the parameters; the
embedding is a lookup and takes none). What is exposed is how much later the last compute or
collective ends than the compute alone: at least the last bucket's reduction (nothing is left to
hide it) and the first bucket's gather (nothing can start before it). The reduction of ZeRO 0 to 2
hides under the backward of the device's last microbatch (B + W over its stages), the gather under
the forward of its first; without overlap the whole exchange is exposed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from pipesat.solver.instances.collectives import Collective, Link, collective_ms
from pipesat.solver.instances.cost_model import StageCost, stage_times
from pipesat.solver.instances.description import Hardware, Training, Transformer
from pipesat.solver.instances.model_state import stage_units

BUCKET_PARAMETERS = 40_000_000
"""Megatron-Core's smallest default bucket, in parameters."""
BUCKET_PARAMETERS_PER_REPLICA = 1_000_000
"""Megatron-Core grows the bucket with the replicas (max(40M, 1M·d)) so that a collective over many
GPUs is not latency-bound."""


class Exchange(NamedTuple):
    """A data-parallel exchange: its collectives' whole time and what of it is exposed, in ms."""

    total_ms: float
    exposed_ms: float


NOTHING = Exchange(0.0, 0.0)


def buckets(parameters: float, data_parallel: int) -> list[float]:
    """A device's parameters as Megatron buckets them, in the order the backward fills them: full
    buckets, then what is left."""
    size = max(BUCKET_PARAMETERS, BUCKET_PARAMETERS_PER_REPLICA * data_parallel)
    full, rest = divmod(parameters, size)
    return [float(size)] * int(full) + ([rest] if rest > 0 else [])


def overlapped_ms(compute: Sequence[float], before: Sequence[float], after: Sequence[float]) -> float:
    """From the start of a run of units (ms of compute each) to the end of its last compute or
    collective, when unit i needs `before[i]` ms of collective done before its compute and issues
    `after[i]` ms after it, on one stream beside the compute (the module notes)."""
    stream = 0.0

    def issue(at: float, length: float) -> float:
        nonlocal stream
        if length <= 0:
            return at
        stream = max(stream, at) + length
        return stream

    ready = [0.0] * len(compute)
    if compute:
        ready[0] = issue(0.0, before[0])
    clock = 0.0
    for unit, work in enumerate(compute):
        start = max(clock, ready[unit])
        if unit + 1 < len(compute):
            ready[unit + 1] = issue(start, before[unit + 1])
        clock = start + work
        issue(clock, after[unit])
    return max(clock, stream)


def exchange(
    compute_ms: float, shares: Sequence[float], before: Sequence[float], after: Sequence[float], overlap: bool
) -> Exchange:
    """The collectives before and after each unit, hidden under `compute_ms` split over the units by
    `shares` when `overlap`, else all exposed."""
    total = sum(before) + sum(after)
    if not overlap or total == 0:
        return Exchange(total, total)
    whole = sum(shares)
    compute = [compute_ms * share / whole for share in shares] if whole > 0 else [0.0] * len(shares)
    return Exchange(total, overlapped_ms(compute, before, after) - sum(compute))


def replica_buckets(training: Training, parameters: float, experts: float) -> list[tuple[float, int]]:
    """(bucket, replicas) in the order the backward fills them: a device's routed-expert parameters
    (`experts` of its `parameters`; the last layers' experts come first) over their d/EP replicas,
    then the rest over all d. Megatron buckets the two groups apart."""
    d, ep = training.data_parallel, training.expert_parallel
    groups = [(experts, d // ep), (parameters - experts, d)]
    return [(bucket, replicas) for size, replicas in groups for bucket in buckets(size, replicas) if replicas > 1]


def gradient_reduction(
    training: Training, parameters: float, backward_ms: float, link: Link, experts: float = 0.0
) -> Exchange:
    """ZeRO 0 to 2: a device's gradients all-reduced (ZeRO 0) or reduce-scattered, bucket by bucket,
    behind its last microbatch's backward of `backward_ms`; the routed experts' (`experts` of the
    parameters) over their d/EP replicas. ZeRO 3 reduces in its ops instead."""
    if training.data_parallel == 1 or training.zero == 3:
        return NOTHING
    collective = Collective.ALL_REDUCE if training.zero == 0 else Collective.REDUCE_SCATTER
    filled = replica_buckets(training, parameters, experts)
    reduce = [collective_ms(collective, bucket * training.grad_bytes, group, link) for bucket, group in filled]
    sizes = [bucket for bucket, _ in filled]
    return exchange(backward_ms, sizes, [0.0] * len(filled), reduce, training.overlap_grad_reduce)


def weight_gather(
    training: Training, parameters: float, forward_ms: float, link: Link, experts: float = 0.0
) -> Exchange:
    """ZeRO 1 and 2: the updated weights all-gathered, bucket by bucket in the forward's order, before
    the first microbatch's forward of `forward_ms` needs them; the routed experts' over their d/EP
    replicas."""
    if training.data_parallel == 1 or training.zero not in (1, 2):
        return NOTHING
    filled = replica_buckets(training, parameters, experts)[::-1]
    gather = [
        collective_ms(Collective.ALL_GATHER, bucket * training.weight_bytes, group, link) for bucket, group in filled
    ]
    sizes = [bucket for bucket, _ in filled]
    return exchange(forward_ms, sizes, gather, [0.0] * len(filled), training.overlap_param_gather)


def sharded_op_ms(
    model: Transformer, training: Training, stage: StageCost, times: tuple[float, float, float], link: Link
) -> tuple[Exchange, Exchange, Exchange]:
    """ZeRO 3: a stage's exchanges a microbatch, beside its F, B and W of `times` (ms): the units'
    weights gathered before F (in the forward's order) and before B (the backward's), their gradients
    reduce-scattered after W. Nothing below ZeRO 3."""
    d = training.data_parallel
    if d == 1 or training.zero < 3:
        return NOTHING, NOTHING, NOTHING
    units = stage_units(model, training, stage)
    work = [0.0, *units[1:]] if stage.has_embedding else units
    gather = [collective_ms(Collective.ALL_GATHER, unit * training.gathered_weight_bytes, d, link) for unit in units]
    reduce = [collective_ms(Collective.REDUCE_SCATTER, unit * training.grad_bytes, d, link) for unit in units]
    none = [0.0] * len(units)
    forward, backward, weight = times
    on_backward = exchange(backward, work[::-1], gather[::-1], none, training.overlap_param_gather)
    if training.overlap_param_gather and training.overlap_grad_reduce:
        # A unit's gradients are reduce-scattered while the units before it run their B and W (FSDP's
        # backward runs a unit's B and W together): the backward's whole exchange hides under B + W,
        # and W exposes what B's gathers did not.
        whole = exchange(backward + weight, work[::-1], gather[::-1], reduce[::-1], True)
        on_weight = Exchange(sum(reduce), max(0.0, whole.exposed_ms - on_backward.exposed_ms))
    else:
        on_weight = exchange(weight, work[::-1], none, reduce[::-1], training.overlap_grad_reduce)
    return exchange(forward, work, gather, none, training.overlap_param_gather), on_backward, on_weight


def sharded_exchanges(
    model: Transformer, training: Training, hardware: Hardware, stages: Sequence[StageCost]
) -> list[tuple[Exchange, Exchange, Exchange]]:
    """ZeRO 3's exchanges of each stage beside its F, B and W, over the hardware's data-parallel link;
    none when that link's bandwidth is not given. `from_model` adds what they expose to the op times."""
    if hardware.dp_bandwidth <= 0:
        return [(NOTHING, NOTHING, NOTHING)] * len(stages)
    link = Link(hardware.dp_bandwidth, hardware.dp_latency)
    return [sharded_op_ms(model, training, stage, stage_times(stage.cost), link) for stage in stages]
