"""An analytic cost model: a transformer description and its hardware -> an `Instance`.

Per transformer layer the ZB paper gives (docs/cost-model.md derives each term and names its source),
with s = sequence length, b = microbatch size, h = hidden size and a = heads:

    F FLOPs  s·b·h·(24h + 4s)        M_B = s·b·(34h + 5a·s)  bytes at 2 bytes a value
    B FLOPs  s·b·h·(24h + 8s)        M_W = 32·s·b·h          bytes at 2 bytes a value
    W FLOPs  s·b·h·24h

The layers are split over the p·v stages (evenly, or by an explicit per-stage count). The embedding
sits on the first stage and is a lookup: no FLOPs and no activation memory are counted for it. The
output head and the loss sit on the last stage: the head is one h x V matmul, so F, B and W each cost
2·s·b·h·V FLOPs, and it keeps its input and the s·b·V logits (then their gradient) for the backward;
the loss's elementwise work (a few FLOPs per logit, under 1/h of the head) is left out.

With flash attention (`Transformer.flash_attention`) the attention scores are not stored (M_B loses
its 5a·s term) and B recomputes them (2·s·b·h·s more FLOPs).

Times are FLOPs over the effective throughput (TFLOP/s x efficiency), in milliseconds rounded to 6
significant digits; memory is in MiB (bytes over 2^20, no rounding); the p2p time is the link latency
plus one microbatch's activation (s·b·h values) over the link.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

from models import Instance, InstanceError

TIME_UNIT = "ms"
MEMORY_UNIT = "MiB"
MIB = 2**20


@dataclass(frozen=True)
class Transformer:
    """A dense GPT-style transformer: `layers` blocks of MHA + a 4h MLP, and an output head over `vocab`.

    With `flash_attention` the a·s x s attention scores are not kept for the backward (M_B loses its
    5a·s term) and the backward recomputes them (2·s·b·h·s more B FLOPs).
    """

    layers: int
    hidden: int
    heads: int
    seq_len: int
    microbatch_size: int = 1
    vocab: int = 0
    flash_attention: bool = False


@dataclass(frozen=True)
class Hardware:
    """Device throughput (peak TFLOP/s and the fraction reached) and the link between devices."""

    tflops: float
    efficiency: float = 0.5
    bandwidth: float = 50.0  # GB/s (1e9 bytes per second)
    latency: float = 10.0  # microseconds
    bytes_per_value: float = 2.0


@dataclass(frozen=True)
class Pipeline:
    """How the model is cut: p devices, v chunks each, m microbatches, and optionally the layers per stage."""

    devices: int
    microbatches: int
    chunks: int = 1
    placement: str | None = None
    layers_per_stage: tuple[int, ...] | None = None


@dataclass(frozen=True)
class Cost:
    """FLOPs of the three passes and the memory (bytes) held from F to B (M_B) and from B to W (M_W)."""

    forward_flops: float
    backward_flops: float
    weight_flops: float
    activation_bytes: float
    weight_bytes: float

    def plus(self, other: Cost, times: int = 1) -> Cost:
        """This cost plus `times` copies of `other`."""
        return Cost(*(getattr(self, f.name) + times * getattr(other, f.name) for f in fields(Cost)))


NO_COST = Cost(0, 0, 0, 0, 0)


@dataclass(frozen=True)
class StageCost:
    """One stage: its layer count, whether it holds the embedding or the head, and its total cost."""

    layers: int
    has_embedding: bool
    has_head: bool
    cost: Cost


def layer_cost(model: Transformer, hardware: Hardware) -> Cost:
    """One transformer layer, by the ZB paper's formulas; memory scaled from 2 to `bytes_per_value` bytes."""
    s, b, h, a = model.seq_len, model.microbatch_size, model.hidden, model.heads
    scale = hardware.bytes_per_value / 2
    flash = model.flash_attention
    return Cost(
        forward_flops=s * b * h * (24 * h + 4 * s),
        backward_flops=s * b * h * (24 * h + (10 if flash else 8) * s),
        weight_flops=s * b * h * 24 * h,
        activation_bytes=s * b * (34 * h + (0 if flash else 5 * a * s)) * scale,
        weight_bytes=32 * s * b * h * scale,
    )


def head_cost(model: Transformer, hardware: Hardware) -> Cost:
    """The output head (h x V matmul) and the loss: input and logits held until B, input and their gradient until W."""
    s, b, h, vocab = model.seq_len, model.microbatch_size, model.hidden, model.vocab
    flops = 2 * s * b * h * vocab
    held = s * b * (h + vocab) * hardware.bytes_per_value
    return Cost(flops, flops, flops, held, held)


def check_description(model: Transformer, hardware: Hardware, pipeline: Pipeline) -> None:
    """Raise `InstanceError` with one line for the first thing wrong in the description."""
    check_model(model)
    check_pipeline(pipeline)
    for name, value in (
        ("tflops", hardware.tflops),
        ("bandwidth", hardware.bandwidth),
        ("bytes_per_value", hardware.bytes_per_value),
    ):
        if not math.isfinite(value) or value <= 0:
            raise InstanceError(f"{name} must be a positive number, got {value:g}")
    if not math.isfinite(hardware.efficiency) or not 0 < hardware.efficiency <= 1:
        raise InstanceError(
            f"efficiency must be in (0, 1] (the fraction of peak throughput reached), got {hardware.efficiency:g}"
        )
    if not math.isfinite(hardware.latency) or hardware.latency < 0:
        raise InstanceError(f"latency must be a non-negative number of microseconds, got {hardware.latency:g}")


def check_pipeline(pipeline: Pipeline) -> None:
    """Raise `InstanceError` when the device, chunk or microbatch count is not a positive whole number."""
    for name, value in (
        ("devices", pipeline.devices),
        ("microbatches", pipeline.microbatches),
        ("chunks", pipeline.chunks),
    ):
        _whole(name, value, minimum=1)


def check_model(model: Transformer) -> None:
    """Raise `InstanceError` when the transformer's sizes are not positive whole numbers or heads do not divide hidden."""
    for name, value in (
        ("layers", model.layers),
        ("hidden", model.hidden),
        ("heads", model.heads),
        ("seq_len", model.seq_len),
        ("microbatch_size", model.microbatch_size),
    ):
        _whole(name, value, minimum=1)
    _whole("vocab", model.vocab, minimum=0)
    if model.hidden % model.heads:
        raise InstanceError(
            f"hidden {model.hidden} is not divisible by heads {model.heads}; the head size hidden/heads must be whole"
        )


def layer_split(model: Transformer, pipeline: Pipeline) -> tuple[int, ...]:
    """Layers per stage: the explicit split when given (checked), else an even split."""
    num_stages = pipeline.devices * pipeline.chunks
    split = pipeline.layers_per_stage
    if split is None:
        if model.layers % num_stages:
            raise InstanceError(
                f"{model.layers} layers do not split evenly over {pipeline.devices} x {pipeline.chunks} = "
                f"{num_stages} stages; give --layers-per-stage with {num_stages} counts summing to {model.layers}"
            )
        return (model.layers // num_stages,) * num_stages
    if len(split) != num_stages:
        raise InstanceError(
            f"layers per stage lists {len(split)} counts but there are {pipeline.devices} x {pipeline.chunks} = "
            f"{num_stages} stages; give one count per stage"
        )
    for s, count in enumerate(split):
        _whole(f"layers per stage [{s}]", count, minimum=0)
    if sum(split) != model.layers:
        raise InstanceError(
            f"layers per stage sum to {sum(split)} but the model has {model.layers} layers; make them add up"
        )
    return tuple(split)


def stage_costs(model: Transformer, hardware: Hardware, pipeline: Pipeline) -> list[StageCost]:
    """Per-stage FLOPs and memory; the embedding on stage 0, the head and loss on the last stage."""
    check_description(model, hardware, pipeline)
    split = layer_split(model, pipeline)
    layer, head = layer_cost(model, hardware), head_cost(model, hardware)
    last = len(split) - 1
    costs = []
    for s, count in enumerate(split):
        with_head = s == last and model.vocab > 0
        cost = (head if with_head else NO_COST).plus(layer, count)
        if cost.forward_flops == 0:
            what = "the embedding lookup" if s == 0 else "nothing"
            raise InstanceError(
                f"stage {s} has 0 layers and only {what}, so it does no work; give it at least one layer"
            )
        costs.append(StageCost(layers=count, has_embedding=s == 0, has_head=with_head, cost=cost))
    return costs


def effective_flops_per_ms(hardware: Hardware) -> float:
    return hardware.tflops * 1e12 * hardware.efficiency / 1e3


def activation_message_bytes(model: Transformer, hardware: Hardware) -> float:
    """What one microbatch sends between stages: its s·b·h activation (or the gradient of it)."""
    return model.seq_len * model.microbatch_size * model.hidden * hardware.bytes_per_value


def p2p_time(model: Transformer, hardware: Hardware) -> float:
    """Latency plus one microbatch's activation over the link, in ms."""
    transfer_ms = activation_message_bytes(model, hardware) / (hardware.bandwidth * 1e9) * 1e3
    return hardware.latency / 1e3 + transfer_ms


def model_instance(model: Transformer, hardware: Hardware, pipeline: Pipeline, name: str = "") -> Instance:
    """The instance of this model on this hardware: times in ms, memory in MiB, the description in metadata."""
    costs = stage_costs(model, hardware, pipeline)
    rate = effective_flops_per_ms(hardware)
    data = {
        "name": name,
        "num_devices": pipeline.devices,
        "num_microbatches": pipeline.microbatches,
        "chunks": pipeline.chunks,
        "forward_times": [_significant(c.cost.forward_flops / rate) for c in costs],
        "backward_times": [_significant(c.cost.backward_flops / rate) for c in costs],
        "weight_times": [_significant(c.cost.weight_flops / rate) for c in costs],
        "activation_memory": [c.cost.activation_bytes / MIB for c in costs],
        "weight_memory": [c.cost.weight_bytes / MIB for c in costs],
        "p2p_time": _significant(p2p_time(model, hardware)),
        "time_unit": TIME_UNIT,
        "memory_unit": MEMORY_UNIT,
        "metadata": {
            "source": "pipesat instance from-model (ZB paper cost model, docs/cost-model.md)",
            "model": vars(model) | {"layers_per_stage": [c.layers for c in costs]},
            "hardware": vars(hardware),
        },
    }
    if pipeline.placement is not None:
        data["placement"] = pipeline.placement
    return Instance.from_dict(data)


def command_line(model: Transformer, hardware: Hardware, pipeline: Pipeline) -> str:
    """The `pipesat instance from-model` command that makes this instance."""
    words = [
        "pipesat instance from-model",
        f"--layers {model.layers} --hidden {model.hidden} --heads {model.heads} --seq-len {model.seq_len}",
        f"--microbatch-size {model.microbatch_size} --vocab {model.vocab}"
        + (" --flash-attention" if model.flash_attention else ""),
        f"-p {pipeline.devices} --chunks {pipeline.chunks} -m {pipeline.microbatches}",
    ]
    if pipeline.placement is not None:
        words.append(f"--placement {pipeline.placement}")
    if pipeline.layers_per_stage is not None:
        words.append("--layers-per-stage " + ",".join(str(count) for count in pipeline.layers_per_stage))
    words.append(
        f"--tflops {hardware.tflops:g} --efficiency {hardware.efficiency:g} --bandwidth {hardware.bandwidth:g} "
        f"--latency {hardware.latency:g} --bytes-per-value {hardware.bytes_per_value:g}"
    )
    return " ".join(words)


def explain(model: Transformer, hardware: Hardware, pipeline: Pipeline) -> list[str]:
    """The derivation of `model_instance`, as readable lines."""
    costs = stage_costs(model, hardware, pipeline)
    instance = model_instance(model, hardware, pipeline)
    s, b, h, a, vocab = model.seq_len, model.microbatch_size, model.hidden, model.heads, model.vocab
    layer, head = layer_cost(model, hardware), head_cost(model, hardware)
    rate = effective_flops_per_ms(hardware)
    bpv, flash = hardware.bytes_per_value, model.flash_attention
    p, v = pipeline.devices, pipeline.chunks
    lines = [
        f"model: {model.layers} layers, hidden h={h}, heads a={a}, sequence s={s}, microbatch b={b}, vocabulary V={vocab}",
        f"pipeline: p={p} devices x v={v} chunks = {p * v} stages ({instance.placement_name()} placement), "
        f"m={pipeline.microbatches} microbatches; layers per stage: {' '.join(str(c.layers) for c in costs)}",
        "per transformer layer (ZB paper, docs/cost-model.md):",
        f"  F = s·b·h·(24h+4s) = {_flops(layer.forward_flops)}",
        f"  B = s·b·h·(24h+{10 if flash else 8}s) = {_flops(layer.backward_flops)}"
        + (" (flash attention: +2s·b·h·s to recompute the scores)" if flash else ""),
        f"  W = s·b·h·24h = {_flops(layer.weight_flops)}",
        f"  M_B = s·b·({'34h' if flash else '34h+5a·s'}) bytes at 2 bytes a value, x {bpv:g}/2 = "
        f"{_mib(layer.activation_bytes)}" + (" (flash attention: no a·s x s scores kept)" if flash else ""),
        f"  M_W = 32·s·b·h bytes at 2 bytes a value, x {bpv:g}/2 = {_mib(layer.weight_bytes)}",
        "stage 0 also holds the embedding: a lookup, counted as no FLOPs and no activation memory",
    ]
    if vocab > 0:
        lines += [
            f"stage {p * v - 1} also holds the output head and the loss: F = B = W = 2·s·b·h·V = {_flops(head.forward_flops)};",
            f"  M_B = M_W = s·b·(h+V)·{bpv:g} bytes (input and logits, then their gradient) = {_mib(head.activation_bytes)};",
            "  the loss's elementwise work (a few FLOPs per logit) is left out",
        ]
    else:
        lines.append("vocabulary 0: no output head or loss counted")
    message = activation_message_bytes(model, hardware)
    lines += [
        f"device: {hardware.tflops:g} TFLOP/s x efficiency {hardware.efficiency:g} = {hardware.tflops * hardware.efficiency:g} "
        f"TFLOP/s effective; time = FLOPs / {rate:.4g} FLOP per ms",
        f"p2p: latency {hardware.latency:g} us + s·b·h·{bpv:g} = {message:.0f} bytes / {hardware.bandwidth:g} GB/s "
        f"= {instance.p2p_time:.4g} ms",
        f"{'stage':>5} {'device':>6} {'layers':>6} {'F ms':>9} {'B ms':>9} {'W ms':>9} {'M_B MiB':>9} {'M_W MiB':>9}",
    ]
    for stage, cost in enumerate(costs):
        extra = " + embedding" if cost.has_embedding else ""
        extra += " + head" if cost.has_head else ""
        lines.append(
            f"{stage:>5} {instance.placement[stage]:>6} {cost.layers:>6} {instance.forward_times[stage]:>9.4g} "
            f"{instance.backward_times[stage]:>9.4g} {instance.weight_times[stage]:>9.4g} "
            f"{instance.activation_memory[stage]:>9.6g} {instance.weight_memory[stage]:>9.6g}{extra}"
        )
    return lines


def _whole(name: str, value: object, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InstanceError(f"{name} must be a whole number, got {value!r}")
    if value < minimum:
        raise InstanceError(f"{name} must be at least {minimum}, got {value}")


def _significant(value: float) -> float:
    """Times keep 6 significant digits: the model is far less precise, and the files stay readable."""
    return float(f"{value:.6g}")


def _flops(value: float) -> str:
    return f"{value:.4g} FLOPs"


def _mib(value: float) -> str:
    return f"{value:.0f} bytes = {value / MIB:.4g} MiB"
