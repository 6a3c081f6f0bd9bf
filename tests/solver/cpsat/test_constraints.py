"""The model's constraints, one step at a time: each holds in the solutions CP-SAT finds."""

from __future__ import annotations

import pytest
from ortools.sat.python import cp_model

from pipesat.models import Instance, OpKey, Tuning
from pipesat.solver.cpsat.constraints import add_memory_precedences, add_no_overlaps
from pipesat.solver.cpsat.data import model_data
from pipesat.solver.cpsat.model import PipelineModel, build_model
from pipesat.solver.cpsat.variables import make_variables
from pipesat.solver.evaluate.simulator import simulate
from tests.solver.cpsat.test_model import solve_model
from tests.strategies import assert_valid

SPLIT = {"num_devices": 3, "num_microbatches": 5, "weight_times": 1, "p2p_time": 1}


def _starts(data: dict, **options: object) -> tuple[dict[OpKey, int], PipelineModel]:
    model = build_model(model_data(Instance.from_dict(data), split_backward=True, **options))
    status, solver = solve_model(model)
    assert status == cp_model.OPTIMAL
    return {key: solver.value(var) for key, var in model.variables.starts.items()}, model


def test_precedences_wait_for_the_dependency_and_p2p_across_devices() -> None:
    starts, model = _starts(SPLIT)
    durations = model.data.durations
    p2p = model.data.tick_instance.p2p_time
    for j in range(5):
        assert starts[("F", 1, j)] >= starts[("F", 0, j)] + durations[("F", 0, j)] + p2p
        assert starts[("W", 1, j)] >= starts[("B", 1, j)] + durations[("B", 1, j)]


def test_symmetry_breaking_starts_at_zero_and_keeps_microbatches_in_order() -> None:
    starts, model = _starts(SPLIT)
    assert starts[("F", 0, 0)] == 0
    for kind, stage, j in model.data.keys:
        if j > 0:
            assert starts[(kind, stage, j)] >= starts[(kind, stage, j - 1)] + model.data.durations[(kind, stage, j - 1)]


def test_one_no_overlap_per_device_over_its_ops() -> None:
    data = model_data(Instance.from_dict({**SPLIT, "chunks": 2, "placement": "vshape"}), split_backward=True)
    model = cp_model.CpModel()
    add_no_overlaps(model, data, make_variables(model, data))
    proto = model.proto
    no_overlaps = [c.no_overlap for c in proto.constraints if c.has_no_overlap()]
    # Each device's ops and its tail, the interval from its last end to the horizon.
    assert [len(c.intervals) for c in no_overlaps] == [len(data.on_device(d)) + 1 for d in range(3)] == [31, 31, 31]


@pytest.mark.parametrize("objective", ["makespan", "span"])
def test_each_device_s_tail_runs_from_its_last_end_to_the_horizon(objective: str) -> None:
    starts, model = _starts({**SPLIT, "memory_limit": 2.2}, objective=objective)
    proto = model.cp_model.proto
    variables = model.variables
    status, solver = solve_model(model)
    assert status == cp_model.OPTIMAL
    tails = [c for c in proto.constraints if c.has_interval() and c.name.startswith("after device")]
    assert len(tails) == 2 * 3  # one in each device's no-overlap and one in its cumulative
    for d in range(3):
        last = solver.value(variables.last[d] if objective == "span" else variables.time_objective)
        ends = [starts[key] + model.data.durations[key] for key in model.data.on_device(d)]
        assert max(ends) <= last


def test_memory_precedences_count_the_microbatches_that_fit() -> None:
    # The limit holds two microbatches of a stage: F(s, j + 2) waits for B(s, j), j < m - 2.
    data = model_data(Instance.from_dict({**SPLIT, "memory_limit": 2.5}), split_backward=True)
    model = cp_model.CpModel()
    add_memory_precedences(model, data, make_variables(model, data))
    assert len(model.proto.constraints) == 3 * (5 - 2)
    starts, _ = _starts({**SPLIT, "memory_limit": 2.5})
    assert starts[("F", 0, 2)] >= starts[("B", 0, 0)]


def test_a_limit_short_of_a_weight_beyond_k_microbatches_makes_f_wait_for_w_or_the_next_b() -> None:
    # 2.2 holds two microbatches (activations 1) but not two and a weight memory (0.5) more: F(s, j + 2)
    # also waits for the earlier of W(s, j) and B(s, j + 1).
    data = model_data(Instance.from_dict({**SPLIT, "memory_limit": 2.2}), split_backward=True)
    model = cp_model.CpModel()
    add_memory_precedences(model, data, make_variables(model, data))
    assert len(model.proto.constraints) == 3 * (5 - 2) * 3
    starts, model = _starts({**SPLIT, "memory_limit": 2.2})
    ends = {key: start + model.data.durations[key] for key, start in starts.items()}
    for s in range(3):
        for j in range(3):
            assert starts[("F", s, j + 2)] >= min(ends[("W", s, j)], ends[("B", s, j + 1)])


def test_a_device_s_inner_stage_waits_for_its_outer_stage_k_microbatches_back() -> None:
    # V, p = 2: device 0 holds stages 0 and 3, activations 0.5 a chunk, limit 1.75: three microbatches
    # of stage 0 and one of stage 3 exceed it, so F(0, j + 2) waits for B(3, j) and F(3, j + 2) for
    # B(0, j); likewise stages 1 and 2 on device 1.
    data = {**SPLIT, "num_devices": 2, "chunks": 2, "placement": "vshape", "activation_memory": 1}
    starts, model = _starts({**data, "memory_limit": 1.75})
    ends = {key: start + model.data.durations[key] for key, start in starts.items()}
    for a, b in ((0, 3), (1, 2)):
        for j in range(3):
            assert starts[("F", a, j + 2)] >= ends[("B", b, j)]
            assert starts[("F", b, j + 2)] >= ends[("B", a, j)]
    counted = []
    for nested in (True, False):
        instance = Instance.from_dict({**data, "memory_limit": 1.75})
        built = model_data(instance, split_backward=True, tuning=Tuning(nested_precedences=nested))
        cp = cp_model.CpModel()
        add_memory_precedences(cp, built, make_variables(cp, built))
        counted.append(len(cp.proto.constraints))
    assert counted[0] - counted[1] == 2 * 2 * (5 - 2)  # two pairs, both ways, j = 0, 1, 2


# The model's redundant parts: each is toggled alone (Tuning fields measured by bench_proofs).
REDUNDANT = ["tight_precedences", "nested_precedences", "least_holds"]


@pytest.mark.parametrize("setting", REDUNDANT)
@pytest.mark.parametrize("limit", [1.2, 1.6, 2.2, 3.4])
@pytest.mark.parametrize("placement", ["linear", "vshape"])
def test_the_optimum_is_the_same_with_and_without_each_redundant_constraint(
    placement: str, limit: float, setting: str
) -> None:
    # The precedences and the least held lengths are redundant: they cut no schedule of the model
    # (with first-in-first-out microbatches), so its optimum stays.
    chunks = 2 if placement == "vshape" else 1
    data = {**SPLIT, "num_devices": 2, "num_microbatches": 4, "chunks": chunks, "placement": placement}
    data |= {"forward_times": [1, 2] * chunks, "backward_times": [2, 1] * chunks, "memory_limit": limit * chunks}
    optima = []
    for on in (True, False):
        model = build_model(model_data(Instance.from_dict(data), split_backward=True, tuning=Tuning(**{setting: on})))
        status, solver = solve_model(model)
        assert status == cp_model.OPTIMAL
        assert_valid(simulate(model.data.instance, model.orders(solver.value)))
        optima.append(solver.objective_value)
    assert optima[0] == optima[1]
