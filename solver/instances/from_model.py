"""`pipesat instance from-model`: a model description -> the instance it makes, with what it derived.

The cost model (`cost_model`) gives each stage's FLOPs and activations, the layer split is even,
explicit or balanced (`layer_balance`), and with a GPU memory the model state (`model_state`) turns
it into each device's activation budget, written as the instance's per-device memory limits. A
host link (`Hardware.host_link_bandwidth`, GB/s a direction) becomes the instance's, in MiB a ms,
with all of a stage's M_B to offload (docs/offload.md).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipesat.models import Instance, InstanceError
from pipesat.models.errors import unknown_hint
from pipesat.models.limits import DEFAULT_MAX_LAYERS, check_cap
from pipesat.models.units import MIB
from pipesat.solver.instances.calibration import Calibration, MeasuredLayer, load_calibration, measured_layer_cost
from pipesat.solver.instances.communication import p2p_time
from pipesat.solver.instances.cost_model import (
    MEMORY_UNIT,
    TIME_UNIT,
    StageCost,
    instance_bandwidth,
    significant,
    stage_costs,
    stage_times,
)
from pipesat.solver.instances.data_parallel import Exchange, sharded_exchanges
from pipesat.solver.instances.description import Hardware, Pipeline, Training, Transformer
from pipesat.solver.instances.description_checks import check_description
from pipesat.solver.instances.keys import keys
from pipesat.solver.instances.layer_balance import balanced_split
from pipesat.solver.instances.layer_split import layer_split
from pipesat.solver.instances.model_state import DeviceState, activation_budgets, device_states

SOURCE = "pipesat instance from-model (docs/cost-model.md)"
LISTING = "the keys are the fields of Transformer, Training, Hardware and Pipeline (the options of `pipesat instance from-model`)"


@dataclass(frozen=True)
class Description:
    """Everything `from-model` is told: the model, how it is trained, the hardware and the pipeline."""

    model: Transformer
    training: Training
    hardware: Hardware
    pipeline: Pipeline


@dataclass(frozen=True)
class Derivation:
    """What the description gives: the layer split, each stage's cost and its F, B, W in ms, each
    device's model state, each device's activation budget in bytes (None without a GPU memory), each
    stage's ZeRO-3 exchanges beside its F, B and W (what they expose is in `times`), and the
    calibration's row that gave the layer's cost (None: the model's)."""

    split: tuple[int, ...]
    stages: list[StageCost]
    times: list[tuple[float, float, float]]
    states: list[DeviceState]
    budgets: list[float] | None
    instance: Instance
    sharded: list[tuple[Exchange, Exchange, Exchange]]
    measured: MeasuredLayer | None = None


def derive(description: Description, name: str = "", calibration: Calibration | None = None) -> Derivation:
    """Check the description and derive the instance and everything it was made from; a layer whose
    shape `calibration` has costs what was measured (`solver.instances.calibration`)."""
    model, training, hardware, pipeline = (
        description.model,
        description.training,
        description.hardware,
        description.pipeline,
    )
    check_description(model, training, hardware, pipeline)
    measured = None
    if calibration is not None:
        calibration.check_training(training)
        measured = calibration.measured(model, training)
    layer = None if measured is None else measured_layer_cost(measured, model, training, hardware)
    # A bidirectional pipeline (DualPipe) holds the model twice: its layers are cut for one copy, p
    # stages, which the instance mirrors; each device holds a stage of both, so twice the parameters.
    copies = 2 if pipeline.placement == "bidirectional" else 1
    cut = pipeline if copies == 1 else dataclasses.replace(pipeline, chunks=1, placement=None)
    split = balanced_split(model, training, hardware, cut, layer) if cut.balance else layer_split(model, cut)
    stages = stage_costs(model, training, hardware, split, layer) * copies  # one per instance stage
    raw_times = [stage_times(stage.cost) for stage in stages]
    sharded = sharded_exchanges(model, training, hardware, stages)  # ZeRO 3: in the ops, what they expose
    times = [
        (significant(f + on_f.exposed_ms), significant(b + on_b.exposed_ms), significant(w + on_w.exposed_ms))
        for (f, b, w), (on_f, on_b, on_w) in zip(raw_times, sharded, strict=True)
    ]
    data: dict[str, Any] = {
        "name": name,
        "num_devices": pipeline.devices,
        "num_microbatches": pipeline.microbatches,
        "chunks": pipeline.chunks,
        "forward_times": [t[0] for t in times],
        "backward_times": [t[1] for t in times],
        "weight_times": [t[2] for t in times],
        "activation_memory": [stage.cost.activation_bytes / MIB for stage in stages],
        "weight_memory": [stage.cost.weight_bytes / MIB for stage in stages],
        "p2p_time": significant(p2p_time(model, training, hardware)),
        "time_unit": TIME_UNIT,
        "memory_unit": MEMORY_UNIT,
    }
    if any(stage.cost.forward_a2a_ms or stage.cost.backward_a2a_ms for stage in stages):
        # The experts' all-to-all, part of the op times: what an overlapped pair can hide.
        data["forward_comm_times"] = [significant(stage.cost.forward_a2a_ms) for stage in stages]
        data["backward_comm_times"] = [significant(stage.cost.backward_a2a_ms) for stage in stages]
    if pipeline.placement is not None:
        data["placement"] = pipeline.placement
    if hardware.host_link_bandwidth is not None:
        data["host_link_bandwidth"] = instance_bandwidth(hardware.host_link_bandwidth)
        data["offload_fraction"] = 1.0  # all of M_B
    instance = Instance.from_dict(data)
    states = device_states(model, training, stages, instance.placement)
    budgets = activation_budgets(hardware, states) if hardware.gpu_memory > 0 else None
    metadata = {
        "source": SOURCE,
        "model": vars(model) | {"layers_per_stage": list(split)},
        "training": vars(training),
        "hardware": vars(hardware),
        "model_state_mib": [state.bytes / MIB for state in states],
    }
    if calibration is not None:
        row = "none: the model's layer" if measured is None else dataclasses.asdict(measured)
        metadata["calibration"] = {"file": calibration.name, "row": row}
    instance = dataclasses.replace(instance, metadata=metadata)
    if budgets is not None:
        instance = instance.with_limit([budget / MIB for budget in budgets])
    return Derivation(split, stages, times, states, budgets, instance, sharded, measured)


def model_instance(description: Description, name: str = "") -> Instance:
    """The instance of this model on this hardware: times in ms, memory in MiB, the description in
    metadata, and per-device activation budgets as its memory limits when the GPU memory is given."""
    return derive(description, name).instance


def instance_from_model(
    *,
    name: str = "",
    calibration: Calibration | str | Path | None = None,
    max_layers: int = DEFAULT_MAX_LAYERS,
    **keys_given: Any,
) -> Instance:
    """The instance `pipesat instance from-model` makes, with the command's defaults.

    Parameters
    ----------
    name
        The instance's name.
    calibration
        A calibration (`pipesat calibrate`), or its file: a layer whose shape it has costs what was
        measured.
    max_layers
        Refuse a model of more layers than this.
    **keys_given
        The description's keys by their names (those of `Transformer`, `Training`, `Hardware` and
        `Pipeline`; the command's options without the dashes): `layers`, `hidden`, `heads`, `seq_len`,
        `devices`, `microbatches` are required; `gpu="H100-SXM"`, `gpu_memory="80GiB"`,
        `tensor_parallel=2`, ... as a plan spec writes them.

    Returns
    -------
    Instance
        Times in ms and memory in MiB, the description in its metadata and, with a GPU memory, each
        device's activation budget as its memory limit.

    Raises
    ------
    InstanceError
        An unknown or missing key, a value not of its kind, or a description that does not fit together.
    """
    records = (Transformer, Training, Hardware, Pipeline)
    declared = {key_name: (record, key) for record in records for key_name, key in keys(record).items()}
    unknown = sorted(set(keys_given) - set(declared))
    if unknown:
        raise InstanceError(f"unknown key {unknown[0]!r}{unknown_hint(unknown[0], declared, LISTING)}")
    values: dict[type, dict[str, Any]] = {record: {} for record in records}
    for key_name, value in keys_given.items():
        record, key = declared[key_name]
        values[record][key_name] = key.read(value, key_name)
    for key_name, (_, key) in declared.items():
        if key.required and key_name not in keys_given:
            raise InstanceError(f"{key_name} is missing; give it as {key.kind.what}")
    check_cap("model.layers", values[Transformer]["layers"], max_layers, "max_layers")
    description = Description(*(record(**values[record]) for record in records))  # type: ignore[arg-type]
    if isinstance(calibration, (str, Path)):
        calibration = load_calibration(calibration)
    return derive(description, name, calibration).instance
