"""The configurations a plan considers, and each one's model description.

For every tensor-parallel degree t the spec allows (dividing the GPUs, within one node), every
pipeline depth p dividing GPUs/t, the data-parallel degree d = GPUs/(p·t), every placement (linear
with one chunk a device; interleaved and V with two, for p ≥ 2), and every microbatch size b
dividing the global batch's share of a replica, global_batch/d, that leaves m = global_batch/(d·b) ≥
p microbatches. The layers are split by `--balance` (the split that makes the slowest stage
fastest). A shape the cost model refuses (a stage without a layer, heads that t does not divide) is
left out with the reason; one whose model state does not fit is kept: it is refused by memory.
"""

from __future__ import annotations

import dataclasses

from pipesat.models import InstanceError
from pipesat.models.plan_result import Configuration
from pipesat.solver.instances.cost_model import Hardware, Pipeline, Training, check_training
from pipesat.solver.instances.from_model import Description
from pipesat.solver.plan.spec import PlanSpec

CHUNKS = {"linear": 1, "interleaved": 2, "vshape": 2}


def divisors(n: int) -> list[int]:
    return [k for k in range(1, n + 1) if n % k == 0]


def enumerate_space(spec: PlanSpec) -> tuple[list[Configuration], list[str]]:
    """The configurations to consider, in their total order, and a line for each shape left out."""
    gpus, cluster = spec.cluster.gpus, spec.cluster
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
                for b in divisors(per_replica):
                    m = per_replica // b
                    if m < p or (spec.microbatch_sizes is not None and b not in spec.microbatch_sizes):
                        continue
                    found.append(Configuration(t, p, d, v, placement, b, m))
    return sorted(found), skipped


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
