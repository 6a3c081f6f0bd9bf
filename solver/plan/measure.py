"""One configuration's schedule as a training iteration: time, tokens/s, MFU, memory per GPU, and
where the time goes.

    iteration time = makespan + exposed data-parallel exchange + optimizer step        (ms)

- **The schedule's time** is its makespan, except where the runtime runs the schedule with its
  optimizer step post-validated (`Runtime.iterates_on_span`: the zero-bubble fork's
  option `enable-optimizer-post-validation`). There the step does not wait for the global checks (the
  gradient norm for clipping, the inf/NaN check) of all devices: each device steps as soon as its own
  last op ends and the checks are validated during the next iteration, so one device's iteration
  runs from its first op to its last and the pipeline keeps pace with the busiest device: the max
  span. Where the validation fails (an overflow, or a clipped step) the step is rolled back and
  redone, a rare step's cost left out. The bound the plan proves on such a schedule is the span's
  (`Assessment.span_bound`).

- **Exposed data-parallel exchange** (`solver.instances.data_parallel`): each device's gradients
  all-reduced (ZeRO 0) or reduce-scattered (ZeRO 1, 2) in Megatron's buckets behind the backward of
  its last microbatch (B + W over its stages), and with ZeRO 1 and 2 the updated weights
  all-gathered before the forward of its first; with `overlap_grad_reduce` and `overlap_param_gather`
  (the default) only what its compute cannot hide. The largest over the devices, over the link of
  the data-parallel group (the configuration's description names it). It depends on the stage times
  only, not on the schedule, so a bound on the makespan plus it is a bound on the iteration. ZeRO 3
  exchanges in the ops: that is in the makespan.
- **Optimizer step**: Adam reads and writes its state (optimizer_bytes a parameter: master weights
  and two moments), reads the gradient and writes the 16-bit weight, 2·optimizer_bytes + grad_bytes
  + weight_bytes a parameter of the largest device (its d-th share with ZeRO 1 and up, of its routed
  experts a (d/EP)-th), at the GPU memory's bandwidth: the step is memory-bound.
- **Tokens/s** = global_batch · seq_len / iteration time.
- **MFU** = model FLOPs / (GPUs · peak FLOP/s · iteration time). Model FLOPs are 3 x the forward
  of the whole model over the global batch: the matmuls (L per layer, 6·N·tokens for the N matmul
  parameters), the attention scores (S per layer, with causal flash attention's half) and the output
  head, as `solver.instances.cost_model` counts them, without recomputation and before any
  tensor-parallel split.
- **Memory per GPU** = the largest over the devices of its model state plus its schedule's peak
  activations, the two kept apart (the model state is what the layout needs whatever its schedule;
  the activations are what the schedule holds, up to its limit). The reserve is apart: the usable
  memory is the GPU's less the reserve.
- **Where the time goes** (`Breakdown`, summing to the iteration time exactly): the critical device
  is the busiest one (the least idle). Its busy time is its ops' times; of them the cost model's
  recomputation, exposed tensor- and context-parallel communication, the experts' all-to-all (less
  what overlapped pairs hid: the device is busy for less than its ops' times by that much) and ZeRO
  3's exposed exchange (per microbatch, times m) are counted apart, and compute is the rest. Its idle time is pipeline
  communication, as much as the makespan shrinks when the same per-device orders run with no p2p
  time, and the bubble, the rest. A schedule that offloads (`training.offload`) has host-link
  time too: as much as the makespan shrinks when the same orders run without their transfers
  (`host link`, before the p2p relaxation, which runs without them). Then the exposed data-parallel
  exchange and the optimizer step.
"""

from __future__ import annotations

import dataclasses

from pipesat.models import Schedule
from pipesat.models.plan_result import PART_NAMES, Breakdown, Configuration, Measure
from pipesat.models.units import MIB, memory_text
from pipesat.solver.evaluate.metrics import Metrics, compute_metrics, link_busy
from pipesat.solver.evaluate.simulator import simulate
from pipesat.solver.instances.collectives import Link
from pipesat.solver.instances.data_parallel import (
    Exchange,
    buckets,
    gradient_reduction,
    weight_gather,
)
from pipesat.solver.instances.description import Hardware, Training
from pipesat.solver.instances.from_model import Derivation, Description
from pipesat.solver.instances.layer_work import linear_flops, score_flops
from pipesat.solver.instances.model_state import DeviceState, reserve_bytes
from pipesat.solver.plan.space import description
from pipesat.solver.plan.spec import PlanSpec


def device_exchanges(described: Description, derivation: Derivation) -> list[tuple[Exchange, Exchange]]:
    """Each device's gradient reduction and weight gather after the schedule (the module notes)."""
    training, hardware = described.training, described.hardware
    link = Link(hardware.dp_bandwidth, hardware.dp_latency)
    placement = derivation.instance.placement
    exchanges = []
    for device, state in enumerate(derivation.states):
        times = [derivation.times[stage] for stage in range(len(placement)) if placement[stage] == device]
        forward = sum(f for f, _, _ in times)
        backward = sum(b + w for _, b, w in times)
        exchanges.append(
            (
                gradient_reduction(training, state.parameters, backward, link, state.expert_parameters),
                weight_gather(training, state.parameters, forward, link, state.expert_parameters),
            )
        )
    return exchanges


def exchange_ms(described: Description, derivation: Derivation) -> float:
    """The exposed data-parallel exchange after the schedule, the largest over the devices (ms)."""
    return max(reduce.exposed_ms + gather.exposed_ms for reduce, gather in device_exchanges(described, derivation))


def optimizer_ms(spec: PlanSpec, described: Description, derivation: Derivation) -> float:
    """The optimizer step of the largest device at the GPU memory's bandwidth, in ms."""
    training = described.training
    moved = max(stepped_parameters(training, state) for state in derivation.states) * (
        2 * training.optimizer_bytes + training.grad_bytes + training.weight_bytes
    )
    return moved / (spec.cluster.memory_bandwidth * 1e9) * 1e3


def stepped_parameters(training: Training, state: DeviceState) -> float:
    """The parameters a device's optimizer step updates: with ZeRO 1 and up its shard, a d-th of its
    parameters and a (d/EP)-th of its routed experts'."""
    if training.zero == 0:
        return state.parameters
    d, experts = training.data_parallel, state.expert_parameters
    return (state.parameters - experts) / d + experts / (d // training.expert_parallel)


def fixed_ms(spec: PlanSpec, config: Configuration, derivation: Derivation) -> float:
    """What an iteration adds to the schedule's makespan, whatever the schedule."""
    described = description(spec, config)
    return exchange_ms(described, derivation) + optimizer_ms(spec, described, derivation)


def model_flops(spec: PlanSpec) -> float:
    """The model FLOPs of one iteration (see the module notes)."""
    model, training = spec.model, spec.training
    one = dataclasses.replace(model, microbatch_size=1)
    dense = one.layers - one.moe_layers
    layers = dense * linear_flops(one.dense()) + one.moe_layers * linear_flops(one)
    forward = layers + one.layers * score_flops(one, training) + 2 * one.tokens * one.hidden * one.vocab
    return 3 * forward * spec.global_batch


def usable_memory(spec: PlanSpec) -> float:
    """What a GPU may hold in model state and activations: its memory less the reserve, bytes."""
    cluster = spec.cluster
    hardware = Hardware(tflops=cluster.tflops, gpu_memory=cluster.gpu_memory, reserve=cluster.reserve)
    return cluster.gpu_memory - reserve_bytes(hardware)


def critical_device(metrics: Metrics) -> int:
    """The busiest device (the least idle; the first of equals): the one whose time the breakdown splits."""
    return max(range(len(metrics.busy)), key=lambda device: (metrics.busy[device], -device))


def schedule_ms(metrics: Metrics, on_span: bool) -> float:
    """The schedule's time in the iteration: its max span where it iterates on span, else its makespan."""
    return metrics.max_span if on_span else metrics.makespan


def breakdown(
    derivation: Derivation, schedule: Schedule, metrics: Metrics, after_ms: tuple[float, float], on_span: bool = False
) -> Breakdown:
    """Where the iteration's time goes (the module notes); `after_ms` the exposed data-parallel
    exchange and the optimizer step after the schedule, whose time is its span where `on_span`."""
    instance = derivation.instance
    critical = critical_device(metrics)
    stages = [stage for stage, device in enumerate(instance.placement) if device == critical]
    m = instance.stage_microbatches
    costs = [derivation.stages[stage].cost for stage in stages]
    recompute = m * sum(cost.recompute_ms for cost in costs)
    all_to_all = m * sum(cost.forward_a2a_ms + cost.backward_a2a_ms for cost in costs)
    tensor_parallel = m * sum(cost.forward_comm_ms + cost.backward_comm_ms for cost in costs) - all_to_all
    busy = metrics.busy[critical]
    if instance.has_communication:
        # Overlapped pairs hide the all-to-all: the device is busy for less than its ops' times, by
        # what its pairs hid (never more than their communication: a pair lasts at least its computes).
        all_to_all -= m * sum(sum(derivation.times[stage]) for stage in stages) - busy
    sharded = m * sum(exchange.exposed_ms for stage in stages for exchange in derivation.sharded[stage])
    timed = schedule_ms(metrics, on_span)
    without_link = timed
    if schedule.transfers:  # the same orders re-timed without their transfers: what the link exposes
        without_link = schedule_ms(compute_metrics(simulate(instance, schedule.orders())), on_span)
    without_p2p = without_link
    if instance.p2p_time > 0:
        relaxed = compute_metrics(simulate(dataclasses.replace(instance, p2p_time=0.0), schedule.orders()))
        without_p2p = schedule_ms(relaxed, on_span)
    data_parallel, optimizer = after_ms
    return Breakdown(
        compute_ms=busy - recompute - tensor_parallel - all_to_all - sharded,
        recompute_ms=recompute,
        tensor_parallel_ms=tensor_parallel,
        expert_parallel_ms=all_to_all,
        data_parallel_ms=sharded + data_parallel,
        pipeline_ms=without_link - without_p2p,
        host_link_ms=timed - without_link,
        bubble_ms=without_p2p - busy,
        optimizer_ms=optimizer,
    )


def measure(
    spec: PlanSpec, config: Configuration, derivation: Derivation, schedule: Schedule, *, on_span: bool = False
) -> Measure:
    """The schedule (of `derivation.instance`, ms and MiB) as one training iteration; `on_span`: the
    runtime runs it post-validated, so its time in the iteration is its max span (module notes)."""
    described = description(spec, config)
    metrics = compute_metrics(schedule)
    exchange = exchange_ms(described, derivation)
    optimizer = optimizer_ms(spec, described, derivation)
    iteration = schedule_ms(metrics, on_span) + exchange + optimizer
    seconds = iteration / 1e3
    peak_flops = spec.cluster.gpus * spec.cluster.tflops * 1e12
    held = [(state.bytes, peak * MIB) for state, peak in zip(derivation.states, metrics.peak_memory, strict=True)]
    model_state, activations = max(held, key=sum)
    return Measure(
        makespan_ms=metrics.makespan,
        exchange_ms=exchange,
        optimizer_ms=optimizer,
        iteration_ms=iteration,
        tokens_per_s=spec.tokens_per_iteration / seconds,
        mfu=model_flops(spec) / (peak_flops * seconds),
        model_state=model_state,
        activations=activations,
        breakdown=breakdown(derivation, schedule, metrics, (exchange, optimizer), on_span),
    )


def iteration_lines(
    spec: PlanSpec, config: Configuration, derivation: Derivation, schedule: Schedule, *, on_span: bool = False
) -> list[str]:
    """How a configuration's schedule became its iteration and where the time goes, as readable lines
    (what `pipesat plan` explains of the best configuration); `on_span` as `measure` takes it."""
    described = description(spec, config)
    training, hardware = described.training, described.hardware
    measured = measure(spec, config, derivation, schedule, on_span=on_span)
    spent = measured.iteration_ms - measured.exchange_ms - measured.optimizer_ms
    timed = f"schedule's max span (post-validated) {spent:.4g}" if on_span else f"schedule {measured.makespan_ms:.4g}"
    lines = [
        f"iteration of {config.label} (docs/plan.md): {timed} + data-parallel exchange "
        f"{measured.exchange_ms:.4g} + optimizer step {measured.optimizer_ms:.4g} = {measured.iteration_ms:.4g} ms"
    ]
    d = training.data_parallel
    link = f"{hardware.dp_bandwidth:g} GB/s, {hardware.dp_latency:g} µs a step"
    if d > 1 and training.zero == 3:
        lines.append(
            f"  ZeRO 3 over {d} replicas ({link}): each unit's weights all-gathered before its F and its B, its "
            "gradients reduce-scattered after its W, every microbatch; what they expose is in the op times"
        )
    elif d > 1:
        exchanges = device_exchanges(described, derivation)
        device = max(range(len(exchanges)), key=lambda each: sum(part.exposed_ms for part in exchanges[each]))
        reduce, gather = exchanges[device]
        filled = buckets(derivation.states[device].parameters, d)
        collective = "all-reduce" if training.zero == 0 else "reduce-scatter"
        hidden = "beside its last microbatch's backward" if training.overlap_grad_reduce else "after the backward"
        lines.append(
            f"  gradients of device {device} (the most exposed), {collective} over {d} replicas ({link}) in "
            f"{len(filled)} buckets of up to {filled[0]:.3g} parameters x {training.grad_bytes:g} bytes: "
            f"{reduce.total_ms:.4g} ms, {reduce.exposed_ms:.4g} exposed ({hidden})"
        )
        if gather.total_ms > 0:
            hidden = "beside its first microbatch's forward" if training.overlap_param_gather else "before it"
            lines.append(
                f"  updated weights all-gathered (ZeRO {training.zero}) x {training.weight_bytes:g} bytes: "
                f"{gather.total_ms:.4g} ms, {gather.exposed_ms:.4g} exposed ({hidden})"
            )
    shards = d if training.zero >= 1 else 1
    lines.append(
        f"  optimizer step: {max(state.parameters for state in derivation.states):.4g}"
        + (f"/{shards}" if shards > 1 else "")
        + f" parameters x (2·{training.optimizer_bytes:g} + {training.grad_bytes:g} + {training.weight_bytes:g}) "
        f"bytes at {spec.cluster.memory_bandwidth:g} GB/s = {measured.optimizer_ms:.4g} ms"
    )
    metrics = compute_metrics(schedule)
    held = [state.bytes + peak * MIB for state, peak in zip(derivation.states, metrics.peak_memory, strict=True)]
    most = max(range(len(held)), key=lambda device: (held[device], -device))
    lines.append(
        f"  memory of device {most} (the one that holds the most): model state {memory_text(measured.model_state, 'B')}"
        f" + its schedule's peak activations {memory_text(measured.activations, 'B')} = "
        f"{memory_text(measured.memory_per_gpu, 'B')} of {memory_text(usable_memory(spec), 'B')} usable"
    )
    if schedule.transfers:
        busy = ", ".join(f"{value:.4g}" for value in link_busy(schedule))
        lines.append(
            f"  offload: {len(schedule.transfers) // 2} (stage, microbatch)s offloaded and reloaded; host links busy "
            f"{busy} ms (per device, both directions), {measured.breakdown.host_link_ms:.4g} ms of the schedule exposed"
        )
    critical = critical_device(metrics)
    lines.append(f"  where the time goes (device {critical}, the busiest):")
    for name, value in measured.breakdown.parts():
        if name == PART_NAMES["host_link_ms"] and not schedule.transfers:
            continue
        lines.append(f"    {name:<10} {value:>10.1f} ms {value / measured.iteration_ms:>7.1%}")
    return lines
