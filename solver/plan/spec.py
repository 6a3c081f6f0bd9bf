"""The plan's SPEC file (YAML or JSON) and the options that override it -> a checked `PlanSpec`.

A spec has three sections (docs/plan.md lists every key, its unit and its default):

    model:    {layers: 24, hidden: 2048, heads: 16, seq_len: 2048, vocab: 32000}
    cluster:  {gpus: 16, gpu_memory: 40GiB, tflops: 312, efficiency: 0.5, bandwidth: 50, latency: 10}
    training: {global_batch: 64}

The keys are those of the records they fill (`solver.instances.keys`): `model` is the `Transformer`
but its microbatch size, `cluster` the `Cluster`, `training` the plan's own keys (`PlanSpec`) and
the `Training` but its parallel degrees, recomputation and ZeRO stage: the plan searches those, over
the lists of the same names (`recompute: [none, full]`). `training.seq_len` may stand for
`model.seq_len`. An unknown key, a missing one or a value of the wrong kind is refused with one line
that names the key (`model.layers`) and what to give instead. Options on the command line override
keys by their dotted names before the checks, so they are checked the same way.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipesat.models import InputError, InstanceError
from pipesat.models.document import read_document
from pipesat.models.errors import unknown_hint
from pipesat.models.placement import PLACEMENTS
from pipesat.models.training_modes import RECOMPUTE, Recompute, ZeroStage
from pipesat.solver.instances.collectives import Fabric
from pipesat.solver.instances.description import HARDWARE_WITHOUT_GPU, Hardware, Training, Transformer, fill_from_gpu
from pipesat.solver.instances.gpus import CATALOGUE
from pipesat.solver.instances.keys import Key, Keyed, key, keys, like
from pipesat.solver.instances.value_kinds import NUMBER, TEXT, WHOLE, Wholes, Word, Words
from pipesat.solver.plan.offload import OFFLOADS, Offload, check_offload_spec
from pipesat.solver.plan.runtimes import ANY, RUNTIME_NAMES, RUNTIMES, held_to, with_defaults
from pipesat.solver.plan.schedules import SCHEDULE_NAMES

PLACEMENTS_SEARCHED = tuple(name for name in PLACEMENTS if name != "bidirectional")
"""The placements the plan searches unless the spec names them: linear with one chunk a device,
interleaved with the spec's chunks (`space.chunk_counts`), V with two. A spec may name any of
`PLACEMENTS`: bidirectional (DualPipe's two copies, twice the parameters) is tried only when asked for."""


@dataclass(frozen=True)
class Cluster(Keyed):
    """The GPUs: how many, their memory (bytes) less a reserve (a fraction below 1, else bytes), peak
    TFLOP/s and the fraction reached (or a `gpu` of the catalogue, which fills the keys not given:
    `CLUSTER_FROM_GPU`), nodes of `gpus_per_node` with `nics_per_node` NICs, the links across nodes
    (`bandwidth` GB/s, one GPU's share of its node's NICs, and `latency` µs) and within a node
    (`node_bandwidth`, `node_latency`: NVLink), the GPU memory's
    bandwidth (GB/s) the optimizer step runs at, and each GPU's host link (GB/s a direction, None:
    none), over which the plan's offload moves activations. The keys shared with `Hardware` are its keys."""

    gpus: int = key(WHOLE, "GPUs in all.", at_least=1)
    gpu_memory: float = like(Hardware, "gpu_memory", help="One GPU's memory (default: the gpu's).")
    tflops: float = like(Hardware, "tflops")
    gpu: str | None = like(Hardware, "gpu")
    efficiency: float | None = like(Hardware, "efficiency")
    bandwidth: float = like(
        Hardware, "bandwidth", help="The link across nodes, one GPU's share (default: the gpu's network, else 50)."
    )
    latency: float = like(Hardware, "latency", help="The latency of the link across nodes.")
    gpus_per_node: int = key(WHOLE, "GPUs a node.", 8, at_least=1)
    nics_per_node: int = key(
        WHOLE,
        "Network cards (NICs) a node, sharing its network (default: as gpus_per_node, one a GPU as in DGX A100 "
        "and H100).",
        None,
        at_least=1,
        default_from="gpus_per_node",
    )
    node_bandwidth: float = like(
        Hardware,
        "bandwidth",
        help="The link within a node, one GPU's share (default: the gpu's NVLink, else as across nodes).",
        default_from="bandwidth",
    )
    node_latency: float = like(
        Hardware,
        "latency",
        help="The latency of the link within a node, a ring step (default: the gpu's NVLink's, else as across nodes).",
        default_from="latency",
    )
    memory_bandwidth: float = like(Hardware, "memory_bandwidth")
    reserve: float = like(Hardware, "reserve")
    host_link_bandwidth: float | None = key(
        NUMBER,
        "Each GPU's link to host memory, one direction, over which training.offload moves activations (default: "
        "the gpu's, PCIe 4.0 x16 on A100, 5.0 x16 on the others; without a gpu, none).",
        None,
        unit="GB/s",
        above=0,
    )

    def __post_init__(self) -> None:
        fill_from_gpu(self, self.gpu, CLUSTER_FROM_GPU, CLUSTER_WITHOUT_GPU)
        if self.host_link_bandwidth is None and self.gpu is not None:
            object.__setattr__(self, "host_link_bandwidth", CATALOGUE[self.gpu].host_link)
        super().__post_init__()

    def link(self, across_nodes: bool) -> tuple[float, float]:
        """The (bandwidth GB/s, latency µs) of the pipeline's link: between nodes when its GPUs span
        nodes, else within a node."""
        if across_nodes:
            return self.bandwidth, self.latency
        return self.node_bandwidth, self.node_latency

    def fabric(self) -> Fabric:
        """The links a group's collectives run over (`collectives.group_link`)."""
        return Fabric(
            self.node_bandwidth, self.node_latency, self.bandwidth, self.latency, self.gpus_per_node, self.nics_per_node
        )


CLUSTER_FROM_GPU = {
    "gpu_memory": "memory",
    "tflops": "bf16_tflops",
    "bandwidth": "network",
    "node_bandwidth": "nvlink",
    "node_latency": "nvlink_latency",
    "memory_bandwidth": "memory_bandwidth",
}
"""The `Cluster` keys a `gpu` fills when they are not given, from its catalogue fields."""
CLUSTER_WITHOUT_GPU = {name: HARDWARE_WITHOUT_GPU[name] for name in ("efficiency", "bandwidth", "memory_bandwidth")}
"""Those keys without a `gpu`, as `Hardware` has them; the GPU's memory and peak must then be given."""


@dataclass(frozen=True)
class PlanSpec(Keyed):
    """What the plan searches over: the model (its microbatch size is searched), how it is trained
    (its parallel degrees, recomputation and ZeRO stage are searched), the cluster, the global batch
    in sequences, and the lists the plan tries: tensor-parallel, context-parallel and pipeline degrees,
    microbatch sizes, placements, chunks of an interleaved pipeline, expert-parallel degrees,
    recomputation settings, activation offloads and ZeRO stages; `schedules` restricts the schedules a configuration may use
    (`solver.plan.schedules`), and `runtime` holds them all to what a framework runs
    (`solver.plan.runtimes`); `current` is the configuration the user runs now (`solver.plan.current`).
    A list left at None is the plan's own (every divisor, `space.chunk_counts`); giving every
    list one value pins a layout."""

    model: Transformer
    training: Training
    cluster: Cluster
    global_batch: int = key(WHOLE, "Sequences an iteration.", at_least=1)
    tensor_parallel: tuple[int, ...] | None = key(
        Wholes(distinct=True),
        "The tensor-parallel degrees t to try (default: 1, 2, 4, ... up to a node's GPUs, those dividing the GPUs).",
        None,
        at_least=1,
    )
    microbatch_sizes: tuple[int, ...] | None = key(
        Wholes(distinct=True), "The microbatch sizes b to try (default: every divisor).", None, at_least=1
    )
    placements: tuple[str, ...] = key(
        Words(PLACEMENTS, "placements"),
        "The placements to try (bidirectional, DualPipe's, only when named).",
        PLACEMENTS_SEARCHED,
    )
    pipeline_parallel: tuple[int, ...] | None = key(
        Wholes(distinct=True), "The pipeline depths p to try (default: every divisor).", None, at_least=1
    )
    chunks: tuple[int, ...] | None = key(
        Wholes(distinct=True),
        "The chunks v a device of an interleaved pipeline holds, to try (default: docs/plan.md's rule).",
        None,
        at_least=2,
    )
    context_parallel: tuple[int, ...] = key(
        Wholes(distinct=True), "The context-parallel degrees to try (ring attention).", (1,), at_least=1
    )
    expert_parallel: tuple[int, ...] | None = key(
        Wholes(distinct=True),
        "The expert-parallel degrees EP to try, with experts (default: every divisor of the experts and of d).",
        None,
        at_least=1,
    )
    recompute: tuple[Recompute, ...] = key(
        Words(RECOMPUTE, "recomputation settings"), "The activation recomputations to try.", RECOMPUTE
    )
    recompute_layers: tuple[int, ...] = key(
        Wholes(distinct=True),
        "With recompute full, the layers of each stage to recompute, its first ones (Megatron's block method), "
        "to try (0: every layer).",
        (0,),
        at_least=0,
    )
    offload: tuple[Offload, ...] = key(
        Words(OFFLOADS, "offload settings"),
        "The activation offloads to try over each GPU's host link (PipeOffload's selective and full schedules, "
        "on linear and vshape pipelines; docs/offload.md).",
        ("none",),
    )
    zero: tuple[ZeroStage, ...] = key(
        Wholes(distinct=True),
        "The ZeRO stages to try (1: Megatron's distributed optimizer); with one replica, 0.",
        (1,),
        at_least=0,
        at_most=3,
    )
    sequence_parallel: bool = like(
        Training,
        "sequence_parallel",
        help="Split the layer inputs, norms and dropout masks over the t GPUs too (Megatron runs tensor "
        "parallelism with it; the plan's default).",
        default=True,
    )
    schedules: tuple[str, ...] | None = key(
        Words(SCHEDULE_NAMES, "schedules"),
        "The schedules a configuration may use: handwritten ones as `pipesat schedule` names them, cp-sat for "
        "the solver's search, the starts (default: every one).",
        None,
    )
    current: str | None = key(
        TEXT,
        "The configuration you run now, as the plan's table writes it (t4 p2 d8 interleaved v2 b1 m16 "
        "full-recompute zero1, a schedule's name after it or not): the plan predicts it as run and says what "
        "the best costs and buys against it.",
        None,
    )
    runtime: str = key(
        Word(RUNTIME_NAMES),
        "The framework that will run the plan, which holds its schedules, placements and knobs to what it runs "
        "and gives its memory defaults (docs/runtimes/; any: none).",
        ANY,
    )

    @property
    def tokens_per_iteration(self) -> int:
        return self.global_batch * self.model.seq_len


SECTIONS: dict[str, tuple[type, ...]] = {
    "model": (Transformer,),
    "cluster": (Cluster,),
    "training": (PlanSpec, Training),
}
"""The records whose keys each section holds."""
SEARCHED: dict[type, tuple[str, ...]] = {
    Transformer: ("microbatch_size",),
    Training: (
        "tensor_parallel",
        "sequence_parallel",
        "context_parallel",
        "data_parallel",
        "expert_parallel",
        "recompute",
        "recompute_layers",
        "zero",
    ),
}
"""The keys the plan searches, which a spec does not give; `sequence_parallel` is the plan's own key
(`PlanSpec`), on by default where the record's is off."""
ALIASES = {"training.seq_len": "model.seq_len"}
"""Keys that stand for another (they must agree when both are given)."""


def _spec_keys() -> dict[str, dict[str, Key]]:
    """Every key of a spec, by section, as its record declares it; an alias is its key's."""
    sections = {
        section: {
            name: declared for record in records for name, declared in keys(record, SEARCHED.get(record, ())).items()
        }
        for section, records in SECTIONS.items()
    }
    for alias, dotted in ALIASES.items():
        (section, name), (target, key_name) = alias.split("."), dotted.split(".")
        sections[section][name] = sections[target][key_name]
    return sections


KEYS = _spec_keys()
"""Every key of a spec, by section (`KEYS["model"]["layers"]`)."""


def load_spec(path: str | Path, overrides: Mapping[str, Any] | None = None) -> PlanSpec:
    """The spec in `path`, with `overrides` ({"cluster.gpus": 8}; None values ignored) applied, checked.

    Parameters
    ----------
    path
        A plan spec (YAML or JSON): the sections model, cluster and training.
    overrides
        Dotted keys that replace the file's (`pipesat plan`'s options).

    Returns
    -------
    PlanSpec
        The checked spec (amounts in bytes).

    Raises
    ------
    InputError
        A file that cannot be read, an unknown section or key, or a value not of its kind.
    """
    data = read_document(path, "plan spec")
    if not isinstance(data, dict):
        raise InputError(f"{path}: a plan spec holds the sections model, cluster and training")
    return spec_from_dict(data, overrides, where=f"{path}: ")


def spec_from_dict(data: Mapping[str, Any], overrides: Mapping[str, Any] | None = None, where: str = "") -> PlanSpec:
    """A checked `PlanSpec` from the spec's sections; `where` starts every error line (the file).

    Parameters
    ----------
    data
        The sections as a spec file holds them: `{"model": {...}, "cluster": {...}, "training": {...}}`,
        amounts written with their units (`gpu_memory: 80GiB`).
    overrides
        Dotted keys that replace the sections' (`{"cluster.gpus": 8}`); None values are ignored.
    where
        What starts every error line (a file's name).

    Returns
    -------
    PlanSpec
        The checked spec (amounts in bytes).

    Raises
    ------
    InputError
        An unknown section or key, a missing key, or a value not of its kind.
    """
    given = _given(data, where)
    given |= {dotted: value for dotted, value in (overrides or {}).items() if value is not None}
    runtime = RUNTIMES.get(
        KEYS["training"]["runtime"].read(given.get("training.runtime", ANY), where + "training.runtime")
    )
    given = with_defaults(runtime, given)
    for alias, dotted in ALIASES.items():
        if alias in given:
            section, name = dotted.split(".")
            value = KEYS[section][name].read(given.pop(alias), where + alias)
            if given.setdefault(dotted, value) != value:
                raise InputError(f"{where}{dotted} {given[dotted]} and {alias} {value} differ; give one")
    model = Transformer(**_values(Transformer, "model", given, where))
    values = _values(Cluster, "cluster", given, where)
    try:
        cluster = Cluster(**values)
    except InstanceError as error:  # a key neither given nor filled by the gpu (`fill_from_gpu`)
        raise InputError(f"{where}cluster.{error}") from None
    search = _values(PlanSpec, "training", given, where)
    if runtime is not None:
        search = held_to(runtime, search, PLACEMENTS_SEARCHED, where)
    if any(search.get("recompute_layers") or ()) and "full" not in search.get("recompute", RECOMPUTE):
        raise InputError(
            f"{where}training.recompute_layers counts layers recomputed in full, but recompute does not try full; "
            "add full to training.recompute, or drop training.recompute_layers"
        )
    check_offload_spec(search.get("offload", ("none",)), cluster.host_link_bandwidth, where)
    return PlanSpec(model, Training(**_values(Training, "training", given, where)), cluster, **search)


def _given(data: Mapping[str, Any], where: str) -> dict[str, Any]:
    """The spec's values by their dotted names, every section and name checked."""
    unknown = sorted(set(data) - set(SECTIONS), key=str)
    if unknown:
        raise InputError(f"{where}unknown section {unknown[0]!r}; a spec has the sections {', '.join(SECTIONS)}")
    given: dict[str, Any] = {}
    for section, names in KEYS.items():
        values = data.get(section)
        if values is None:
            values = {}
        if not isinstance(values, dict):
            raise InputError(f"{where}{section} must be a mapping of keys to values, such as {{layers: 24}}")
        wrong = sorted(set(values) - set(names), key=str)
        if wrong:
            hint = unknown_hint(wrong[0], names, f"{section} takes {', '.join(names)}")
            raise InputError(f"{where}unknown key {section}.{wrong[0]}{hint}")
        given |= {f"{section}.{name}": value for name, value in values.items()}
    return given


def _values(record: type, section: str, given: Mapping[str, Any], where: str) -> dict[str, Any]:
    """The record's keys that the spec gives, read and checked; a required one missing is an error."""
    values = {}
    for name, declared in keys(record, SEARCHED.get(record, ())).items():
        dotted = f"{section}.{name}"
        if dotted in given:
            values[name] = declared.read(given[dotted], where + dotted)
        elif declared.required:
            raise InputError(f"{where}{dotted} is missing; give it as {declared.kind.what}")
    return values
