"""The model's variables: what exists for which objective, and the held-memory demands."""

from __future__ import annotations

from ortools.sat.python import cp_model

from pipesat.models import Instance, Objective
from pipesat.solver.cpsat.data import model_data
from pipesat.solver.cpsat.variables import make_variables

SPLIT = {"num_devices": 2, "num_microbatches": 3, "weight_times": 1, "activation_memory": 2, "weight_memory": 0.5}


def test_no_memory_variables_without_a_limit() -> None:
    data = model_data(Instance.from_dict(SPLIT), split_backward=True)
    variables = make_variables(cp_model.CpModel(), data)
    assert set(variables.starts) == set(data.keys) == set(variables.ends)
    assert variables.held == [[], []] and variables.capacity is None
    assert variables.first == variables.last == []
    assert variables.minimized is variables.time_objective


def test_held_memory_per_microbatch_follows_the_memory_model() -> None:
    data = model_data(Instance.from_dict({**SPLIT, "memory_limit": 4}), split_backward=True)
    variables = make_variables(cp_model.CpModel(), data)
    per_unit = data.scale.memory
    for device, held in enumerate(variables.held):
        (stage,) = data.instance.stages_of(device)
        # F..B holds M_B - M_W, F..W holds M_W, for each of the 3 microbatches.
        assert [(h.first, h.last, h.demand) for h in held[:2]] == [
            (("F", stage, 0), ("B", stage, 0), 1.5 * per_unit),
            (("F", stage, 0), ("W", stage, 0), 0.5 * per_unit),
        ]
        assert len(held) == 6


def test_fused_backward_holds_everything_until_the_b() -> None:
    data = model_data(Instance.from_dict({**SPLIT, "memory_limit": 4}), split_backward=False)
    held = make_variables(cp_model.CpModel(), data).held[0]
    assert {h.last[0] for h in held} == {"B"} and {h.demand for h in held} == {2 * data.scale.memory}


def test_minimising_memory_adds_the_capacity_and_the_span_its_device_ends() -> None:
    data = model_data(Instance.from_dict(SPLIT), Objective.SPAN, split_backward=True, minimize_memory=True)
    variables = make_variables(cp_model.CpModel(), data)
    assert variables.capacity is not None and variables.minimized is variables.capacity
    assert all(len(held) == 6 for held in variables.held)
    assert len(variables.first) == len(variables.last) == 2
