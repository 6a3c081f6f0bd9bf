"""The CP-SAT model's constraints, each step over the variables made by `solver.cpsat.variables`.

Precedences follow `models.ops.dependency`, with `p2p_time` between stages on different devices (a W
inside an overlapped pair with its B starts with it instead); each op alone or in exactly one pair,
whose ops start together; one no-overlap per device over the ops run alone and the pairs run; the memory limit (or the capacity being minimised) as one cumulative per
device over the held-memory intervals (the memory model of `models.ops.memory_change`). The
intervals are made here, with the constraint that uses them. Each device's no-overlap and cumulative
also hold a redundant interval from its last end to the horizon (`_tail`).

**Symmetry breaking.** Microbatches are interchangeable: any schedule stays valid (same times, same
memory) when, per (stage, kind), the ops are relabelled in start order, so a first-in-first-out
microbatch order per (stage, kind) loses nothing. With it and a memory limit, F(s, j + K) cannot
start before B(s, j) ends when K + 1 microbatches of stage s exceed the limit (a redundant
precedence that helps propagation). When the limit L also leaves less than W's memory M_W beyond K
activations M_B (L < K·M_B + M_W), F(s, j + K) waits for W(s, j) too, or else for B(s, j + 1): when
it starts, the K - 1 microbatches before it hold M_B each if their B has not ended, and one more M_W
than the limit leaves if their W's have not ended either, so either all K - 1 have ended their B or
microbatch j has ended its W: F(s, j + K) starts after the earlier of the two ends
(`Tuning.tight_precedences`; a minimum, not a choice CP-SAT branches on: with a Boolean choice instead, a
probe at the bound found the optimum less often). They give the bound what the
cumulative alone proves late (benchmarks/bench_proofs.py;
benchmarks/experiments/2026-11-25_memory-precedences).

**Stages nested on a device.** Two stages a < b of one device on one route nest: microbatch j holds
a's activation from F(a, j) to B(a, j), and b's inside that. So when F(b, j + K) starts, microbatch
j + K holds its activations of every earlier stage of the device, and the room for stage s in the
precedences above is the limit less those (`Tuning.nested_precedences` adds the rest;
benchmarks/experiments/2026-11-28_least-hold-and-nested-stages). And when K + 1
activations of a and one of b exceed the limit, F(a, j + K) waits for B(b, j) (had it started
earlier, either it or F(b, j) would start while a holds microbatches j .. j + K and b holds j) and
F(b, j + K) for B(a, j) (a holds j .. j + K when it starts).
"""

from __future__ import annotations

from ortools.sat.python import cp_model

from pipesat.models import Kind, Objective, OpKey, Pair, dependency
from pipesat.solver.cpsat.data import ModelData
from pipesat.solver.cpsat.variables import ModelVariables, op_name, pair_name


def add_precedences(model: cp_model.CpModel, data: ModelData, variables: ModelVariables) -> None:
    """Each op starts after the op it depends on ends, plus `p2p_time` across devices; a W that may
    run inside a pair with its B waits for it only when it runs alone."""
    placement = data.instance.placement
    p2p = int(data.tick_instance.p2p_time)
    for key in data.keys:
        dep = dependency(key, data.instance)
        if dep is not None:
            latency = p2p if placement[dep.stage] != placement[key.stage] else 0
            precedence = model.add(variables.starts[key] >= variables.ends[dep] + latency)
            if key.kind == Kind.W and key in variables.alone:
                precedence.only_enforce_if(variables.alone[key])


def add_pairs(model: cp_model.CpModel, data: ModelData, variables: ModelVariables) -> None:
    """Each op that could be paired runs alone or in exactly one pair, and ends after its own time or
    its pair's; a pair's ops start together."""
    for end, length in variables.pair_ends.values():
        model.add(end == length)
    chosen: dict[OpKey, list[cp_model.IntVar]] = {key: [] for key in variables.alone}
    for pair, runs in variables.paired.items():
        start = variables.starts[pair.forward]
        for key in pair.op_keys()[1:]:
            model.add(variables.starts[key] == start).only_enforce_if(runs)
        for key in pair.op_keys():
            chosen[key].append(runs)
    for key, alone in variables.alone.items():
        model.add_exactly_one([alone, *chosen[key]])


def add_symmetry_breaking(model: cp_model.CpModel, data: ModelData, variables: ModelVariables) -> None:
    """F(0, 0) at time 0 and first-in-first-out microbatches per (kind, stage) (see the module notes)."""
    instance = data.instance
    if not instance.bidirectional:
        # F(0, 0) comes before every op; shifting the whole schedule puts it at 0. (Fed from both
        # ends, either copy's first forward may come first.)
        model.add(variables.starts[OpKey(Kind.F, 0, 0)] == 0)
    for kind, stage, j in data.keys:
        if j + 1 in instance.microbatches_at(stage):
            model.add(variables.starts[OpKey(kind, stage, j + 1)] >= variables.ends[OpKey(kind, stage, j)])


def add_no_overlaps(model: cp_model.CpModel, data: ModelData, variables: ModelVariables) -> None:
    """One op or one pair at a time on each device: a fixed-size interval per op (present when it runs
    alone) and per pair (present when it runs), one no-overlap per device."""
    pairs_on: list[list[Pair]] = [[] for _ in range(data.instance.num_devices)]
    for pair in variables.paired:
        pairs_on[data.instance.placement[pair.forward.stage]].append(pair)
    for d in range(data.instance.num_devices):
        runs = []
        for key in data.on_device(d):
            start, duration, name = variables.starts[key], data.durations[key], f"run {op_name(key)}"
            alone = variables.alone.get(key)
            runs.append(
                model.new_fixed_size_interval_var(start, duration, name)
                if alone is None
                else model.new_optional_fixed_size_interval_var(start, duration, alone, name)
            )
        for pair in pairs_on[d]:
            runs.append(
                model.new_optional_fixed_size_interval_var(
                    variables.starts[pair.forward], data.pairs[pair], variables.paired[pair], f"run {pair_name(pair)}"
                )
            )
        model.add_no_overlap([*runs, _tail(model, data, variables, d)])


def add_memory_limits(model: cp_model.CpModel, data: ModelData, variables: ModelVariables) -> None:
    """Each device's held memory within the limit, or within the capacity being minimised."""
    for device, held in enumerate(variables.held):
        capacity = variables.capacity if variables.capacity is not None else memory_limit_ticks(data, device)
        if held:
            intervals = [
                model.new_interval_var(
                    variables.starts[h.first], h.size, variables.ends[h.last], f"holds {op_name(h.first)}"
                )
                for h in held
            ]
            demands: list[cp_model.LinearExprT] = [h.demand for h in held]
            if variables.capacity is None:
                intervals.append(_tail(model, data, variables, device))
                demands.append(capacity)
            model.add_cumulative(intervals, demands, capacity)


def _tail(model: cp_model.CpModel, data: ModelData, variables: ModelVariables, device: int) -> cp_model.IntervalVar:
    """The interval from the device's last end (the makespan; for the max span the device's own last
    end) to the horizon, which nothing else on the device overlaps: a redundant interval, in the
    device's no-overlap and (taking all the memory) its cumulative, that names the time objective to
    CP-SAT. Without it CP-SAT looks for one among the precedences when it builds each full search's
    linear relaxation, which on a model of thousands of ops took tens of seconds in which it heeded
    neither its time limit nor a stop (`solver.cpsat.child`)."""
    last = variables.last[device] if data.objective == Objective.SPAN else variables.time_objective
    return model.new_interval_var(last, data.horizon - last, data.horizon, f"after device {device}'s last end")


def add_memory_precedences(model: cp_model.CpModel, data: ModelData, variables: ModelVariables) -> None:
    """F(s, j + K) after B(s, j) ends, where K + 1 microbatches of stage s exceed the memory limit
    less what microbatch j + K holds on the device's earlier stages; and, where that leaves less than
    stage s's weight memory beyond K activations, after the earlier of W(s, j) and B(s, j + 1) ends;
    between two stages a < b of a device on one route, F(a, j + K) after B(b, j) and F(b, j + K)
    after B(a, j), where K + 1 activations of a and one of b exceed the limit (see the module notes).

    Valid only with first-in-first-out microbatches (symmetry breaking) and a fixed limit.
    """
    instance, memory = data.instance, data.tick_instance.activation_memory
    for device in range(instance.num_devices):
        limit = memory_limit_ticks(data, device)
        stages = [s for s in instance.stages_of(device) if memory[s] > 0]
        for s in stages:
            outer = [a for a in stages if a < s and instance.route_at(a) == instance.route_at(s)]
            _add_stage_precedences(model, data, variables, s, limit - sum(int(memory[a]) for a in outer))
            if data.tuning.nested_precedences:
                for a in outer:
                    k = (limit - int(memory[s])) // int(memory[a])
                    _add_nested_precedences(model, variables, instance.microbatches_at(s), a, s, k)


def _add_stage_precedences(
    model: cp_model.CpModel, data: ModelData, variables: ModelVariables, s: int, room: int
) -> None:
    """F(s, j + K) after B(s, j), and after the earlier of W(s, j) and B(s, j + 1) where the room
    left for stage s leaves less than its weight memory beyond K activations."""
    activation = int(data.tick_instance.activation_memory[s])
    k = max(room // activation, 0)
    weight = int(data.tick_instance.weight_memory[s]) if data.split_backward else 0
    tight = data.tuning.tight_precedences and weight > 0 and room < k * activation + weight
    passing = data.instance.microbatches_at(s)
    for j in range(passing.start, max(passing.start, passing.stop - k)):
        forward = variables.starts[OpKey(Kind.F, s, j + k)]
        model.add(forward >= variables.ends[OpKey(Kind.B, s, j)])
        if tight:
            earliest = model.new_int_var(0, data.horizon, f"memory frees for F {s} {j + k}")
            waited = (OpKey(Kind.W, s, j), OpKey(Kind.B, s, j + 1))
            model.add_min_equality(earliest, [variables.ends[key] for key in waited])
            variables.earliest_ends.append((earliest, waited))
            model.add(forward >= earliest)


def _add_nested_precedences(
    model: cp_model.CpModel, variables: ModelVariables, passing: range, a: int, b: int, k: int
) -> None:
    """Between an outer stage a and an inner stage b of one device and route, K apart."""
    if k < 1:
        return
    for j in range(passing.start, max(passing.start, passing.stop - k)):
        model.add(variables.starts[OpKey(Kind.F, a, j + k)] >= variables.ends[OpKey(Kind.B, b, j)])
        model.add(variables.starts[OpKey(Kind.F, b, j + k)] >= variables.ends[OpKey(Kind.B, a, j)])


def memory_limit_ticks(data: ModelData, device: int) -> int:
    """`device`'s memory limit in ticks; the model has limits whenever this is asked."""
    limit = data.tick_instance.limit_of(device)
    if limit is None:
        raise ValueError("the model has no memory limit")
    return int(limit)
