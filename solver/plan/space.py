"""The configurations a plan considers, and each one's model description.

For every tensor-parallel degree t the spec allows (dividing the GPUs, within one node), every
pipeline depth p dividing GPUs/t, the data-parallel degree d = GPUs/(p·t), every placement (linear
with one chunk a device; interleaved and V with two, for p ≥ 2), and every microbatch size b
dividing the global batch's share of a replica, global_batch/d, that leaves m = global_batch/(d·b) ≥
p microbatches. The layers are split by `--balance` (the split that makes the slowest stage
fastest). A shape the cost model refuses (a stage without a layer, heads that t does not divide) is
left out with the reason; one whose model state does not fit is kept: it is refused by memory.

A few bytes of spec can ask for an endless search (`gpus: 2**63`), so every count that grows the work
is checked before any of it starts (`PlanLimits`): the GPUs, the global batch, the layers, the
configurations, and the ops of the largest pipeline (the instance and CP-SAT model caps of
`models.limits`). Each refusal is one line naming the cap and the option that raises it. Divisors
come from the prime factorisation (trial division up to the square root), never from trying every
number up to n.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import NamedTuple

from pipesat.models import InputError, InstanceError
from pipesat.models.limits import check_model_size, check_work
from pipesat.models.plan_result import Configuration
from pipesat.solver.instances.cost_model import Hardware, Pipeline, Training, check_model, check_training
from pipesat.solver.instances.from_model import Description
from pipesat.solver.plan.spec import PlanSpec

CHUNKS = {"linear": 1, "interleaved": 2, "vshape": 2}
KINDS = 3
"""Ops a microbatch has on a stage: an instance of the cost model splits the backward (F, B and W)."""


@dataclass(frozen=True)
class PlanLimits:
    """The most a plan takes on; each has a `pipesat plan` option of its name (`--max-gpus`)."""

    max_gpus: int = 1 << 20
    max_global_batch: int = 1 << 20
    max_layers: int = 10_000
    max_configurations: int = 10_000


class Space(NamedTuple):
    """The configurations to consider, in their total order, and a line for each shape left out."""

    configs: list[Configuration]
    skipped: list[str]


def divisors(n: int) -> list[int]:
    """The divisors of `n` (at least 1), ascending, made from its prime factors."""
    found = [1]
    for prime, power in _prime_factors(n):
        found = [divisor * prime**k for divisor in found for k in range(power + 1)]
    return sorted(found)


def _prime_factors(n: int) -> list[tuple[int, int]]:
    """`n` as (prime, power) pairs, by trial division up to its square root."""
    factors = []
    candidate = 2
    while candidate * candidate <= n:
        power = 0
        while n % candidate == 0:
            n, power = n // candidate, power + 1
        if power:
            factors.append((candidate, power))
        candidate += 1 if candidate == 2 else 2
    if n > 1:
        factors.append((n, 1))
    return factors


def check_limits(spec: PlanSpec, limits: PlanLimits) -> None:
    """Refuse, with one line naming the cap and its option, a spec whose counts exceed `limits`."""
    for key, value, cap, option in (
        ("cluster.gpus", spec.cluster.gpus, limits.max_gpus, "--max-gpus"),
        ("training.global_batch", spec.global_batch, limits.max_global_batch, "--max-global-batch"),
        ("model.layers", spec.model.layers, limits.max_layers, "--max-layers"),
    ):
        if value > cap:
            raise InputError(
                f"{key} {value:,} is more than the plan's limit of {cap:,}; check the spec, "
                f"or raise the limit with `pipesat plan {option} N`"
            )


def enumerate_space(spec: PlanSpec, limits: PlanLimits | None = None) -> Space:
    """The configurations to consider, in their total order, and a line for each shape left out;
    refused (one line) when the spec is beyond `limits`, the cost model refuses the model itself, or
    the largest pipeline has more ops than an instance or a CP-SAT model may have (`models.limits`)."""
    limits = limits or PlanLimits()
    check_limits(spec, limits)
    check_model(spec.model)
    gpus, cluster = spec.cluster.gpus, spec.cluster
    batch_divisors = divisors(spec.global_batch)
    sizes = None if spec.microbatch_sizes is None else set(spec.microbatch_sizes)
    found: list[Configuration] = []
    skipped: list[str] = []
    for t in spec.tensor_parallel:
        if gpus % t:
            skipped.append(f"t{t}: does not divide {gpus} GPUs")
            continue
        if t > cluster.gpus_per_node:
            skipped.append(f"t{t}: tensor parallelism stays within a node of {cluster.gpus_per_node} GPUs")
            continue
        try:
            check_training(spec.model, _training(spec, t, 1))
        except InstanceError as error:
            skipped.append(f"t{t}: {error}")
            continue
        for p in divisors(gpus // t):
            d = gpus // (t * p)
            if spec.global_batch % d:
                skipped.append(f"t{t} p{p} d{d}: {d} replicas do not divide the global batch {spec.global_batch}")
                continue
            per_replica = spec.global_batch // d
            for placement in spec.placements:
                v = CHUNKS[placement]
                if v > 1 and p == 1:
                    continue  # two chunks on one device is the linear pipeline cut in two
                if spec.model.layers < p * v:
                    skipped.append(f"t{t} p{p} {placement}: {spec.model.layers} layers cannot fill {p * v} stages")
                    continue
                for b in batch_divisors:
                    m = per_replica // b
                    if per_replica % b or m < p or (sizes is not None and b not in sizes):
                        continue
                    found.append(Configuration(t, p, d, v, placement, b, m))
                    if len(found) > limits.max_configurations:
                        raise InputError(
                            f"the plan has more than {limits.max_configurations:,} configurations; narrow "
                            "training.tensor_parallel, microbatch_sizes or placements, or raise the limit with "
                            "`pipesat plan --max-configurations N`"
                        )
    if found:
        _check_largest(max(found, key=_ops))
    return Space(sorted(found), skipped)


def _ops(config: Configuration) -> int:
    return config.pipeline * config.chunks * config.microbatches * KINDS


def _check_largest(config: Configuration) -> None:
    """Refuse a space whose largest pipeline is more than an instance or a CP-SAT model may hold."""
    try:
        check_work(config.pipeline, config.chunks, config.microbatches, KINDS)
        check_model_size(_ops(config))
    except InstanceError as error:
        raise InstanceError(
            f"the largest pipeline, {config.label}: {error}; training.microbatch_sizes can leave it out"
        ) from None


def _training(spec: PlanSpec, t: int, d: int) -> Training:
    training = spec.training
    return dataclasses.replace(
        training,
        tensor_parallel=t,
        data_parallel=d,
        sequence_parallel=training.sequence_parallel and t > 1,
        zero1=training.zero1 and d > 1,
    )


def spans_nodes(size: int, stride: int, gpus_per_node: int) -> bool:
    """Whether a group of `size` GPUs, `stride` apart (Megatron's rank order: tensor parallelism
    innermost, then data, then pipeline), holds GPUs of more than one node."""
    return size > 1 and size * stride > gpus_per_node


def description(spec: PlanSpec, config: Configuration) -> Description:
    """The model description of one configuration (`solver.instances.from_model`): the pipeline link
    is the link between nodes when the pipeline's GPUs span nodes, else the one within a node, and
    the tensor-parallel all-reduces are timed over the link within a node."""
    cluster, t, d, p = spec.cluster, config.tensor_parallel, config.data_parallel, config.pipeline
    bandwidth, latency = cluster.link(spans_nodes(p, t * d, cluster.gpus_per_node))
    hardware = Hardware(
        tflops=cluster.tflops,
        efficiency=cluster.efficiency,
        bandwidth=bandwidth,
        latency=latency,
        tp_bandwidth=cluster.node_bandwidth if t > 1 else 0.0,
        gpu_memory=cluster.gpu_memory,
        reserve=cluster.reserve,
    )
    model = dataclasses.replace(spec.model, microbatch_size=config.microbatch_size)
    pipeline = Pipeline(
        devices=p, microbatches=config.microbatches, chunks=config.chunks, placement=config.placement, balance=True
    )
    return Description(model, _training(spec, t, d), hardware, pipeline)
