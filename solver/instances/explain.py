"""The arithmetic behind `from-model`, as lines people read (its explanation, and the comments on top of
the instance file it writes), and the command line that makes the same instance again."""

from __future__ import annotations

from pipesat.models import Instance
from pipesat.models.units import GIB, MIB, memory_text
from pipesat.solver.instances.communication import (
    activation_message_bytes,
    all_to_all_ms,
    backward_exchange_ms,
    block_exchange_ms,
    exposed_ms,
    kv_exchange_ms,
    scatters_p2p,
)
from pipesat.solver.instances.cost_model import head_cost, layer_cost, without_recomputation
from pipesat.solver.instances.description import Hardware, Training, Transformer
from pipesat.solver.instances.from_model import Derivation, Description
from pipesat.solver.instances.keys import keys
from pipesat.solver.instances.layer_balance import slowest_stage_ms
from pipesat.solver.instances.layer_work import (
    Tensor,
    held_bytes,
    layer_activations,
    layer_passes,
    linear_flops,
    score_flops,
    weight_gradient_inputs,
)
from pipesat.solver.instances.model_state import bytes_per_parameter, layer_parameters, reserve_bytes
from pipesat.solver.instances.pass_times import effective_flops_per_ms, roofline
from pipesat.solver.instances.roofline import Gemm, Roofline, attention_ms, gemm_ms, memory_ms

TRAINING_OPTIONS = (
    "recompute recompute_layers tensor_parallel data_parallel bytes_per_value loss_bytes weight_bytes "
    "gathered_weight_bytes grad_bytes "
    "optimizer_bytes flash_attention causal dropout sequence_parallel zero overlap_grad_reduce overlap_tp_comm "
    "scatter_gather_p2p overlap_param_gather context_parallel expert_parallel"
)
"""Every `Training` key, in the order `command_line` gives the ones not at their default."""


def command_line(description: Description) -> str:
    """The `pipesat instance from-model` command that makes this instance: the model's sizes, the keys
    not at their declared default, the pipeline and the hardware (the GPU memory and its reserve when
    given)."""
    model, training, hardware, pipeline = (
        description.model,
        description.training,
        description.hardware,
        description.pipeline,
    )
    words = [
        "pipesat instance from-model",
        *_options(model, "layers hidden heads seq_len"),
        *_options(model, "kv_heads ffn_hidden microbatch_size vocab", changed=True),
        *_options(model, "experts top_k shared_experts expert_ffn_hidden dense_layers", changed=True),
        *_options(training, TRAINING_OPTIONS, changed=True),
        *_options(pipeline, "balance", changed=True),
        *_options(pipeline, "devices chunks microbatches"),
        *_options(pipeline, "placement layers_per_stage", changed=True),
        *_hardware_options(hardware),
    ]
    return " ".join(words)


def _hardware_options(hardware: Hardware) -> list[str]:
    """The hardware's options: its gpu, or its peak, efficiency and pipeline link (and its GPU memory
    and reserve when given); then every other key that differs from what those alone would make."""
    if hardware.gpu is not None:
        given = ["gpu"]
    else:
        given = ["tflops", "efficiency", "bandwidth", "latency"]
        given += ["gpu_memory", "reserve"] if hardware.gpu_memory > 0 else []
    if hardware.host_link:  # the link is the gpu's unless it differs (below); without a gpu, given
        given += ["host_link"] if hardware.gpu is not None else ["host_link", "host_link_bandwidth"]
    made = Hardware(**{name: getattr(hardware, name) for name in given})
    names = [name for name in keys(Hardware) if name in given or getattr(hardware, name) != getattr(made, name)]
    return _options(hardware, " ".join(names))


def _options(record: object, names: str, changed: bool = False) -> list[str]:
    """The options that give `record`'s keys `names` (space-separated); `changed`: only those not at
    their declared default (a key that takes another's value by default: not at that value)."""
    declared = keys(type(record))

    def default(name: str) -> object:
        taken = declared[name].default_from
        return getattr(record, taken) if taken else declared[name].default

    return [
        declared[name].option_text(name, getattr(record, name))
        for name in names.split()
        if not changed or getattr(record, name) != default(name)
    ]


def explain(description: Description, derivation: Derivation) -> list[str]:
    """How every number of the instance was derived, as readable lines."""
    return [
        *_setting_lines(description, derivation),
        *_layer_lines(description),
        *_stage_lines(description, derivation),
        *_state_lines(description, derivation),
    ]


def _setting_lines(description: Description, derivation: Derivation) -> list[str]:
    model, training, pipeline = description.model, description.training, description.pipeline
    instance = derivation.instance
    attention = f"heads a={model.heads}" + (
        f", {model.kv_heads} key/value heads (grouped-query)"
        if model.kv_heads and model.kv_heads != model.heads
        else ""
    )
    mlp = f"SwiGLU MLP f={model.ffn_hidden}" if model.swiglu else f"GELU MLP f=4h={model.mlp_width}"
    if model.moe:
        shared = f" + {model.shared_experts} shared" if model.shared_experts else ""
        mlp += (
            (f" in the first {model.dense_layers} layers, " if model.dense_layers else " replaced, ")
            + f"mixture of experts: E={model.experts} routed (top_k k={model.top_k}){shared} of width {model.expert_width}"
        )
    kernel = ("causal " if training.causal else "") + ("flash attention" if training.flash_attention else "attention")
    split = " ".join(str(count) for count in derivation.split)
    if pipeline.balance:
        slowest = slowest_stage_ms(derivation.split, model, training, description.hardware)
        split += f" (balanced: the slowest stage's F+B+W is {slowest:.4g} ms)"
    return [
        f"model: {model.layers} layers, hidden h={model.hidden}, {attention}, {mlp}, sequence s={model.seq_len}, "
        f"microbatch b={model.microbatch_size}, vocabulary V={model.vocab}",
        f"training: {training.bytes_per_value:g} bytes a value, {kernel}, "
        f"{'dropout' if training.dropout else 'no dropout'}, recompute {training.recompute}"
        + (
            f" (the first {training.recompute_layers} layers of each stage; the rest keep their activations)"
            if training.recompute_layers
            else ""
        )
        + ", "
        f"tensor parallel t={training.tensor_parallel}"
        + (" with sequence parallelism" if training.sequence_parallel else "")
        + f", data parallel {training.data_parallel}"
        + (f", expert parallel EP={training.expert_parallel}" if model.moe else ""),
        f"pipeline: p={pipeline.devices} devices x v={pipeline.chunks} chunks = {instance.num_stages} stages "
        f"({instance.placement_name()} placement), m={pipeline.microbatches} microbatches; layers per stage: {split}"
        + (
            f" (each of the two copies; m/2 = {pipeline.microbatches // 2} microbatches a copy, twice the parameters)"
            if instance.bidirectional
            else ""
        ),
    ]


def _layer_lines(description: Description) -> list[str]:
    model, training, hardware = description.model, description.training, description.hardware
    t, n = training.tensor_parallel, model.tokens
    layer = layer_cost(model, training, hardware)
    scores = score_flops(model, training)
    mlp_factor = 6 if model.swiglu else 4
    causal = (
        "1/2, causal flash attention skips the masked half" if scores < 4 * n * model.seq_len * model.hidden else "1"
    )
    backward_terms = "L + 2S" + (" + S/2 (flash recomputes QKᵀ)" if training.flash_attention else "")
    if training.recompute == "selective" and not training.flash_attention:
        backward_terms += " + S (selective: the attention core again)"
    if training.recompute == "full":
        backward_terms += " + L + S (full: the whole forward again)"
    cp = training.context_parallel
    split = "(t·cp)" if cp > 1 else "t"
    tokens = f"n = s·b = {n} tokens" + (f", {n // cp} on each of the cp = {cp} GPUs of a sequence" if cp > 1 else "")
    mlp = f"{mlp_factor}n·h·f"
    if model.moe:
        copies = f"(k + {model.shared_experts})" if model.shared_experts else "k"
        mlp = f"{mlp_factor}n·{copies}·h·f_e + 2n·h·E (the router)"
    layer_name = "mixture-of-experts layer" if model.moe else "transformer layer"
    lines = [
        f"per {layer_name}, on each GPU ({tokens}, g·d = {model.kv_width}; docs/cost-model.md):",
        f"  L = 2n·h·(h+2g·d) + 2n·h² + {mlp} = {_flops(linear_flops(model))}",
        f"  S = 4n·s·h·c = {_flops(scores)} (c = {causal})",
        f"  F = (L + S)/{split} = {_flops(layer.forward_flops)}",
        f"  B = ({backward_terms})/{split} = {_flops(layer.backward_flops)}",
        f"  W = L/{split} = {_flops(layer.weight_flops)}",
    ]
    lines += _roofline_lines(model, training, hardware)
    lines += _communication_lines(model, training, hardware)
    lines.append(f"  M_B, kept from F to B{' (/t: split over the tensor-parallel GPUs)' if t > 1 else ''}:")
    lines += _tensor_lines(layer_activations(model, training), training)
    lines.append("  M_W, kept from B to W (each weight matmul's input and output gradient):")
    wanted = held_bytes(weight_gradient_inputs(model, training), training)
    lines += _tensor_lines(weight_gradient_inputs(model, training), training)
    if wanted > layer.weight_bytes:
        lines.append(
            f"    capped at M_B = {_mib(layer.weight_bytes)}: W frees at most what F allocated "
            "(with full recomputation B holds more than F kept; the peak between B and W is underestimated)"
        )
    if training.recompute_layers:
        kept = layer_cost(model, without_recomputation(training), hardware)
        lines.append(
            f"  the layers of a stage past its first {training.recompute_layers} are not recomputed: each keeps "
            f"M_B = {_mib(kept.activation_bytes)} and its B does not run F again ({_flops(kept.backward_flops)})"
        )
    return lines


def _roofline_lines(model: Transformer, training: Training, hardware: Hardware) -> list[str]:
    """With a gpu and no efficiency: each GEMM's time in each pass and the fraction of the peak it
    reaches on the roofline, then the attention's and the elementwise kernels' time."""
    gpu = roofline(hardware)
    if gpu is None:
        return []
    passes, bpv = layer_passes(model, training), training.bytes_per_value
    lines = [
        f"  timed by shape on {hardware.gpu} (solver/instances/roofline.py): {gpu.tflops:g} TFLOP/s peak, GEMMs at "
        f"{gpu.gemm_efficiency:g} of it less tile and wave quantization over {gpu.sms} SMs, or bound by "
        f"{gpu.memory_bandwidth:g} GB/s of memory; flash attention at {gpu.attention_efficiency:g} of the peak. Each "
        "GEMM (tokens x outputs x inputs) in F, B and W, and the fraction of the peak it reaches:",
    ]
    for gemm in passes.forward.gemms:
        shapes = (("F", gemm), ("B", gemm.input_gradient()), ("W", gemm.weight_gradient()))
        times = ", ".join(_gemm_time(name, shape, bpv, gpu) for name, shape in shapes)
        lines.append(f"    {gemm.name} {gemm.m:g} x {gemm.n:g} x {gemm.k:g}: {times}")
    forward, backward = passes.forward, passes.backward
    split = "/t with sequence parallelism" if training.sequence_parallel else "on each of the t GPUs"
    lines += [
        f"    flash attention: F {attention_ms(forward.attention_flops, gpu):.4g} ms, "
        f"B {attention_ms(backward.attention_flops, gpu):.4g} ms",
        f"    elementwise (norms and residual adds {split}; activation, rotary): "
        f"F {memory_ms(forward.elementwise_bytes, gpu):.4g} ms, B {memory_ms(backward.elementwise_bytes, gpu):.4g} ms",
    ]
    return lines


def _gemm_time(name: str, gemm: Gemm, bytes_per_value: float, gpu: Roofline) -> str:
    """`F 0.12 ms (61%)`: a pass's GEMM time and the fraction of the peak it reaches."""
    time = gemm_ms(gemm, bytes_per_value, gpu)
    return f"{name} {time:.4g} ms ({gemm.flops / (time * gpu.tflops * 1e9):.0%})"


def _communication_lines(model: Transformer, training: Training, hardware: Hardware) -> list[str]:
    """The tensor-parallel collectives and ring attention's exchange of a layer, and what they expose."""
    lines = []
    full = training.recompute == "full"
    if training.tensor_parallel > 1 and hardware.tp_bandwidth > 0:
        what = "an all-gather and a reduce-scatter" if training.sequence_parallel else "an all-reduce"
        in_backward = (
            f"2 in B, of which {backward_exchange_ms(model, training, hardware):.4g} ms shows: each block's "
            "input-gradient reduction runs beside its column-parallel weight gradient (training.overlap_tp_comm)"
            if training.overlap_tp_comm
            else "2 in B, not overlapped (training.overlap_tp_comm runs B's beside the weight gradients)"
        )
        lines.append(
            f"  tensor parallelism: {what} of n·h values a block, {block_exchange_ms(model, training, hardware):.4g} ms "
            f"(NCCL's ring at the message's bus bandwidth over {hardware.tp_bandwidth:g} GB/s), 2 in F, {in_backward}"
            + ("; full recomputation runs F's 2 again in B" if full else "")
        )
    elif training.tensor_parallel > 1:
        lines.append(
            "  tensor-parallel collectives not timed (give hardware.tp_bandwidth or hardware.gpu to time them)"
        )
    a2a = all_to_all_ms(model, training, hardware)
    if a2a > 0:
        lines.append(
            f"  expert parallelism: an all-to-all of the n·k routed copies of h values among EP={training.expert_parallel} "
            f"GPUs over {hardware.ep_bandwidth:g} GB/s, {a2a:.4g} ms; dispatch and combine in F, their mirrors in B"
            + (" (and F's again)" if full else "")
            + ": the op times' communication part (forward_comm_times, backward_comm_times), which an overlapped pair "
            "can hide"
        )
    elif model.moe and training.expert_parallel > 1:
        lines.append(
            "  expert-parallel all-to-all not timed (give hardware.ep_bandwidth, hardware.dp_bandwidth or hardware.gpu to time it)"
        )
    ring = kv_exchange_ms(model, training, hardware)
    if ring > 0:
        passes = layer_passes(model, training)
        forward = exposed_ms(ring, passes.forward.attention_flops, training, hardware)
        backward = exposed_ms(2 * ring, passes.backward.attention_flops, training, hardware)
        lines.append(
            f"  context parallelism: ring attention passes keys and values around {training.context_parallel} GPUs, "
            f"{ring:.4g} ms in F and {2 * ring:.4g} ms in B (with their gradients), beside the attention; exposed "
            f"{forward:.4g} ms in F and {backward:.4g} ms in B" + (" (and F's again in B)" if full else "")
        )
    return lines


def _tensor_lines(tensors: list[Tensor], training: Training) -> list[str]:
    t = training.tensor_parallel
    lines = []
    for tensor in tensors:
        split = " /t" if t > 1 and (tensor.sharded or training.sequence_parallel) else ""
        lines.append(
            f"    {tensor.name:<44} {tensor.bytes_per_value:g} bytes a value{split:<3} {_mib(tensor.bytes_per_gpu(training)):>12}"
        )
    lines.append(f"    {'total':<44} {'':<20} {_mib(held_bytes(tensors, training)):>12}")
    return lines


def _stage_lines(description: Description, derivation: Derivation) -> list[str]:
    model, training, hardware = description.model, description.training, description.hardware
    instance = derivation.instance
    lines = ["stage 0 also holds the embedding: a lookup, counted as no FLOPs and no activation memory"]
    if model.vocab > 0:
        head = head_cost(model, training, hardware)
        lines += [
            f"stage {instance.num_stages - 1} also holds the output head: F = B = W = 2n·h·V/t = "
            f"{_flops(head.forward_flops)}; M_B = its input and the loss's softmax (/t) = {_mib(head.activation_bytes)}, M_W = its input and the logits' gradient = {_mib(head.weight_bytes)}",
        ]
    else:
        lines.append("vocabulary 0: no output head or loss counted")
    message = activation_message_bytes(model, training)
    t = training.tensor_parallel
    sliced = scatters_p2p(training)
    lines += [
        _rate_line(hardware),
        f"p2p: latency {hardware.latency:g} us + {message / (t if sliced else 1):.0f} bytes (one microbatch's n·h values"
        + (", /t" if training.sequence_parallel or sliced else "")
        + f") / {hardware.bandwidth:g} GB/s"
        + (" + their all-gather among the t GPUs (Megatron's scatter/gather)" if sliced else "")
        + f" = {instance.p2p_time:.4g} ms",
        *_host_link_lines(hardware, instance),
        f"{'stage':>5} {'device':>6} {'layers':>6} {'F ms':>9} {'B ms':>9} {'W ms':>9} {'M_B MiB':>9} {'M_W MiB':>9}",
    ]
    weights = instance.weight_times
    assert weights is not None  # a derived instance always splits the backward
    for stage, cost in enumerate(derivation.stages):
        extra = " + embedding" if cost.has_embedding else ""
        extra += " + head" if cost.has_head else ""
        lines.append(
            f"{stage:>5} {instance.placement[stage]:>6} {cost.layers:>6} {instance.forward_times[stage]:>9.4g} "
            f"{instance.backward_times[stage]:>9.4g} {weights[stage]:>9.4g} "
            f"{instance.activation_memory[stage]:>9.6g} {instance.weight_memory[stage]:>9.6g}{extra}"
        )
    return lines


def _host_link_lines(hardware: Hardware, instance: Instance) -> list[str]:
    if instance.host_link_bandwidth is None:
        return []
    return [
        f"host link: {hardware.host_link_bandwidth:g} GB/s a direction = {instance.host_link_bandwidth:.6g} MiB a ms; "
        "an offload or a reload of stage s moves all of its M_B (offload_fraction 1) and lasts M_B over it "
        "(docs/offload.md)"
    ]


def _rate_line(hardware: Hardware) -> str:
    """How compute becomes time: by shape on the gpu, or FLOPs at the flat effective rate."""
    if hardware.efficiency is None:
        return f"device: one {hardware.gpu}, its work timed by shape (above), plus the exposed communication"
    return (
        f"device: {hardware.tflops:g} TFLOP/s x efficiency {hardware.efficiency:g} = "
        f"{hardware.tflops * hardware.efficiency:g} TFLOP/s effective; time = FLOPs / "
        f"{effective_flops_per_ms(hardware):.4g} FLOP per ms, plus the exposed communication"
    )


def _state_lines(description: Description, derivation: Derivation) -> list[str]:
    model, training, hardware = description.model, description.training, description.hardware
    zero, replicas = training.zero, training.data_parallel

    def held(value: float, what: str, stage: int) -> str:
        return f"{value:g}/{replicas} {what}" if zero >= stage else f"{value:g} {what}"

    sharded = f"; ZeRO {zero}: sharded over the {replicas} data-parallel replicas" if zero else ""
    lines = [
        f"model state per GPU: parameters x {bytes_per_parameter(training):.4g} bytes "
        f"({held(training.weight_bytes, 'weight', 3)} + {held(training.grad_bytes, 'gradient', 2)} + "
        f"{held(training.optimizer_bytes, 'optimizer', 1)}{sharded})",
        f"  a layer: (h·(h+2g·d) + h² + {3 if model.swiglu else 2}h·f)/t + 2h norms = "
        f"{layer_parameters(model.dense(), training):.4g} parameters",
        f"  the embedding and the head: V·h/t = {model.vocab * model.hidden / training.tensor_parallel:.4g} "
        "parameters each, on the first and the last stage",
    ]
    if model.moe:
        factor = 3 if model.swiglu else 2
        experts = f"{model.experts}/{training.expert_parallel}"
        lines.append(
            f"  a mixture-of-experts layer: (h·(h+2g·d) + h² + {factor}h·f_e·({experts} routed + {model.shared_experts} "
            f"shared))/t + h·E router + 2h norms = {layer_parameters(model, training):.4g} parameters; its routed "
            f"experts' state is sharded over their d/EP = {training.data_parallel // training.expert_parallel} replicas"
        )
    if zero == 3:
        lines += _sharded_lines(description, derivation)
    header = f"{'device':>6} {'parameters':>11} {'state GiB':>10}"
    if derivation.budgets is not None:
        reserve = reserve_bytes(hardware)
        lines.append(
            f"activation budget = GPU memory {memory_text(hardware.gpu_memory, 'B')} - reserve "
            f"{memory_text(reserve, 'B')} - model state (the instance's memory limits)"
        )
        header += f" {'budget GiB':>11}"
    lines.append(header)
    for device, state in enumerate(derivation.states):
        row = f"{device:>6} {state.parameters:>11.4g} {state.bytes / GIB:>10.4g}"
        if derivation.budgets is not None:
            row += f" {derivation.budgets[device] / GIB:>11.4g}"
        lines.append(row)
    return lines


def _sharded_lines(description: Description, derivation: Derivation) -> list[str]:
    """ZeRO 3: the gathered units a device holds, and the exchanges its F, B and W expose."""
    training, hardware = description.training, description.hardware
    lines = [
        "  plus, whole, the weights of the unit it computes and of the one it prefetches: its two largest units "
        f"(a layer, the embedding or the head) x {training.gathered_weight_bytes:g} bytes"
    ]
    if hardware.dp_bandwidth <= 0:
        return [
            *lines,
            "  ZeRO 3's gathers and reductions in the ops not timed (give hardware.dp_bandwidth to time them)",
        ]
    lines.append(
        f"  ZeRO 3 in the ops, over the data-parallel link ({hardware.dp_bandwidth:g} GB/s, {hardware.dp_latency:g} µs "
        "a step): each unit's weights all-gathered before its F and its B, its gradients reduce-scattered after "
        "its W; the F, B and W above include what they expose, a microbatch:"
    )
    lines.append(f"  {'stage':>5} {'F ms':>16} {'B ms':>16} {'W ms':>16}  (exposed of all)")
    for stage, parts in enumerate(derivation.sharded):
        cells = " ".join(f"{f'{part.exposed_ms:.4g} of {part.total_ms:.4g}':>16}" for part in parts)
        lines.append(f"  {stage:>5} {cells}")
    return lines


def _flops(value: float) -> str:
    return f"{value:.4g} FLOPs"


def _mib(value: float) -> str:
    return f"{value / MIB:.4g} MiB"
