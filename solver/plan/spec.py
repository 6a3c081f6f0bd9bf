"""The plan's SPEC file (YAML or JSON) and the options that override it -> a checked `PlanSpec`.

A spec has three sections (docs/plan.md lists every key, its unit and its default):

    model:    {layers: 24, hidden: 2048, heads: 16, seq_len: 2048, vocab: 32000}
    cluster:  {gpus: 16, gpu_memory: 40GiB, tflops: 312, efficiency: 0.5, bandwidth: 50, latency: 10}
    training: {global_batch: 64}

An unknown key, a missing one or a value of the wrong kind is refused with one line that names the
key (`model.layers`) and what to give instead. Options on the command line override keys by their
dotted names before the checks, so they are checked the same way.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipesat.models import InputError
from pipesat.models.document import read_document
from pipesat.models.units import memory_in
from pipesat.solver.instances.cost_model import RECOMPUTE, Training, Transformer
from pipesat.solver.instances.from_options import parse_reserve

PLACEMENTS = ("linear", "interleaved", "vshape")
"""The placements the plan tries: linear with one chunk a device, interleaved and V with two."""

WHOLE, NUMBER, FLAG, TEXT, AMOUNT, WHOLES, NAMES = "whole", "number", "flag", "text", "amount", "wholes", "names"

KEYS: dict[str, dict[str, tuple[str, Any]]] = {
    "model": {
        "layers": (WHOLE, None),
        "hidden": (WHOLE, None),
        "heads": (WHOLE, None),
        "seq_len": (WHOLE, None),
        "vocab": (WHOLE, 0),
        "kv_heads": (WHOLE, 0),
        "ffn_hidden": (WHOLE, 0),
    },
    "cluster": {
        "gpus": (WHOLE, None),
        "gpu_memory": (AMOUNT, None),
        "tflops": (NUMBER, None),
        "efficiency": (NUMBER, 0.5),
        "bandwidth": (NUMBER, 50.0),
        "latency": (NUMBER, 10.0),
        "gpus_per_node": (WHOLE, 8),
        "node_bandwidth": (NUMBER, None),
        "node_latency": (NUMBER, None),
        "memory_bandwidth": (NUMBER, 1555.0),
        "reserve": (TEXT, "10%"),
    },
    "training": {
        "global_batch": (WHOLE, None),
        "seq_len": (WHOLE, None),
        "tensor_parallel": (WHOLES, [1]),
        "microbatch_sizes": (WHOLES, None),
        "placements": (NAMES, list(PLACEMENTS)),
        "sequence_parallel": (FLAG, False),
        "recompute": (TEXT, "none"),
        "zero1": (FLAG, False),
        "flash_attention": (FLAG, True),
        "causal": (FLAG, True),
        "dropout": (FLAG, False),
        "bytes_per_value": (NUMBER, 2.0),
        "weight_bytes": (NUMBER, 2.0),
        "grad_bytes": (NUMBER, 4.0),
        "optimizer_bytes": (NUMBER, 12.0),
    },
}
"""Every key of a spec: its kind and its default (None: required, but for the optional ones below)."""

OPTIONAL = {"training.seq_len", "cluster.node_bandwidth", "cluster.node_latency", "training.microbatch_sizes"}
WHAT = {
    WHOLE: "a whole number",
    NUMBER: "a number",
    FLAG: "true or false",
    TEXT: "a word",
    AMOUNT: "an amount with a unit, such as 40GiB",
    WHOLES: "a whole number or a list of them, such as [1, 2]",
    NAMES: f"a list of placements out of {', '.join(PLACEMENTS)}",
}


@dataclass(frozen=True)
class Cluster:
    """The GPUs: how many, their memory (bytes) less a reserve (a fraction below 1, else bytes), peak
    TFLOP/s and the fraction reached, nodes of `gpus_per_node`, the links across nodes (`bandwidth`
    GB/s, `latency` µs) and within a node (`node_bandwidth`, `node_latency`), and the GPU memory's
    bandwidth (GB/s) the optimizer step runs at."""

    gpus: int
    gpu_memory: float
    tflops: float
    efficiency: float = 0.5
    bandwidth: float = 50.0
    latency: float = 10.0
    gpus_per_node: int = 8
    node_bandwidth: float = 50.0
    node_latency: float = 10.0
    memory_bandwidth: float = 1555.0
    reserve: float = 0.1

    def link(self, across_nodes: bool) -> tuple[float, float]:
        """The (bandwidth GB/s, latency µs) of a group's link: between nodes when its GPUs span
        nodes, else within a node."""
        if across_nodes:
            return self.bandwidth, self.latency
        return self.node_bandwidth, self.node_latency


@dataclass(frozen=True)
class PlanSpec:
    """What the plan searches over: the model (its microbatch size is searched), how it is trained
    (its parallel degrees are searched), the cluster, the global batch in sequences, the
    tensor-parallel degrees allowed, the microbatch sizes allowed (None: every divisor) and the
    placements tried."""

    model: Transformer
    training: Training
    cluster: Cluster
    global_batch: int
    tensor_parallel: tuple[int, ...] = (1,)
    microbatch_sizes: tuple[int, ...] | None = None
    placements: tuple[str, ...] = PLACEMENTS

    @property
    def tokens_per_iteration(self) -> int:
        return self.global_batch * self.model.seq_len


def load_spec(path: str | Path, overrides: Mapping[str, Any] | None = None) -> PlanSpec:
    """The spec in `path`, with `overrides` ({"cluster.gpus": 8}; None values ignored) applied, checked."""
    data = read_document(path, "plan spec")
    if not isinstance(data, dict):
        raise InputError(f"{path}: a plan spec holds the sections model, cluster and training")
    return spec_from_dict(data, overrides, where=f"{path}: ")


def spec_from_dict(data: Mapping[str, Any], overrides: Mapping[str, Any] | None = None, where: str = "") -> PlanSpec:
    """A checked `PlanSpec` from the spec's sections; `where` starts every error line (the file)."""
    sections = _sections(data, where)
    for dotted, value in (overrides or {}).items():
        if value is None:
            continue
        section, key = dotted.split(".")
        sections[section][key] = value
    values = {
        f"{section}.{key}": _value(f"{section}.{key}", kind, sections[section].get(key, default), where)
        for section, keys in KEYS.items()
        for key, (kind, default) in keys.items()
    }
    return _spec(values, where)


def _sections(data: Mapping[str, Any], where: str) -> dict[str, dict[str, Any]]:
    unknown = sorted(set(data) - set(KEYS), key=str)
    if unknown:
        raise InputError(f"{where}unknown section {unknown[0]!r}; a spec has the sections {', '.join(KEYS)}")
    sections: dict[str, dict[str, Any]] = {}
    for section, keys in KEYS.items():
        given = data.get(section, {})
        if given is None:
            given = {}
        if not isinstance(given, dict):
            raise InputError(f"{where}{section} must be a mapping of keys to values, such as {{layers: 24}}")
        wrong = sorted(set(given) - set(keys), key=str)
        if wrong:
            raise InputError(f"{where}unknown key {section}.{wrong[0]}; {section} takes {', '.join(keys)}")
        sections[section] = dict(given)
    return sections


def _value(key: str, kind: str, value: Any, where: str) -> Any:
    """The value of `key` checked against its kind (None stays None for the required-check later)."""
    if value is None:
        if key in OPTIONAL:
            return None
        raise InputError(f"{where}{key} is missing; give it as {WHAT[kind]}")
    bad = InputError(f"{where}{key} must be {WHAT[kind]}, got {value!r}")
    if kind == WHOLE:
        if isinstance(value, bool) or not isinstance(value, int):
            raise bad
        return value
    if kind == NUMBER:
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise bad
        return float(value)
    if kind == FLAG:
        if not isinstance(value, bool):
            raise bad
        return value
    if kind == TEXT:
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            raise bad
        return str(value)
    if kind == AMOUNT:
        amount = memory_in(value, "B", f"{where}{key}") if isinstance(value, str) else None
        if amount is None or amount <= 0:
            raise bad
        return amount
    if kind == WHOLES:
        items = value if isinstance(value, list) else [value]
        if not items or any(isinstance(item, bool) or not isinstance(item, int) or item < 1 for item in items):
            raise InputError(f"{where}{key} must be {WHAT[kind]} of at least 1, got {value!r}")
        return tuple(sorted(set(items)))
    if kind == NAMES:
        items = value if isinstance(value, list) else [value]
        if not items or any(item not in PLACEMENTS for item in items):
            raise bad
        return tuple(name for name in PLACEMENTS if name in items)
    raise AssertionError(kind)


def _spec(values: dict[str, Any], where: str) -> PlanSpec:
    seq_len = values["model.seq_len"]
    if values["training.seq_len"] not in (None, seq_len):
        raise InputError(
            f"{where}model.seq_len {seq_len} and training.seq_len {values['training.seq_len']} differ; give one"
        )
    model = Transformer(
        **{key: values[f"model.{key}"] for key in ("layers", "hidden", "heads", "vocab", "kv_heads", "ffn_hidden")},
        seq_len=seq_len,
    )
    if values["training.recompute"] not in RECOMPUTE:
        raise InputError(
            f"{where}training.recompute must be one of {', '.join(RECOMPUTE)}, got {values['training.recompute']!r}"
        )
    training = Training(
        **{
            key: values[f"training.{key}"]
            for key in (
                "bytes_per_value",
                "flash_attention",
                "causal",
                "dropout",
                "recompute",
                "sequence_parallel",
                "zero1",
                "weight_bytes",
                "grad_bytes",
                "optimizer_bytes",
            )
        }
    )
    try:
        reserve = parse_reserve(values["cluster.reserve"])
    except InputError as error:
        raise InputError(f"{where}cluster.reserve: {error}") from None
    bandwidth, latency = values["cluster.bandwidth"], values["cluster.latency"]
    node_bandwidth, node_latency = values["cluster.node_bandwidth"], values["cluster.node_latency"]
    cluster = Cluster(
        gpus=values["cluster.gpus"],
        gpu_memory=values["cluster.gpu_memory"],
        tflops=values["cluster.tflops"],
        efficiency=values["cluster.efficiency"],
        bandwidth=bandwidth,
        latency=latency,
        gpus_per_node=values["cluster.gpus_per_node"],
        node_bandwidth=bandwidth if node_bandwidth is None else node_bandwidth,
        node_latency=latency if node_latency is None else node_latency,
        memory_bandwidth=values["cluster.memory_bandwidth"],
        reserve=reserve,
    )
    _check_cluster(cluster, where)
    for key in ("model.layers", "model.hidden", "model.heads", "model.seq_len", "training.global_batch"):
        if values[key] < 1:
            raise InputError(f"{where}{key} must be at least 1, got {values[key]}")
    return PlanSpec(
        model=model,
        training=training,
        cluster=cluster,
        global_batch=values["training.global_batch"],
        tensor_parallel=values["training.tensor_parallel"],
        microbatch_sizes=values["training.microbatch_sizes"],
        placements=values["training.placements"],
    )


def _check_cluster(cluster: Cluster, where: str) -> None:
    for key in ("gpus", "gpus_per_node"):
        if getattr(cluster, key) < 1:
            raise InputError(f"{where}cluster.{key} must be at least 1, got {getattr(cluster, key)}")
    for key in ("tflops", "bandwidth", "node_bandwidth", "memory_bandwidth"):
        if getattr(cluster, key) <= 0:
            raise InputError(f"{where}cluster.{key} must be positive, got {getattr(cluster, key):g}")
    for key in ("latency", "node_latency"):
        if getattr(cluster, key) < 0:
            raise InputError(f"{where}cluster.{key} must be at least 0, got {getattr(cluster, key):g}")
    if not 0 < cluster.efficiency <= 1:
        raise InputError(
            f"{where}cluster.efficiency must be in (0, 1] (the fraction of peak reached), got {cluster.efficiency:g}"
        )
