"""The configurations a plan considers, and each one's model description.

For every tensor-parallel degree t the spec allows (within one node, unless it gives no t that is) and context-parallel degree cp
(t·cp dividing the GPUs), every pipeline depth p of `pipeline_parallel` (every divisor of GPUs/(t·cp)
when not given), the data-parallel degree d = GPUs/(t·cp·p), every placement (linear with one chunk
a device; for p ≥ 2, V with two and interleaved with each chunk count v of `chunk_counts`), every
microbatch size b dividing the global batch's share of a replica, global_batch/d, that leaves
m = global_batch/(d·b) ≥ p microbatches, every recomputation setting, every ZeRO stage (0 alone
with one replica) and, for a mixture-of-experts model, every expert-parallel degree EP dividing the
experts and d (its GPUs are data-parallel replicas; ZeRO 3 of experts is not modelled), and every
offload of `training.offload` (on a linear or V pipeline: `offload.offload_settings`). The layers are split by `pipeline.balance` (the split that makes the slowest stage
fastest; the first and the last stage may hold only the embedding or the head). A shape the cost
model refuses (a stage without work, heads that t does not divide) is left out with the reason; one
whose model state does not fit is kept: it is refused by memory.

A few bytes of spec can ask for an endless search (`gpus: 2**63`), so every count that grows the work
is checked before any of it starts (`PlanLimits`): the GPUs, the global batch, the layers, the
configurations, and the ops of the largest pipeline (the instance and CP-SAT model caps of
`models.limits`). Each refusal is one line naming the cap and the option that raises it. Divisors
come from the prime factorisation (trial division up to the square root), never from trying every
number up to n.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import NamedTuple

from pipesat.models import InputError, InstanceError, op_kinds
from pipesat.models.limits import DEFAULT_MAX_LAYERS, check_cap, check_model_size, check_work
from pipesat.models.plan_result import Configuration
from pipesat.models.training_modes import Recompute
from pipesat.solver.instances.collectives import Collective, group_link, group_nodes
from pipesat.solver.instances.cost_model import Cost, layer_cost
from pipesat.solver.instances.description import Hardware, Pipeline, Training
from pipesat.solver.instances.description_checks import check_model, check_training
from pipesat.solver.instances.from_model import Description
from pipesat.solver.plan.offload import offload_settings
from pipesat.solver.plan.schedules import runs_placement
from pipesat.solver.plan.spec import PlanSpec

OPS_PER_STAGE_AND_MICROBATCH = len(op_kinds(split_backward=True))
"""Ops a microbatch has on a stage: an instance of the cost model splits the backward (F, B and W)."""
MAX_DEFAULT_CHUNKS = 4
"""The most chunk counts the default rule tries for one pipeline depth (`chunk_counts`)."""
EDGE_SLOTS = 2
"""Stages of a pipeline beyond its layers: the first may hold only the embedding, the last only the head."""


@dataclass(frozen=True)
class PlanLimits:
    """The most a plan takes on; each has a `pipesat plan` option of its name."""

    max_gpus: int = 1 << 20
    max_global_batch: int = 1 << 20
    max_layers: int = DEFAULT_MAX_LAYERS
    max_configurations: int = 10_000


class Space(NamedTuple):
    """The configurations to consider, in their total order, a line for each shape left out, and a
    line for each setting merged into another because a layer costs the same under both (tried once,
    as the other: not a refusal)."""

    configs: list[Configuration]
    skipped: list[str]
    merged: list[str]


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
    """Refuse, with one line naming the cap, a spec whose counts exceed `limits`."""
    for key, value, cap, name in (
        ("cluster.gpus", spec.cluster.gpus, limits.max_gpus, "max_gpus"),
        ("training.global_batch", spec.global_batch, limits.max_global_batch, "max_global_batch"),
        ("model.layers", spec.model.layers, limits.max_layers, "max_layers"),
    ):
        check_cap(key, value, cap, name, "the plan's", "the spec")


def enumerate_space(spec: PlanSpec, limits: PlanLimits | None = None) -> Space:
    """The configurations to consider, in their total order, and a line for each shape left out;
    refused (one line) when the spec is beyond `limits`, the cost model refuses the model itself, or
    the largest pipeline has more ops than an instance or a CP-SAT model may have (`models.limits`)."""
    limits = limits or PlanLimits()
    check_limits(spec, limits)
    check_model(spec.model)
    found: list[Configuration] = []
    skipped: list[str] = []
    merged: list[str] = []
    layouts: set[tuple[int, int]] = set()  # (a replica's share of the global batch, its pipeline's devices)
    degrees = _expert_degrees(spec, skipped)
    for t, cp in _groups(spec, skipped):
        recomputes = _recomputations(spec, t, cp, merged)
        for p, d in _pipelines(spec, t, cp, skipped):
            name = f"{_group_name(t, cp)} p{p}"
            layouts.add((spec.global_batch // d, p))
            for placement, v in _placements(spec, p, skipped, name):
                for b, m in _microbatches(spec, p, d, placement, skipped, name):
                    found += (
                        Configuration(t, p, d, v, placement, b, m, cp, recompute, zero, ep, recompute_layers, offload)
                        for recompute, recompute_layers in recomputes
                        for zero in sorted({zero if d > 1 else 0 for zero in spec.zero})
                        for ep in _expert_parallel(spec, degrees, d, zero, skipped)
                        for offload in _offloads(spec, placement, skipped)
                    )
                    if len(found) > limits.max_configurations:
                        raise InputError(
                            f"the plan has more than {limits.max_configurations:,} configurations; narrow the "
                            "training section's lists (tensor_parallel, pipeline_parallel, chunks, microbatch_sizes, "
                            "placements, recompute, recompute_layers, zero), or raise the limit with "
                            "`max_configurations`"
                        )
    unused = _unused_microbatch_sizes(spec, layouts, {config.microbatch_size for config in found})
    if unused and not found:
        raise InstanceError(
            f"no configuration of {spec.cluster.gpus} GPUs fits this model and batch: {'; '.join(unused)}"
        )
    skipped += unused
    if found:
        _check_largest(max(found, key=op_count))
    return Space(sorted(found), skipped, merged)


def _groups(spec: PlanSpec, skipped: list[str]) -> list[tuple[int, int]]:
    """The (t, cp) pairs to try: their t·cp GPUs divide the cluster, t stays within a node when the
    spec gives one that does (`policy_refusal`), and the cost model takes the model split so (t
    dividing the heads, cp the sequence)."""
    gpus = spec.cluster.gpus
    groups = []
    for t in tensor_degrees(spec):
        policy = policy_refusal(spec, t)
        if policy:
            skipped.append(policy)
            continue
        for cp in spec.context_parallel:
            name = _group_name(t, cp)
            if gpus % (t * cp):
                skipped.append(f"{name}: does not divide {gpus} GPUs")
                continue
            try:
                check_training(spec.model, _training(spec, t, cp, 1))
            except InstanceError as error:
                skipped.append(f"{name}: {error}")
                continue
            groups.append((t, cp))
    return groups


def tensor_degrees(spec: PlanSpec) -> tuple[int, ...]:
    """The tensor-parallel degrees t to try: the spec's `tensor_parallel`, or else 1, 2, 4, ... up to a
    node's GPUs, those dividing the GPUs (what Megatron runs: t a power of two within a node)."""
    if spec.tensor_parallel is not None:
        return spec.tensor_parallel
    per_node, gpus = spec.cluster.gpus_per_node, spec.cluster.gpus
    return tuple(1 << k for k in range(per_node.bit_length()) if 1 << k <= per_node and gpus % (1 << k) == 0)


def policy_refusal(spec: PlanSpec, t: int) -> str:
    """Why the search leaves out tensor-parallel degree t by policy ('' when it does not): t stays
    within a node when the spec gives a t that does (a t spanning nodes is searched when it is the
    spec's only one). A configuration asked for alone (`predict`) is not held to it."""
    per_node = spec.cluster.gpus_per_node
    within = any(degree <= per_node for degree in tensor_degrees(spec))
    return f"t{t}: tensor parallelism stays within a node of {per_node} GPUs" if t > per_node and within else ""


def _group_name(t: int, cp: int) -> str:
    """`t8`, or `t8 cp2` with context parallelism, as labels name them."""
    return f"t{t}" + (f" cp{cp}" if cp > 1 else "")


def _pipelines(spec: PlanSpec, t: int, cp: int, skipped: list[str]) -> list[tuple[int, int]]:
    """The (p, d) pairs of t·cp-GPU groups: p out of `pipeline_parallel` (every divisor when not
    given), d the replicas the rest of the GPUs make, each dividing the global batch."""
    groups, name = spec.cluster.gpus // (t * cp), _group_name(t, cp)
    depths = divisors(groups) if spec.pipeline_parallel is None else spec.pipeline_parallel
    found = []
    for p in depths:
        if groups % p:
            skipped.append(f"{name} p{p}: does not divide the {groups} groups of {t * cp} GPUs")
            continue
        d = groups // p
        if spec.global_batch % d:
            skipped.append(f"{name} p{p} d{d}: {d} replicas do not divide the global batch {spec.global_batch}")
            continue
        found.append((p, d))
    return found


def _placements(spec: PlanSpec, p: int, skipped: list[str], name: str) -> list[tuple[str, int]]:
    """The (placement, v) pairs of a p-device pipeline: linear with one chunk; V with two and
    interleaved with each of `chunk_counts`, for p ≥ 2 (on one device they are the linear pipeline
    cut up); each with no more stages than the layers can fill, and run by a schedule the spec allows
    (`schedules.runs_placement`)."""
    most = spec.model.layers + EDGE_SLOTS
    found = []
    for placement in spec.placements:
        if placement != "linear" and p == 1:
            continue
        if not runs_placement(spec.schedules, placement):
            _note(
                skipped, f"{placement}: no schedule of training.schedules ({', '.join(spec.schedules or ())}) runs it"
            )
            continue
        for v in {"linear": (1,), "vshape": (2,), "bidirectional": (2,)}.get(placement) or chunk_counts(spec, p):
            stages = p if placement == "bidirectional" else p * v  # a bidirectional copy has p stages
            if stages > most:
                skipped.append(f"{name} {placement} v{v}: {spec.model.layers} layers cannot fill {p * v} stages")
                continue
            found.append((placement, v))
    return found


def chunk_counts(spec: PlanSpec, p: int) -> tuple[int, ...]:
    """The chunks v an interleaved pipeline of p devices tries: the spec's `chunks`, or else the v ≥ 2
    whose p·v stages the layers fill evenly, the first and the last stage holding a layer fewer or
    not (p·v divides layers, layers + 1 or layers + 2: the embedding and the head each take a
    layer's place, as Llama 3 405B's run split 126 layers over 16 x 8 stages), at most the
    MAX_DEFAULT_CHUNKS largest of them: the fewest layers a chunk, as large runs use, and the smallest
    bubble."""
    if spec.chunks is not None:
        return spec.chunks
    layers = spec.model.layers
    fitting = [
        v for v in range(2, (layers + EDGE_SLOTS) // p + 1) if any((layers + k) % (p * v) == 0 for k in range(3))
    ]
    return tuple(fitting[-MAX_DEFAULT_CHUNKS:])


def _microbatches(
    spec: PlanSpec, p: int, d: int, placement: str, skipped: list[str], name: str
) -> list[tuple[int, int]]:
    """The (b, m) pairs of a replica: b out of `microbatch_sizes` (every divisor when not given)
    dividing its share of the global batch, leaving m ≥ p microbatches (and an even m, half each
    way, for a bidirectional pipeline: an odd one is left out with a line)."""
    per_replica = spec.global_batch // d
    sizes = divisors(per_replica) if spec.microbatch_sizes is None else spec.microbatch_sizes
    found = [(b, per_replica // b) for b in sizes if per_replica % b == 0 and per_replica // b >= p]
    if placement != "bidirectional":
        return found
    skipped += [
        f"{name} bidirectional b{b}: m {m} is odd; half the microbatches go each way" for b, m in found if m % 2
    ]
    return [(b, m) for b, m in found if m % 2 == 0]


def _unused_microbatch_sizes(spec: PlanSpec, layouts: set[tuple[int, int]], used: set[int]) -> list[str]:
    """A line for each size of `microbatch_sizes` that no configuration has because of the batch: it
    divides none of the replicas' shares of the global batch, or leaves fewer microbatches than
    pipeline devices wherever it divides one (`layouts`: each share with its pipeline's devices). A
    size left out for another reason (no placement fills the layers) has that reason's line."""
    lines: list[str] = []
    if not layouts:  # no layout at all: the groups' or the pipelines' lines say why
        return lines
    shares = {share for share, _ in layouts}
    listed = ", ".join(str(share) for share in sorted(shares))
    for b in spec.microbatch_sizes or ():
        if b in used or any(share % b == 0 and share // b >= p for share, p in layouts):
            continue
        if not any(share % b == 0 for share in shares):
            fitting = sorted({size for share in shares for size in divisors(share)})[:6]
            lines.append(
                f"training.microbatch_sizes: {b} divides none of a replica's shares of the global batch "
                f"{spec.global_batch} ({listed} sequences); give a divisor of one, such as "
                f"{', '.join(map(str, fitting))}"
            )
        else:
            lines.append(
                f"training.microbatch_sizes: {b} leaves fewer microbatches than pipeline devices in every layout "
                f"whose share of the global batch it divides ({listed} sequences a replica)"
            )
    return lines


def _expert_degrees(spec: PlanSpec, skipped: list[str]) -> list[int] | None:
    """The expert-parallel degrees EP to try: those of `expert_parallel` that divide the experts (None
    when not given: every divisor of the experts and of d, `_expert_parallel`); 1 alone for a dense
    model."""
    model = spec.model
    if not model.moe:
        return [1]
    if spec.expert_parallel is None:
        return None
    for ep in spec.expert_parallel:
        if model.experts % ep:
            _note(skipped, f"ep{ep}: does not divide the {model.experts} experts")
    return [ep for ep in spec.expert_parallel if model.experts % ep == 0]


def _expert_parallel(spec: PlanSpec, degrees: list[int] | None, d: int, zero: int, skipped: list[str]) -> list[int]:
    """The expert-parallel degrees of d replicas at a ZeRO stage: those of `degrees` (every divisor of
    the experts and d when None) that divide d, as the expert-parallel GPUs are data-parallel
    replicas (Megatron-Core carves the expert-parallel group out of the data-parallel one). ZeRO 3 of
    experts is not modelled."""
    if spec.model.moe and zero == 3:
        _note(skipped, "zero 3: ZeRO 3 with experts is not modelled; left out")
        return []
    if degrees is None:
        return divisors(math.gcd(spec.model.experts, d))
    for ep in degrees:
        if d % ep:
            _note(skipped, f"d{d} ep{ep}: expert parallelism takes its GPUs out of the {d} data-parallel replicas")
    return [ep for ep in degrees if d % ep == 0]


def _offloads(spec: PlanSpec, placement: str, skipped: list[str]) -> tuple[str, ...]:
    """The offloads of `training.offload` a pipeline of `placement` is tried with (`offload.offload_settings`),
    with a line for those left out."""
    settings = offload_settings(spec.offload, placement)
    left = [setting for setting in spec.offload if setting not in settings]
    if left:
        _note(skipped, f"{placement} offload {', '.join(left)}: PipeOffload's schedules run linear and vshape only")
    return settings


def _note(skipped: list[str], line: str) -> None:
    """Add `line` to the shapes left out, once."""
    if line not in skipped:
        skipped.append(line)


def _recomputations(spec: PlanSpec, t: int, cp: int, merged: list[str]) -> list[tuple[Recompute, int]]:
    """The spec's recomputation settings less those that cost a layer of t·cp GPUs what an earlier one
    does (selective recomputation with flash attention: flash attention recomputes the attention core
    already), with a line in `merged` for each tried as the other; full recomputation once for each of `recompute_layers`.
    Each is (recompute, recompute_layers)."""
    one = description(spec, Configuration(t, 1, spec.cluster.gpus // (t * cp), 1, "linear", 1, 1, cp))
    costs: dict[Recompute, Cost] = {}
    for recompute in spec.recompute:
        cost = layer_cost(one.model, dataclasses.replace(one.training, recompute=recompute), one.hardware)
        same = next((kept for kept, other in costs.items() if other == cost), None)
        if same is None:
            costs[recompute] = cost
            continue
        line = f"recompute {recompute}: a layer costs what it does with {same}; tried as {same}"
        _note(merged, line)
    return [
        (recompute, layers)
        for recompute in costs
        for layers in (sorted(spec.recompute_layers) if recompute == "full" else [0])
    ]


def op_count(config: Configuration) -> int:
    """The ops of a configuration's pipeline (F, B and W of each microbatch on each stage)."""
    return config.pipeline * config.chunks * config.microbatches * OPS_PER_STAGE_AND_MICROBATCH


def _check_largest(config: Configuration) -> None:
    """Refuse a space whose largest pipeline is more than an instance or a CP-SAT model may hold."""
    try:
        check_work(config.pipeline, config.chunks, config.microbatches, OPS_PER_STAGE_AND_MICROBATCH)
        check_model_size(op_count(config))
    except InstanceError as error:
        raise InstanceError(
            f"the largest pipeline, {config.label}: {error}; training.microbatch_sizes can leave it out"
        ) from None


def _training(spec: PlanSpec, t: int, cp: int, d: int, config: Configuration | None = None) -> Training:
    """The spec's training with a configuration's searched keys (the spec's sequence parallelism, only with t > 1);
    without a configuration, no recomputation and ZeRO 0."""
    training = spec.training
    return dataclasses.replace(
        training,
        tensor_parallel=t,
        context_parallel=cp,
        data_parallel=d,
        expert_parallel=1 if config is None else config.expert_parallel,
        sequence_parallel=spec.sequence_parallel and t > 1,
        recompute="none" if config is None else config.recompute,
        recompute_layers=0 if config is None else config.recompute_layers,
        zero=0 if config is None else config.zero,
    )


def spans_nodes(size: int, stride: int, gpus_per_node: int) -> bool:
    """Whether a group of `size` GPUs, `stride` apart (Megatron's rank order: tensor parallelism
    innermost, then context, then data, then pipeline), holds GPUs of more than one node."""
    return size > 1 and size * stride > gpus_per_node


def description(spec: PlanSpec, config: Configuration) -> Description:
    """The model description of one configuration (`solver.instances.from_model`): the pipeline link
    is the link between nodes when the pipeline's GPUs span nodes, else the one within a node; each
    collective group's (tensor, context, data and expert parallelism, in Megatron's rank order) is
    `collectives.group_link` of its place in the cluster."""
    cluster, t, d, p = spec.cluster, config.tensor_parallel, config.data_parallel, config.pipeline
    cp, per_node, fabric = config.context_parallel, cluster.gpus_per_node, cluster.fabric()
    bandwidth, latency = cluster.link(spans_nodes(p, t * cp * d, per_node))
    tp = group_link(fabric, group_nodes(t, 1, per_node))
    cp_link = group_link(fabric, group_nodes(cp, t, per_node))
    dp = group_link(fabric, group_nodes(d, t * cp, per_node))
    ep = group_link(fabric, group_nodes(config.expert_parallel, t * cp, per_node), Collective.ALL_TO_ALL)
    hardware = Hardware(
        tflops=cluster.tflops,
        gpu=cluster.gpu,
        efficiency=cluster.efficiency,
        bandwidth=bandwidth,
        latency=latency,
        tp_bandwidth=tp.bandwidth if t > 1 else 0.0,
        tp_latency=tp.latency,
        cp_bandwidth=cp_link.bandwidth,
        cp_latency=cp_link.latency,
        dp_bandwidth=dp.bandwidth,
        dp_latency=dp.latency,
        ep_bandwidth=ep.bandwidth,
        ep_latency=ep.latency,
        memory_bandwidth=cluster.memory_bandwidth,
        gpu_memory=cluster.gpu_memory,
        reserve=cluster.reserve,
    )
    model = dataclasses.replace(spec.model, microbatch_size=config.microbatch_size)
    pipeline = Pipeline(
        devices=p, microbatches=config.microbatches, chunks=config.chunks, placement=config.placement, balance=True
    )
    training = _training(spec, t, config.context_parallel, d, config)
    return Description(model, training, hardware, pipeline)
