"""The model's variables: what exists for which objective, and the held-memory demands."""

from __future__ import annotations

from ortools.sat.python import cp_model

from pipesat.models import Instance, Objective, OpKey
from pipesat.solver.cpsat.data import model_data
from pipesat.solver.cpsat.variables import least_hold, make_variables
from pipesat.solver.evaluate.device_bounds import chain_offsets

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
    data = model_data(Instance.from_dict(SPLIT), objective=Objective.SPAN, split_backward=True, minimize_memory=True)
    variables = make_variables(cp_model.CpModel(), data)
    assert variables.capacity is not None and variables.minimized is variables.capacity
    assert all(len(held) == 6 for held in variables.held)
    assert len(variables.first) == len(variables.last) == 2


def test_held_memory_lasts_at_least_its_microbatch_s_round_trip() -> None:
    # F(0) .. B(0) on 3 devices: F 1 + 2 + 3, B 2 + 2 + 2, four p2p hops of 1; the W of stage 0
    # another 1 after its B.
    instance = Instance.from_dict(
        {**SPLIT, "num_devices": 3, "forward_times": [1, 2, 3], "backward_times": 2, "p2p_time": 1, "memory_limit": 6}
    )
    data = model_data(instance, split_backward=True)
    model = cp_model.CpModel()
    held = make_variables(model, data).held[0]
    tick = data.scale.time
    offsets = chain_offsets(data.tick_instance, True)
    least = {h.last: least_hold(data, h.last, set(), offsets) for h in held}
    assert least[OpKey("B", 0, 1)] == (1 + 2 + 3 + 2 + 2 + 2 + 4) * tick
    assert least[OpKey("W", 0, 1)] == least[OpKey("B", 0, 1)] + 1 * tick
    # The model's size variables start there.
    bounds = {h.last: h.size.proto.domain[0] for h in held}
    assert bounds == least
    # A W that may run inside a pair with its B starts with it at the earliest.
    paired = {OpKey("W", 0, 1)}
    assert least_hold(data, OpKey("W", 0, 1), paired, offsets) == least[OpKey("B", 0, 1)] - tick
