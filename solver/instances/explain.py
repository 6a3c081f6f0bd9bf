"""The arithmetic behind `from-model`, as lines people read (`--explain`, and the comments on top of
the instance file it writes), and the command line that makes the same instance again."""

from __future__ import annotations

from pipesat.models.units import memory_text
from pipesat.solver.instances.cost_model import (
    MIB,
    Tensor,
    Training,
    activation_message_bytes,
    all_reduce_ms,
    effective_flops_per_ms,
    head_cost,
    held_bytes,
    layer_activations,
    layer_cost,
    linear_flops,
    score_flops,
    weight_gradient_inputs,
)
from pipesat.solver.instances.from_model import Derivation, Description
from pipesat.solver.instances.keys import keys
from pipesat.solver.instances.layer_balance import slowest_stage_ms
from pipesat.solver.instances.model_state import bytes_per_parameter, layer_parameters, reserve_bytes


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
        *_options(training, "recompute tensor_parallel data_parallel bytes_per_value weight_bytes", changed=True),
        *_options(training, "grad_bytes optimizer_bytes flash_attention causal dropout", changed=True),
        *_options(training, "sequence_parallel zero1", changed=True),
        *_options(pipeline, "balance", changed=True),
        *_options(pipeline, "devices chunks microbatches"),
        *_options(pipeline, "placement layers_per_stage", changed=True),
        *_options(hardware, "tflops efficiency bandwidth latency"),
        *_options(hardware, "tp_bandwidth", changed=True),
        *(_options(hardware, "gpu_memory reserve") if hardware.gpu_memory > 0 else []),
    ]
    return " ".join(words)


def _options(record: object, names: str, changed: bool = False) -> list[str]:
    """The options that give `record`'s keys `names` (space-separated); `changed`: only those not at
    their declared default."""
    declared = keys(type(record))
    return [
        declared[name].option_text(name, getattr(record, name))
        for name in names.split()
        if not changed or getattr(record, name) != declared[name].default
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
    kernel = ("causal " if training.causal else "") + ("flash attention" if training.flash_attention else "attention")
    split = " ".join(str(count) for count in derivation.split)
    if pipeline.balance:
        slowest = slowest_stage_ms(derivation.split, model, training, description.hardware)
        split += f" (balanced: the slowest stage's F+B+W is {slowest:.4g} ms)"
    return [
        f"model: {model.layers} layers, hidden h={model.hidden}, {attention}, {mlp}, sequence s={model.seq_len}, "
        f"microbatch b={model.microbatch_size}, vocabulary V={model.vocab}",
        f"training: {training.bytes_per_value:g} bytes a value, {kernel}, "
        f"{'dropout' if training.dropout else 'no dropout'}, recompute {training.recompute}, "
        f"tensor parallel t={training.tensor_parallel}"
        + (" with sequence parallelism" if training.sequence_parallel else "")
        + f", data parallel {training.data_parallel}",
        f"pipeline: p={pipeline.devices} devices x v={pipeline.chunks} chunks = {instance.num_stages} stages "
        f"({instance.placement_name()} placement), m={pipeline.microbatches} microbatches; layers per stage: {split}",
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
    lines = [
        f"per transformer layer, on each GPU (n = s·b = {n} tokens, g·d = {model.kv_width}; docs/cost-model.md):",
        f"  L = 2n·h·(h+2g·d) + 2n·h² + {mlp_factor}n·h·f = {_flops(linear_flops(model))}",
        f"  S = 4n·s·h·c = {_flops(scores)} (c = {causal})",
        f"  F = (L + S)/t = {_flops(layer.forward_flops)}",
        f"  B = ({backward_terms})/t = {_flops(layer.backward_flops)}",
        f"  W = L/t = {_flops(layer.weight_flops)}",
    ]
    reduce = all_reduce_ms(model, training, hardware)
    if t > 1:
        lines.append(
            f"  tensor-parallel all-reduce of n·h values: {reduce:.4g} ms each, "
            f"{2} in F and {4 if training.recompute == 'full' else 2} in B"
            if reduce > 0
            else "  tensor-parallel all-reduces not timed (give --tp-bandwidth to time them)"
        )
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
        head = head_cost(model, training)
        lines += [
            f"stage {instance.num_stages - 1} also holds the output head: F = B = W = 2n·h·V/t = "
            f"{_flops(head.forward_flops)}; M_B = M_W = its input and the logits (/t) = {_mib(head.activation_bytes)}",
        ]
    else:
        lines.append("vocabulary 0: no output head or loss counted")
    message = activation_message_bytes(model, training)
    lines += [
        f"device: {hardware.tflops:g} TFLOP/s x efficiency {hardware.efficiency:g} = "
        f"{hardware.tflops * hardware.efficiency:g} TFLOP/s effective; time = FLOPs / {effective_flops_per_ms(hardware):.4g} "
        "FLOP per ms",
        f"p2p: latency {hardware.latency:g} us + {message:.0f} bytes (one microbatch's n·h values"
        + (", /t" if training.sequence_parallel else "")
        + f") / {hardware.bandwidth:g} GB/s = {instance.p2p_time:.4g} ms",
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


def _state_lines(description: Description, derivation: Derivation) -> list[str]:
    model, training, hardware = description.model, description.training, description.hardware
    optimizer = f"{training.optimizer_bytes:g}" + (f"/{training.data_parallel} (ZeRO-1)" if training.zero1 else "")
    lines = [
        f"model state per GPU: parameters x {bytes_per_parameter(training):g} bytes ({training.weight_bytes:g} weight "
        f"+ {training.grad_bytes:g} gradient + {optimizer} optimizer)",
        f"  a layer: (h·(h+2g·d) + h² + {3 if model.swiglu else 2}h·f)/t + 2h norms = "
        f"{layer_parameters(model, training):.4g} parameters",
        f"  the embedding and the head: V·h/t = {model.vocab * model.hidden / training.tensor_parallel:.4g} "
        "parameters each, on the first and the last stage",
    ]
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
        row = f"{device:>6} {state.parameters:>11.4g} {state.bytes / 2**30:>10.4g}"
        if derivation.budgets is not None:
            row += f" {derivation.budgets[device] / 2**30:>11.4g}"
        lines.append(row)
    return lines


def _flops(value: float) -> str:
    return f"{value:.4g} FLOPs"


def _mib(value: float) -> str:
    return f"{value / MIB:.4g} MiB"
