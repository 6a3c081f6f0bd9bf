"""The CP-SAT model's variables, made in one step before any constraint.

Per op: its start (and its end, an expression). Per overlapped pair the model may run (`data.pairs`):
whether it runs; per op in any such pair, whether it runs alone, and its end as a variable (its
start plus its own time, or its pair's when paired: `add_pairs` ties it to `pair_ends`, so that the
intervals that end with the op have an affine end, as CP-SAT needs). Per microbatch and stage, while memory is
constrained (a limit, or minimising it): how long it holds memory. The time objective (makespan or
max span), with each device's first start and last end for the max span, and the shared memory
capacity when minimising memory. With offload, per (stage, microbatch) whether it is offloaded and
when its offload and reload start (`solver.cpsat.offload`). All times are in ticks, within the horizon.

Intervals are not made here: in CP-SAT an interval is itself a constraint (start + size == end),
so the constraints that use them (`add_no_overlaps`, `add_memory_limits`) make them. Nor are the
memory precedences' earliest ends, which `add_memory_precedences` makes and records in `earliest_ends`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ortools.sat.python import cp_model

from pipesat.models import Kind, Objective, OpKey, Pair, backward_kinds, memory_change
from pipesat.solver.cpsat.data import ModelData
from pipesat.solver.evaluate.device_bounds import chain_offsets


@dataclass(frozen=True)
class HeldMemory:
    """A microbatch's memory on its device from the start of `first` (an F) to the end of `last`
    (the B or W that frees it): `demand` ticks for `size` ticks."""

    first: OpKey
    last: OpKey
    demand: int
    size: cp_model.IntVar


@dataclass(frozen=True)
class Offload:
    """The variables of one (stage, microbatch)'s offload: whether it happens, when its offload
    and its reload start (ticks), and how long each takes (ticks)."""

    stage: int
    microbatch: int
    offloaded: cp_model.IntVar
    offload_start: cp_model.IntVar
    reload_start: cp_model.IntVar
    duration: int


def make_offloads(model: cp_model.CpModel, data: ModelData) -> list[Offload]:
    """The offload variables of every (stage, microbatch) whose offload moves something."""
    return [
        Offload(
            s,
            j,
            model.new_bool_var(f"offload {s}.{j}"),
            model.new_int_var(0, data.horizon, f"O{s}.{j}"),
            model.new_int_var(0, data.horizon, f"R{s}.{j}"),
            data.offload_ticks[s],
        )
        for s, j in offload_keys(data)
    ]


def offload_keys(data: ModelData) -> list[tuple[int, int]]:
    """The (stage, microbatch)s the model may offload, in the order of `make_offloads`."""
    return [(s, j) for s in data.offload_ticks for j in data.instance.microbatches_at(s)]


@dataclass(frozen=True)
class ModelVariables:
    """Every variable of the model; `held` and `first`/`last` are per device, `capacity` is None
    unless the model minimises memory. `paired` and `alone` are empty without pairs; `alone` holds
    the ops that could be paired."""

    starts: dict[OpKey, cp_model.IntVar]
    ends: dict[OpKey, cp_model.LinearExpr]
    paired: dict[Pair, cp_model.IntVar]
    alone: dict[OpKey, cp_model.IntVar]
    pair_ends: dict[OpKey, tuple[cp_model.IntVar, cp_model.LinearExpr]]
    held: list[list[HeldMemory]]
    capacity: cp_model.IntVar | None
    time_objective: cp_model.IntVar
    first: list[cp_model.IntVar]
    last: list[cp_model.IntVar]
    offloads: list[Offload] = field(default_factory=list)
    earliest_ends: list[tuple[cp_model.IntVar, tuple[OpKey, ...]]] = field(default_factory=list)
    """The variables the memory precedences make (`solver.cpsat.constraints`), each the earliest end of
    its ops: kept so that a hint gives them values too (a hint that leaves any out is one CP-SAT must
    complete by search before it has a first solution)."""

    @property
    def minimized(self) -> cp_model.IntVar:
        """The variable the model minimises: the capacity when minimising memory, else the time objective."""
        return self.time_objective if self.capacity is None else self.capacity


def make_variables(model: cp_model.CpModel, data: ModelData) -> ModelVariables:
    """All variables of the model for `data` (see the module notes)."""
    starts = {key: model.new_int_var(0, data.horizon, op_name(key)) for key in data.keys}
    paired = {pair: model.new_bool_var(pair_name(pair)) for pair in data.pairs}
    in_pairs: dict[OpKey, list[Pair]] = {}
    for pair in data.pairs:
        for key in pair.op_keys():
            in_pairs.setdefault(key, []).append(pair)
    alone = {key: model.new_bool_var(f"{op_name(key)} alone") for key in in_pairs}
    ends: dict[OpKey, cp_model.LinearExpr] = {}
    pair_ends: dict[OpKey, tuple[cp_model.IntVar, cp_model.LinearExpr]] = {}
    for key in data.keys:
        duration = data.durations[key]
        pairs = in_pairs.get(key, [])
        ends[key] = starts[key] + duration
        if pairs:
            lengths = [data.pairs[pair] - duration for pair in pairs]
            end = model.new_int_var(0, data.horizon, f"end {op_name(key)}")
            pair_ends[key] = (
                end,
                ends[key] + cp_model.LinearExpr.weighted_sum([paired[pair] for pair in pairs], lengths),
            )
            ends[key] = end
    devices = range(data.instance.num_devices)
    capacity = None
    if data.minimize_memory:
        upper = int(sum(data.tick_instance.activation_memory)) * data.instance.num_microbatches
        capacity = model.new_int_var(0, upper, "capacity")
    held = [_held_memory(model, data, d) if data.memory_limited else [] for d in devices]
    time_objective = model.new_int_var(0, data.horizon, str(data.objective))
    first, last = [], []
    if data.objective == Objective.SPAN:
        for d in devices:
            first.append(model.new_int_var(0, data.horizon, f"first on device {d}"))
            last.append(model.new_int_var(0, data.horizon, f"last on device {d}"))
    offloads = make_offloads(model, data) if data.offload else []
    return ModelVariables(starts, ends, paired, alone, pair_ends, held, capacity, time_objective, first, last, offloads)


def _held_memory(model: cp_model.CpModel, data: ModelData, device: int) -> list[HeldMemory]:
    """[start F, end B) holding what the B frees and [start F, end W) holding what the W frees
    (`models.ops.memory_change`), per microbatch of each of the device's stages; none for nothing held."""
    kinds = backward_kinds(data.split_backward)
    paired = {key for pair in data.pairs for key in pair.op_keys()}
    offsets = chain_offsets(data.tick_instance, data.split_backward)
    held = []
    for s in data.instance.stages_of(device):
        for j in data.instance.microbatches_at(s):
            for kind in kinds:
                demand = -int(memory_change(data.tick_instance, kind, s, data.split_backward))
                if demand <= 0:
                    continue
                first, last = OpKey(Kind.F, s, j), OpKey(kind, s, j)
                least = least_hold(data, last, paired, offsets) if data.tuning.least_holds else 0
                size = model.new_int_var(least, data.horizon, f"held {op_name(first)}..{op_name(last)}")
                held.append(HeldMemory(first, last, demand, size))
    return held


def least_hold(data: ModelData, last: OpKey, paired: set[OpKey], offsets: dict[tuple[Kind, int], float]) -> int:
    """The shortest time from the start of its microbatch's F of the same stage to the end of `last`
    (its B or W): along its route, by `offsets` (`chain_offsets` of the model's tick instance), with
    `p2p_time` across devices; a W that may run inside a pair starts with its B at the earliest.

    The held intervals' sizes start from it: CP-SAT's cumulative reasons with each interval's least
    size, and a size variable's own lower bound (0) leaves the memory-time energy of a microbatch's
    round trip out of that reasoning."""
    starts_with = Kind.B if last.kind == Kind.W and last in paired else last.kind
    length = round(offsets[(starts_with, last.stage)] - offsets[(Kind.F, last.stage)]) + data.durations[last]
    return min(length, data.horizon)


def pair_name(pair: Pair) -> str:
    """`F2.5+B5.1` (`+W5.1` with the W inside): a pair's name in the model."""
    return "+".join(op_name(key) for key in pair.op_keys())


def op_name(key: OpKey) -> str:
    """`F2.5`: an op's name in the model."""
    kind, stage, microbatch = key
    return f"{kind}{stage}.{microbatch}"
