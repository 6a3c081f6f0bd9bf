"""One configuration's schedule as a training iteration: time, tokens/s, MFU and memory per GPU.

    iteration time = makespan + gradient reduction + optimizer step            (ms; no overlap)

- **Gradient reduction** over the d data-parallel replicas, on the largest device's gradients G
  (its parameters on one GPU x grad_bytes), as a ring: an all-reduce moves 2(d-1)/d · G per GPU in
  2(d-1) steps, so it takes 2(d-1)/d · G / bandwidth + 2(d-1) · latency. With ZeRO-1 the gradients
  are reduce-scattered and the updated 16-bit weights all-gathered: (d-1)/d · (G + W) / bandwidth +
  2(d-1) · latency, W the weights' bytes. The link is the one between nodes when the replicas'
  GPUs span nodes (`space.spans_nodes`), else the one within a node. 0 when d = 1.
- **Optimizer step**: Adam reads and writes its state (optimizer_bytes a parameter: master weights
  and two moments), reads the gradient and writes the 16-bit weight, 2·optimizer_bytes + grad_bytes
  + weight_bytes a parameter of the largest device (its share of the optimizer state with ZeRO-1),
  at the GPU memory's bandwidth: the step is memory-bound.
- **Tokens/s** = global_batch · seq_len / iteration time.
- **MFU** = model FLOPs / (GPUs · peak FLOP/s · iteration time). Model FLOPs are 3 x the forward
  of the whole model over the global batch: the matmuls (L per layer, 6·N·tokens for the N matmul
  parameters), the attention scores (S per layer, with causal flash attention's half) and the output
  head, as `solver.instances.cost_model` counts them, without recomputation and before any
  tensor-parallel split.
- **Memory per GPU** = the largest over the devices of its model state plus its schedule's peak
  activations. The reserve is apart: the usable memory is the GPU's less the reserve.
"""

from __future__ import annotations

from collections.abc import Sequence

from pipesat.models import Schedule
from pipesat.models.plan_result import Configuration, Measure
from pipesat.solver.evaluate.metrics import compute_metrics
from pipesat.solver.instances.cost_model import MIB, Hardware, linear_flops, score_flops
from pipesat.solver.instances.from_model import Derivation
from pipesat.solver.instances.model_state import DeviceState, reserve_bytes
from pipesat.solver.plan.space import spans_nodes
from pipesat.solver.plan.spec import PlanSpec


def reduce_ms(spec: PlanSpec, config: Configuration, states: Sequence[DeviceState]) -> float:
    """The data-parallel gradient reduction of the largest device, in ms (see the module notes)."""
    d, cluster, training = config.data_parallel, spec.cluster, spec.training
    if d == 1:
        return 0.0
    parameters = max(state.parameters for state in states)
    if training.zero1:
        moved = (d - 1) / d * parameters * (training.grad_bytes + training.weight_bytes)
    else:
        moved = 2 * (d - 1) / d * parameters * training.grad_bytes
    bandwidth, latency = cluster.link(spans_nodes(d, config.tensor_parallel, cluster.gpus_per_node))
    return moved / (bandwidth * 1e9) * 1e3 + 2 * (d - 1) * latency / 1e3


def optimizer_ms(spec: PlanSpec, config: Configuration, states: Sequence[DeviceState]) -> float:
    """The optimizer step of the largest device at the GPU memory's bandwidth, in ms."""
    training = spec.training
    shards = config.data_parallel if training.zero1 else 1
    parameters = max(state.parameters for state in states) / shards
    moved = parameters * (2 * training.optimizer_bytes + training.grad_bytes + training.weight_bytes)
    return moved / (spec.cluster.memory_bandwidth * 1e9) * 1e3


def fixed_ms(spec: PlanSpec, config: Configuration, states: Sequence[DeviceState]) -> float:
    """What an iteration adds to the schedule's makespan, whatever the schedule."""
    return reduce_ms(spec, config, states) + optimizer_ms(spec, config, states)


def model_flops(spec: PlanSpec) -> float:
    """The model FLOPs of one iteration (see the module notes)."""
    model, training = spec.model, spec.training
    one = type(model)(**{**vars(model), "microbatch_size": 1})
    forward = model.layers * (linear_flops(one) + score_flops(one, training)) + 2 * one.tokens * one.hidden * one.vocab
    return 3 * forward * spec.global_batch


def usable_memory(spec: PlanSpec) -> float:
    """What a GPU may hold in model state and activations: its memory less the reserve, bytes."""
    cluster = spec.cluster
    hardware = Hardware(tflops=cluster.tflops, gpu_memory=cluster.gpu_memory, reserve=cluster.reserve)
    return cluster.gpu_memory - reserve_bytes(hardware)


def measure(spec: PlanSpec, config: Configuration, derivation: Derivation, schedule: Schedule) -> Measure:
    """The schedule (of `derivation.instance`, ms and MiB) as one training iteration."""
    metrics = compute_metrics(schedule)
    reduce = reduce_ms(spec, config, derivation.states)
    optimizer = optimizer_ms(spec, config, derivation.states)
    iteration = metrics.makespan + reduce + optimizer
    seconds = iteration / 1e3
    peak_flops = spec.cluster.gpus * spec.cluster.tflops * 1e12
    memory = max(state.bytes + peak * MIB for state, peak in zip(derivation.states, metrics.peak_memory, strict=True))
    return Measure(
        makespan_ms=metrics.makespan,
        reduce_ms=reduce,
        optimizer_ms=optimizer,
        iteration_ms=iteration,
        tokens_per_s=spec.tokens_per_iteration / seconds,
        mfu=model_flops(spec) / (peak_flops * seconds),
        memory_per_gpu=memory,
    )
