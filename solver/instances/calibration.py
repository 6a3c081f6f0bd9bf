"""A calibration file: one transformer layer's measured F, B, W and memory for each shape a plan needs,
and the layer cost it gives in place of the analytic model's (docs/calibration.md).

`pipesat calibrate SPEC` measures, on the device it runs on, one layer for every shape the plan's
configurations use: what one GPU computes of a layer (`LayerShape`: the hidden size, the head size,
heads/t and kv_heads/t, the MLP and its width f/t for tensor parallelism t, the sequence, the
microbatch size and the recomputation). A plan and `instance from-model` given the file then use,
for a layer whose shape the file has (`Calibration.measured`), the measured times and memory
(`measured_layer_cost`); the embedding, the head, the tensor-parallel communication and the model
state stay the model's, and a shape the file lacks is the model's entirely. The measured layer is
causal attention (torch's scaled_dot_product_attention, which keeps no scores) without dropout over
the whole sequence, in the file's dtype: a training that differs (no flash attention, non-causal,
dropout, context parallelism) uses the model, and a training whose `bytes_per_value` is not the
dtype's is refused.

Sequence parallelism splits a layer's inputs and norms over the t GPUs, which a layer measured on one
GPU keeps whole; under it the measured memory is scaled by the model's ratio of the two.

Every value is a key (`solver.instances.keys`), checked on construction and on reading with one line
naming the file and the row (`cal.yaml: layers[2].forward_ms must be in (0, 1e+09], got -1`): a
time is positive and at most MAX_MS, an amount of memory at most MAX_BYTES (beyond them a stage's sum
overflows), and `recompute_ms`, a part of `backward_ms`, at most it. A file holds at most MAX_ROWS
layer rows. The file is YAML; this module reads and writes it and imports no torch.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from pipesat.models import InputError, InstanceError
from pipesat.models.document import Cap, read_document, write_text
from pipesat.models.errors import unknown_hint
from pipesat.models.training_modes import RECOMPUTE, Recompute
from pipesat.models.units import MIB
from pipesat.solver.instances.cost_model import Cost, layer_cost
from pipesat.solver.instances.description import Hardware, Training, Transformer
from pipesat.solver.instances.keys import Keyed, key, keys
from pipesat.solver.instances.value_kinds import NUMBER, TEXT, WHOLE, Word

DTYPE_BYTES = {"bf16": 2, "fp16": 2, "fp32": 4}
"""The dtypes a layer is measured in, and the bytes a value each keeps (`Training.bytes_per_value`)."""
MLPS = ("GELU", "SwiGLU")
MAX_MS = 1e9
"""The longest layer time a row may give (11.6 days)."""
MAX_BYTES = 1 << 60
"""The most memory a row may give."""
MAX_ROWS = 10_000
"""The most layer rows a file holds: a plan needs a shape for each of at most 10,000 configurations
(`PlanLimits.max_configurations`)."""
ROW_BYTES = 1024
"""The most bytes a layer row takes in a file, three times what `save_calibration` writes (310 bytes
with 17-digit times): a file larger than MAX_ROWS of them holds too many rows, and is refused before it
is parsed (one of 50,000 rows, 15 MB, took 12.5 s to be refused for its rows)."""
CAP = Cap(
    MAX_ROWS * ROW_BYTES,
    f"more than a calibration of at most {MAX_ROWS:,} layer rows takes ({ROW_BYTES:,} bytes a row); "
    "calibrate one plan's shapes (`pipesat calibrate SPEC`)",
)


@dataclass(frozen=True)
class LayerShape(Keyed):
    """What one GPU computes of a transformer layer under tensor parallelism t: the rows' key."""

    hidden: int = key(WHOLE, "Hidden size h.", at_least=1)
    head_size: int = key(WHOLE, "Size of one attention head, hidden / heads.", at_least=1)
    heads: int = key(WHOLE, "Attention (query) heads on one GPU, heads / t.", at_least=1)
    kv_heads: int = key(WHOLE, "Key/value heads on one GPU, kv_heads / t.", at_least=1)
    mlp: str = key(Word(MLPS), "The MLP: GELU (4h wide) or SwiGLU (gate, up and down projections).")
    mlp_width: int = key(WHOLE, "MLP width on one GPU, f / t.", at_least=1)
    seq_len: int = key(WHOLE, "Sequence length s.", at_least=1)
    microbatch_size: int = key(WHOLE, "Sequences per microbatch b.", at_least=1)
    recompute: Recompute = key(Word(RECOMPUTE), "Activation recomputation.")

    @property
    def label(self) -> str:
        """`hidden 64, 2 heads (1 key/value) of 32, SwiGLU 96, sequence 32, microbatch 1, recompute none`."""
        kv = f" ({self.kv_heads} key/value)" if self.kv_heads != self.heads else ""
        return (
            f"hidden {self.hidden}, {self.heads} heads{kv} of {self.head_size}, {self.mlp} {self.mlp_width}, "
            f"sequence {self.seq_len}, microbatch {self.microbatch_size}, recompute {self.recompute}"
        )


@dataclass(frozen=True)
class MeasuredLayer(LayerShape):
    """One row of a calibration file: a layer shape, the tensor-parallel degree it was measured for (the
    shape serves any model and degree that give it), the medians of F, B (its recomputation included,
    which `recompute_ms` is the part of) and W in ms, and the bytes held from F to B (M_B) and from B to
    W (M_W)."""

    tensor_parallel: int = key(WHOLE, "The tensor-parallel degree t it was measured for.", at_least=1)
    forward_ms: float = key(NUMBER, "The layer's forward F.", unit="ms", above=0, at_most=MAX_MS)
    backward_ms: float = key(
        NUMBER, "The input gradients B, recomputation included.", unit="ms", above=0, at_most=MAX_MS
    )
    weight_ms: float = key(NUMBER, "The weight gradients W.", unit="ms", above=0, at_most=MAX_MS)
    recompute_ms: float = key(
        NUMBER, "The part of B that runs the forward again.", unit="ms", at_least=0, at_most=MAX_MS
    )
    activation_bytes: int = key(
        WHOLE, "What autograd saves from F for B, M_B.", unit="B", at_least=0, at_most=MAX_BYTES
    )
    weight_bytes: int = key(WHOLE, "What W still needs after B, M_W.", unit="B", at_least=0, at_most=MAX_BYTES)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.recompute_ms > self.backward_ms:
            raise InstanceError(
                f"recompute_ms {self.recompute_ms:g} is more than backward_ms {self.backward_ms:g}; "
                "backward_ms includes the recomputation, recompute_ms is the part of it that recomputes"
            )

    @property
    def shape(self) -> LayerShape:
        return LayerShape(**{name: getattr(self, name) for name in keys(LayerShape)})


@dataclass(frozen=True)
class BusBandwidth(Keyed):
    """One all-reduce size: its time and its bus bandwidth (nccl-tests' busbw: size·2(n-1)/n over the time)."""

    size_bytes: int = key(WHOLE, "Bytes all-reduced.", unit="B", at_least=1)
    time_ms: float = key(NUMBER, "Median time of one all-reduce.", unit="ms", above=0)
    bus_bandwidth: float = key(NUMBER, "Bus bandwidth.", unit="GB/s", above=0)


@dataclass(frozen=True)
class Calibration(Keyed):
    """A calibration file: where and how it was measured, a row per layer shape, and the all-reduce bus
    bandwidth over `all_reduce_gpus` GPUs (0: not measured). `source` names the file it was read from."""

    device: str = key(TEXT, "The device measured (cpu, or cuda and its name).")
    dtype: str = key(Word(tuple(DTYPE_BYTES)), "What the layer ran in.")
    torch: str = key(TEXT, "The torch version.")
    repeats: int = key(WHOLE, "Samples per round (rounds until the medians are stable).", at_least=1)
    all_reduce_gpus: int = key(WHOLE, "GPUs the all-reduce ran over (0: not measured).", at_least=0)
    layers: tuple[MeasuredLayer, ...] = ()
    all_reduce: tuple[BusBandwidth, ...] = ()
    source: str = ""
    _by_shape: dict[LayerShape, MeasuredLayer] = dataclasses.field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        by_shape: dict[LayerShape, MeasuredLayer] = {}
        for row in self.layers:
            shape = row.shape
            if shape in by_shape:
                raise InstanceError(f"{self.source or 'the calibration'} has two rows for {shape.label}; keep one")
            by_shape[shape] = row
        object.__setattr__(self, "_by_shape", by_shape)  # `measured` looks a shape up, once per configuration

    @property
    def name(self) -> str:
        """The file and what it measured: `cal.yaml (cpu: x86_64, bf16)`."""
        return f"{self.source or 'calibration'} ({self.device}, {self.dtype})"

    def measured(self, model: Transformer, training: Training) -> MeasuredLayer | None:
        """The row for one GPU's share of `model`'s layer under `training`, or None: no row for its shape,
        or a training that is not the layer measured (see `unlike_measured`)."""
        if unlike_measured(training):
            return None
        return self._by_shape.get(layer_shape(model, training))

    def check_training(self, training: Training) -> None:
        """Refuse, in one line, a training that keeps another number of bytes a value than the file's dtype."""
        check_dtype(self.dtype, training, f"calibration {self.name}")


def layer_shape(model: Transformer, training: Training) -> LayerShape:
    """What one GPU computes of `model`'s layer under `training`'s tensor parallelism and recomputation."""
    t = training.tensor_parallel
    return LayerShape(
        hidden=model.hidden,
        head_size=model.hidden // model.heads,
        heads=model.heads // t,
        kv_heads=(model.kv_heads or model.heads) // t,
        mlp="SwiGLU" if model.swiglu else "GELU",
        mlp_width=model.mlp_width // t,
        seq_len=model.seq_len,
        microbatch_size=model.microbatch_size,
        recompute=training.recompute,
    )


def unlike_measured(training: Training) -> str:
    """Why a measured layer does not describe `training` (empty when it does)."""
    if not training.flash_attention or not training.causal:
        return "the measured layer is causal flash-style attention"
    if training.dropout:
        return "the measured layer has no dropout"
    if training.context_parallel > 1:
        return "the measured layer holds the whole sequence, not a context-parallel share of it"
    if training.recompute_layers:
        return "the measured layer is recomputed whole or not at all, not some layers of a stage"
    return ""


def check_dtype(dtype: str, training: Training, what: str) -> None:
    """Refuse, in one line naming `what` is in `dtype`, a training that keeps another number of bytes a value."""
    size = DTYPE_BYTES[dtype]
    if training.bytes_per_value != size:
        raise InstanceError(
            f"{what} keeps {size} bytes a value ({dtype}) but the training keeps {training.bytes_per_value:g}; "
            f"calibrate in a dtype of {training.bytes_per_value:g} bytes, or set bytes_per_value {size}"
        )


def dtype_for(training: Training) -> str:
    """The dtype to measure a training in: the one keeping its `bytes_per_value` (bf16 for 2)."""
    for name, size in DTYPE_BYTES.items():
        if size == training.bytes_per_value:
            return name
    sizes = " or ".join(str(size) for size in sorted(set(DTYPE_BYTES.values())))
    raise InstanceError(
        f"no dtype measured keeps {training.bytes_per_value:g} bytes a value; set bytes_per_value to {sizes}"
    )


def measured_layer_cost(row: MeasuredLayer, model: Transformer, training: Training, hardware: Hardware) -> Cost:
    """The model's cost of one layer with the measured compute times and memory in place of its own;
    its communication stays the model's. Under sequence parallelism the memory is scaled by the
    model's ratio of the layer with and without it (a layer measured on one GPU keeps its inputs whole)."""
    analytic = layer_cost(model, training, hardware)
    scale = 1.0
    if training.sequence_parallel:
        whole = layer_cost(model, dataclasses.replace(training, sequence_parallel=False), hardware)
        scale = analytic.activation_bytes / whole.activation_bytes
    activation = row.activation_bytes * scale
    return dataclasses.replace(
        analytic,
        forward_ms=row.forward_ms,
        backward_ms=row.backward_ms,
        weight_ms=row.weight_ms,
        recompute_ms=row.recompute_ms,
        activation_bytes=activation,
        # W frees at most what F allocated (the memory model's rule, as the profile's instance caps it).
        weight_bytes=min(row.weight_bytes * scale, activation),
    )


def calibration_lines(calibration: Calibration, model: Transformer, training: Training) -> list[str]:
    """What a calibration gave one layer, for from-model's explanation and the instance file's comments."""
    shape = layer_shape(model, training)
    head = f"calibration {calibration.name}"
    unlike = unlike_measured(training)
    if unlike:
        return [f"{head}: not used ({unlike}); every number is the model's"]
    row = calibration.measured(model, training)
    if row is None:
        return [f"{head}: no row for this layer ({shape.label}); every number is the model's"]
    return [
        f"{head}: layer measured ({shape.label})",
        f"  F {row.forward_ms:g} ms, B {row.backward_ms:g} ms ({row.recompute_ms:g} of it recomputing), "
        f"W {row.weight_ms:g} ms; M_B {row.activation_bytes / MIB:.6g} MiB, M_W {row.weight_bytes / MIB:.6g} MiB",
        "  these replace the model's per-layer compute and memory; the embedding, the head and the "
        "communication are the model's",
    ]


def coverage_line(calibration: Calibration, layers: Mapping[str, MeasuredLayer | None]) -> str:
    """How many configurations (by label) have a measured layer, and which have the model's:
    `calibration cal.yaml (cpu, bf16): layers measured for 4 of 6 configurations; the model's for ...`."""
    analytic = [label for label, row in layers.items() if row is None]
    measured = len(layers) - len(analytic)
    line = f"calibration {calibration.name}: layers measured for {measured} of {len(layers)} configurations"
    return line + (f"; the model's for {_shorten(analytic)}" if analytic else "")


def _shorten(labels: Sequence[str], most: int = 6) -> str:
    shown = ", ".join(labels[:most])
    return shown + (f" and {len(labels) - most} more" if len(labels) > most else "")


def load_calibration(path: str | Path) -> Calibration:
    """The calibration file at `path`, every key checked (one line naming the file and the row)."""
    where = f"{path}: "
    data = read_document(path, "calibration file", cap=CAP)
    if not isinstance(data, dict):
        raise InputError(f"{where}a calibration file is a mapping of device, dtype, torch, repeats, ... and layers")
    values = _record_values(Calibration, data, where, ("layers", "all_reduce"))
    layers = _rows(data, "layers", where)
    if len(layers) > MAX_ROWS:
        raise InputError(
            f"{where}{len(layers):,} layer rows, more than the {MAX_ROWS:,} a calibration holds (a shape for each "
            "configuration of a plan); calibrate one plan's shapes (`pipesat calibrate SPEC`)"
        )
    rows = [_record(MeasuredLayer, row, f"{where}layers[{i}].") for i, row in enumerate(layers)]
    sizes = [
        _record(BusBandwidth, row, f"{where}all_reduce[{i}].") for i, row in enumerate(_rows(data, "all_reduce", where))
    ]
    return Calibration(**values, layers=tuple(rows), all_reduce=tuple(sizes), source=str(path))


def save_calibration(calibration: Calibration, path: str | Path, comments: Sequence[str] = ()) -> Path:
    """Write the calibration to `path` (YAML, `comments` on top), atomically."""
    return write_text(path, calibration_text(calibration, comments))


def calibration_text(calibration: Calibration, comments: Sequence[str] = ()) -> str:
    """The calibration file's text: the comments, then the keys and the rows."""
    document: dict[str, Any] = {name: getattr(calibration, name) for name in keys(Calibration)}
    document["all_reduce"] = [dataclasses.asdict(size) for size in calibration.all_reduce]
    document["layers"] = [dataclasses.asdict(row) for row in calibration.layers]
    header = "".join(f"# {line}\n" if line else "#\n" for line in comments)
    return header + yaml.safe_dump(document, sort_keys=False, allow_unicode=True)


def _rows(data: dict[str, Any], name: str, where: str) -> list[Any]:
    rows = data.get(name, [])
    if not isinstance(rows, list):
        raise InputError(f"{where}{name} must be a list of rows, got {rows!r}")
    return rows


def _record(record: type[Keyed], row: Any, where: str) -> Any:
    if not isinstance(row, dict):
        raise InputError(f"{where.rstrip('.')} must be a mapping of {', '.join(keys(record))}, got {row!r}")
    values = _record_values(record, row, where)
    try:
        return record(**values)
    except InstanceError as error:  # how the row's keys fit together (each is read and checked alone)
        raise InputError(f"{where.rstrip('.')}: {error}") from None


def _record_values(record: type, data: dict[str, Any], where: str, also: Sequence[str] = ()) -> dict[str, Any]:
    """The record's keys in `data`, each read and checked; an unknown key or a missing one is one line."""
    declared = keys(record)
    unknown = sorted(set(data) - set(declared) - set(also), key=str)
    if unknown:
        within = f"{where[:-1]}: " if where.endswith(".") else where  # `cal.yaml: layers[0]: `
        names = [*declared, *also]
        hint = unknown_hint(unknown[0], names, f"give {', '.join(names)}")
        raise InputError(f"{within}unknown key {unknown[0]!r}{hint}")
    values = {}
    for name, one in declared.items():
        if name not in data:
            raise InputError(f"{where}{name} is missing; give it as {one.kind.what}")
        values[name] = one.read(data[name], where + name)
    return values
