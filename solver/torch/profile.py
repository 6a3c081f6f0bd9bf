"""A measured instance: a small GPT-like model built from torch.nn (`solver.torch.stage_model`), profiled
stage by stage (`solver.torch.measure`).

Per stage we time F, B (gradients with respect to the stage's input only) and W (gradients with
respect to the weights), and measure what stays alive from F to B and from B to W; the whole
(unsplit) backward is timed too, as a check. The whole stage runs in one dtype (bf16 by default on
CUDA, fp32 on the CPU), parameters included.

`calibrate` measures one layer alone (no embedding, no head) for each layer shape a plan needs and
returns a `Calibration` (`solver.instances.calibration`): the blocks are then one GPU's share of a
t-way tensor-parallel layer (heads/t and kv_heads/t of the same head size, Megatron's column-parallel
QKV and MLP input projections and row-parallel output projections: the MLP f/t wide), and under
recomputation they run under torch's activation checkpointing (non-reentrant): `full` checkpoints the
whole block, so F keeps only its input, and `selective` the attention core (scaled_dot_product_attention),
so F keeps its queries, keys and values in place of its output. B then runs the checkpointed part
again, which is timed apart (`recompute_ms`, part of B). A shape the device cannot measure is refused
before any measuring: one too big for its free memory, or on the CPU one whose forward is more than
`CPU_MAX_FORWARD_FLOPS`. With two or more CUDA GPUs visible, the all-reduce bus bandwidth is measured
too (`solver.torch.bus_bandwidth`).

torch is optional (the `torch` extra): it is imported only when a profile runs.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import platform
from collections.abc import Callable, Sequence
from typing import Any

from pipesat.models import Instance, InstanceError
from pipesat.models.units import MIB, memory_text
from pipesat.solver.instances.calibration import (
    DTYPE_BYTES,
    BusBandwidth,
    Calibration,
    LayerShape,
    MeasuredLayer,
    layer_shape,
)
from pipesat.solver.instances.cost_model import MEMORY_UNIT, TIME_UNIT
from pipesat.solver.instances.description import Pipeline, Training, Transformer
from pipesat.solver.instances.description_checks import check_model, check_pipeline, check_training
from pipesat.solver.instances.layer_split import even_split
from pipesat.solver.instances.layer_work import held_bytes, layer_activations, linear_flops, score_flops
from pipesat.solver.instances.model_state import layer_parameters
from pipesat.solver.torch.bus_bandwidth import measure_all_reduce
from pipesat.solver.torch.measure import StageProfile, profile_stage
from pipesat.solver.torch.profile_spec import DTYPES, ProfileSpec

INSTALL_HINT = "pipesat profile and calibrate need torch: pip install -e '.[torch]'"
# Texts of the RuntimeErrors torch raises when the memory runs out (besides torch.OutOfMemoryError).
OUT_OF_MEMORY = ("out of memory", "CUBLAS_STATUS_ALLOC_FAILED", "can't allocate memory")
LOWER = (
    "lower `seq_len`, `microbatch_size` or `hidden`, or put fewer layers on each stage (fewer `layers`, "
    "or more `devices` or `chunks`)"
)
LOWER_LAYER = (
    "leave it out with `training.tensor_parallel` or `training.microbatch_sizes`, or measure on a larger device"
)
CPU_MAX_FORWARD_FLOPS = 5e9
"""The most FLOPs a layer's forward may take to be measured on the CPU: at some tens of GFLOP/s a core,
a sample (F, B, W, then F and the whole backward: about 6 forwards) takes a second or two, and a shape
takes up to WARMUP + MAX_ROUNDS x repeats samples."""
MEASURING_COPIES = 3
"""A measured layer holds its saved activations, what W keeps and the gradients flowing at once: about
this many times the model's activation memory (which keeps no attention scores)."""


def profile_instance(spec: ProfileSpec, name: str = "") -> Instance:
    """Profile every stage of the model and return the measured instance (times in ms, memory in MiB).

    Parameters
    ----------
    spec
        The model, the pipeline and how to measure (`ProfileSpec`: `pipesat profile`'s options).
    name
        The instance's name.

    Returns
    -------
    Instance
        The measured F, B, W and memory per stage, the measurements in its metadata.

    Raises
    ------
    InstanceError
        torch is not installed (the `torch` extra), or the spec cannot be measured on its device.
    """
    _check_spec(spec)
    pipeline = Pipeline(spec.devices, spec.microbatches, spec.chunks)
    check_pipeline(pipeline)
    split = even_split(spec.model, pipeline, f"choose `layers` as a multiple of {spec.devices * spec.chunks}")
    torch = _import_torch()
    device = _torch_device(torch, spec.device)
    stages = [_profile_or_explain(torch, spec, device, s, split) for s in range(len(split))]
    data: dict[str, Any] = {
        "name": name,
        "num_devices": spec.devices,
        "num_microbatches": spec.microbatches,
        "chunks": spec.chunks,
        "forward_times": [st.forward for st in stages],
        "backward_times": [st.backward for st in stages],
        "weight_times": [st.weight for st in stages],
        "activation_memory": [st.activation_bytes / MIB for st in stages],
        "weight_memory": [min(st.weight_bytes, st.activation_bytes) / MIB for st in stages],
        "p2p_time": 0.0,
        "time_unit": TIME_UNIT,
        "memory_unit": MEMORY_UNIT,
        "metadata": {
            "source": "pipesat profile",
            "device": _device_name(torch, device),
            "torch": str(torch.__version__),
            "dtype": spec.dtype_name,
            "model": _model_metadata(spec.model, split),
            "full_backward_times": [st.full_backward for st in stages],
            "measured_weight_memory": [st.weight_bytes / MIB for st in stages],
            "repeats": spec.repeats,
            "rounds": [st.rounds for st in stages],
            "stable_medians": all(st.stable for st in stages),
            "p2p_time": "not measured (one device); set it when you use the instance",
        },
    }
    if spec.placement is not None:
        data["placement"] = spec.placement
    return Instance.from_dict(data)


def calibrate(
    layers: Sequence[tuple[Transformer, Training]],
    device: str = "cpu",
    dtype: str = "fp32",
    repeats: int = 5,
    progress: Callable[[MeasuredLayer], None] | None = None,
) -> Calibration:
    """Measure one layer of each distinct shape of `layers` (a model and how it is trained each) on
    `device` in `dtype` and return the calibration; every shape is checked to be measurable before any
    is measured (module notes). `progress` hears of each row as it is measured.

    Parameters
    ----------
    layers
        The (model, training) of each layer shape to measure (`pipesat calibrate SPEC` takes a plan's).
    device
        The torch device (`cpu`, `cuda`).
    dtype
        `fp32`, `bf16` or `fp16`.
    repeats
        Timed runs of each pass.
    progress
        Called with each row as it is measured.

    Returns
    -------
    Calibration
        The measured layers, for `plan(..., PlanOptions(calibration=...))`.

    Raises
    ------
    InstanceError
        torch is not installed, or a shape cannot be measured on `device`.
    """
    specs: dict[LayerShape, ProfileSpec] = {}
    for model, training in layers:
        spec = ProfileSpec(
            devices=1,
            microbatches=1,
            layers=1,
            hidden=model.hidden,
            heads=model.heads,
            seq_len=model.seq_len,
            microbatch_size=model.microbatch_size,
            kv_heads=model.kv_heads,
            ffn_hidden=model.ffn_hidden,
            repeats=repeats,
            device=device,
            dtype=dtype,
            tensor_parallel=training.tensor_parallel,
            recompute=training.recompute,
        )
        _check_spec(spec)
        specs.setdefault(layer_shape(spec.model, spec.training), spec)
    torch = _import_torch()
    torch_device = _torch_device(torch, device)
    for shape, spec in specs.items():
        _check_measurable(torch, torch_device, spec, shape)
    rows = []
    for shape, spec in specs.items():
        what = f"the layer of t{spec.tensor_parallel} ({shape.label}, {spec.dtype_name})"
        measure = functools.partial(profile_stage, torch, spec, torch_device, 1, False, False)
        row = _measured_layer(shape, spec, _explained(torch, spec, what, LOWER_LAYER, measure))
        if progress is not None:
            progress(row)
        rows.append(row)
    gpus = torch.cuda.device_count() if torch_device.type == "cuda" else 0
    all_reduce: tuple[BusBandwidth, ...] = ()
    if gpus >= 2:
        all_reduce = measure_all_reduce("nccl", gpus)
    return Calibration(
        device=_device_name(torch, torch_device),
        dtype=dtype,
        torch=str(torch.__version__),
        repeats=repeats,
        all_reduce_gpus=gpus if all_reduce else 0,
        layers=tuple(rows),
        all_reduce=all_reduce,
    )


def _measured_layer(shape: LayerShape, spec: ProfileSpec, profile: StageProfile) -> MeasuredLayer:
    return MeasuredLayer(
        **dataclasses.asdict(shape),
        tensor_parallel=spec.tensor_parallel,
        forward_ms=profile.forward,
        backward_ms=profile.backward,
        weight_ms=profile.weight,
        recompute_ms=profile.recompute,
        activation_bytes=profile.activation_bytes,
        weight_bytes=profile.weight_bytes,
    )


def _check_spec(spec: ProfileSpec) -> None:
    """Refuse, in one line, a model, a shard, a count of repeats or a dtype that cannot be profiled."""
    check_model(spec.model)
    check_training(spec.model, spec.training)
    if spec.repeats < 1:
        raise InstanceError(f"repeats must be at least 1, got {spec.repeats}")
    if spec.dtype_name not in DTYPES:
        raise InstanceError(f"dtype must be one of {', '.join(DTYPES)}, got {spec.dtype_name!r}")


def _check_measurable(torch: Any, device: Any, spec: ProfileSpec, shape: LayerShape) -> None:
    """Refuse a layer the device cannot measure: on the CPU, one whose forward is more than
    CPU_MAX_FORWARD_FLOPS; anywhere, one that needs more than the device's free memory."""
    model, training = spec.model, spec.training
    what = f"the layer of t{spec.tensor_parallel} ({shape.label})"
    forward = (linear_flops(model) + score_flops(model, training)) / training.tensor_parallel
    if device.type == "cpu" and forward > CPU_MAX_FORWARD_FLOPS:
        raise InstanceError(
            f"{what}: its forward is {forward / 1e9:.3g} GFLOP, more than the {CPU_MAX_FORWARD_FLOPS / 1e9:g} GFLOP "
            f"a CPU measures in reasonable time; {LOWER_LAYER} (`device` cuda)"
        )
    size = DTYPE_BYTES[spec.dtype_name]
    whole = dataclasses.replace(training, recompute="none", bytes_per_value=size)
    need = MEASURING_COPIES * held_bytes(layer_activations(model, whole), whole)
    need += 2 * size * layer_parameters(model, training)  # weights and their gradients
    free = _free_bytes(torch, device)
    if free is not None and need > free:
        raise InstanceError(
            f"{what} needs about {memory_text(need, 'B')} to measure but {device.type} has "
            f"{memory_text(free, 'B')} free; {LOWER_LAYER}"
        )


def _free_bytes(torch: Any, device: Any) -> float | None:
    """The device's free memory in bytes (None where the system does not say)."""
    if device.type == "cuda":
        return float(torch.cuda.mem_get_info(device)[0])
    try:
        return float(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return None


def _model_metadata(model: Transformer, split: tuple[int, ...]) -> dict[str, Any]:
    grouped = ", grouped-query (enable_gqa)" if model.kv_heads not in (0, model.heads) else ""
    return dataclasses.asdict(model) | {
        "attention": f"torch scaled_dot_product_attention, causal{grouped}",
        "mlp": "SwiGLU" if model.swiglu else "GELU",
        "mlp_width": model.mlp_width,
        "layers_per_stage": list(split),
    }


def _import_torch() -> Any:
    try:
        import torch
    except ImportError:
        raise InstanceError(INSTALL_HINT) from None
    return torch


def _torch_device(torch: Any, name: str) -> Any:
    if name not in ("cpu", "cuda"):
        raise InstanceError(f"device must be cpu or cuda, got {name!r}")
    if name == "cuda" and not torch.cuda.is_available():
        raise InstanceError("device cuda asked for but torch sees no CUDA device; use `device` cpu")
    return torch.device(name)


def _device_name(torch: Any, device: Any) -> str:
    if device.type == "cuda":
        return f"cuda: {torch.cuda.get_device_name(device)}"
    return f"cpu: {platform.processor() or platform.machine()}, torch threads: {torch.get_num_threads()}"


def _profile_or_explain(torch: Any, spec: ProfileSpec, device: Any, index: int, split: tuple[int, ...]) -> StageProfile:
    """Profile one stage of the pipeline (`_explained`)."""
    layers = f"{split[index]} layer{'s' if split[index] > 1 else ''}"
    first, last = index == 0, index == len(split) - 1
    measure = functools.partial(profile_stage, torch, spec, device, split[index], first, last)
    return _explained(torch, spec, f"stage {index} ({layers}, {spec.dtype_name})", LOWER, measure)


def _explained(
    torch: Any, spec: ProfileSpec, what: str, lower: str, measure: Callable[[], StageProfile]
) -> StageProfile:
    """`measure()`; running out of memory (saying `what` ran out and what to `lower`), or a dtype torch
    cannot run there, is one line (`InstanceError`)."""
    try:
        return measure()
    except RuntimeError as error:  # torch.OutOfMemoryError is a RuntimeError
        text = str(error)
        if isinstance(error, torch.OutOfMemoryError) or any(marker in text for marker in OUT_OF_MEMORY):
            raise InstanceError(f"{what} ran out of memory on {spec.device}; {lower}") from None
        if "not implemented for" in text:
            reason = text.strip().splitlines()[0]
            raise InstanceError(
                f"torch {torch.__version__} cannot run the model in {spec.dtype_name} on {spec.device} ({reason}); "
                "choose another `dtype`"
            ) from None
        raise
