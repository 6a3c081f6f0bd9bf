"""Warm starts: every heuristic's order is a complete, feasible hint, and the objective's range is set."""

from __future__ import annotations

import math

import pytest
from ortools.sat.python import cp_model

from pipesat.models import Instance, Objective
from pipesat.solver.cpsat.data import model_data
from pipesat.solver.cpsat.model import build_model
from pipesat.solver.cpsat.warm_start import add_hint, tick_starts, tick_value, warm_start
from pipesat.solver.evaluate.bounds import lower_bound
from pipesat.solver.evaluate.metrics import compute_metrics
from pipesat.solver.evaluate.retime import timed_for
from pipesat.solver.heuristics import handwritten_schedules
from pipesat.solver.heuristics.periodic import periodic_schedule
from tests.solver.cpsat.test_model import solve_model
from tests.strategies import assert_valid

MOE = {"forward_comm_times": 0.3, "backward_comm_times": 0.4}


def _hint_instances() -> list[Instance]:
    base = {"num_devices": 4, "num_microbatches": 8, "weight_times": 1, "p2p_time": 0.5}
    return [
        Instance.from_dict(base),
        Instance.from_dict({**base, "memory_limit": "2x"}),
        Instance.from_dict({**base, "chunks": 2, "placement": "vshape"}),
        Instance.from_dict({**base, "chunks": 2, "placement": "interleaved"}),
        # With all-to-alls: the pairs of DualPipeV and overlapped interleaved 1F1B are hinted as pairs.
        Instance.from_dict({**base, "chunks": 2, "placement": "vshape", **MOE}),
        Instance.from_dict({**base, "chunks": 2, "placement": "interleaved", **MOE}),
    ]


@pytest.mark.parametrize("objective", [Objective.MAKESPAN, Objective.SPAN])
@pytest.mark.parametrize("instance", _hint_instances())
def test_every_heuristic_gives_a_complete_feasible_hint(instance: Instance, objective: Objective) -> None:
    hinted = 0
    for name, schedule in handwritten_schedules(instance):
        if instance.over_limit(compute_metrics(schedule).peak_memory):
            continue
        model = build_model(model_data(instance, objective=objective, split_backward=schedule.split_backward))
        starts, _ = tick_starts(model, schedule.orders())
        value = add_hint(model, starts)
        proto = model.cp_model.proto
        assert len(proto.solution_hint.vars) == len(proto.variables), name
        status, solver = solve_model(model, fix_variables_to_their_hinted_value=True)
        assert status == cp_model.OPTIMAL, name
        assert solver.objective_value == value == tick_value(model, schedule.orders())
        if instance.has_communication and schedule.has_pairs:
            assert any(solver.value(var) for var in model.variables.paired.values()), name
            # Pairs the model does not offer run as it can run them, which is never slower.
            ticks = timed_for(objective, model.data.tick_instance, schedule.orders())
            assert value <= compute_metrics(ticks).objective(objective), name
        hinted += 1
    assert hinted >= 2


def test_a_memory_hint_carries_the_capacity() -> None:
    instance = Instance.from_dict({"num_devices": 2, "num_microbatches": 3})
    model = build_model(model_data(instance, minimize_memory=True))
    orders = dict(handwritten_schedules(instance))["1f1b"].orders()
    starts, capacity = tick_starts(model, orders)
    assert capacity == 2 * model.data.scale.memory
    assert add_hint(model, starts, capacity) == capacity
    with pytest.raises(ValueError, match="capacity"):
        add_hint(model, starts)


def test_warm_start_bounds_the_objective_between_the_lower_bound_and_the_hint() -> None:
    instance = Instance.from_dict({"num_devices": 3, "num_microbatches": 4, "backward_times": 3, "p2p_time": 0.5})
    model = build_model(model_data(instance))
    orders = dict(handwritten_schedules(instance))["1f1b"].orders()
    warm_start(model, orders)
    constraints = model.cp_model.proto.constraints
    lower, upper = constraints[len(constraints) - 2], constraints[len(constraints) - 1]
    scale = model.data.scale.time
    assert list(lower.linear.vars) == list(upper.linear.vars) == [model.variables.time_objective.index]
    assert lower.linear.domain[0] == math.ceil(lower_bound(instance, "makespan", False) * scale)
    assert upper.linear.domain[1] == compute_metrics(timed_for(Objective.MAKESPAN, instance, orders)).makespan * scale
    status, _ = solve_model(model)
    assert status == cp_model.OPTIMAL


def test_a_bound_proven_elsewhere_narrows_the_range_only_where_the_times_are_exact() -> None:
    exact = build_model(model_data(Instance.from_dict({"num_devices": 3, "num_microbatches": 4, "p2p_time": 0.5})))
    analytic = warm_start(build_model(model_data(exact.data.instance)), None).lower
    assert warm_start(exact, None, floor=analytic / exact.data.scale.time + 2.25).lower == analytic + 5
    # Times floored to ticks: a schedule's value in ticks can be below its value, so a bound on the
    # value is no bound on the model's range.
    times = {"forward_times": [math.pi, 2.0, math.e], "backward_times": [3 * math.sqrt(2), 5, 4], "p2p_time": 0.1234567}
    inexact = build_model(model_data(Instance.from_dict({"num_devices": 3, "num_microbatches": 5, **times})))
    assert not inexact.data.scale.exact_time
    assert (
        warm_start(inexact, None, floor=1000.0).lower
        == warm_start(build_model(model_data(inexact.data.instance)), None).lower
    )


@pytest.mark.parametrize("objective", [Objective.MAKESPAN, Objective.SPAN])
def test_a_hint_under_a_tight_limit_gives_the_memory_precedences_earliest_ends_too(objective: Objective) -> None:
    # 2.2 holds two microbatches of a stage but not a weight's memory more: the memory precedences'
    # earliest ends are variables of their own, which a complete hint gives values too.
    instance = Instance.from_dict(
        {"num_devices": 3, "num_microbatches": 5, "weight_times": 1, "p2p_time": 1, "memory_limit": 2.2}
    )
    schedule = assert_valid(periodic_schedule(instance, True))
    model = build_model(model_data(instance, objective=objective, split_backward=True))
    assert model.variables.earliest_ends
    starts, _ = tick_starts(model, schedule.orders())
    value = add_hint(model, starts)
    proto = model.cp_model.proto
    assert len(proto.solution_hint.vars) == len(proto.variables)
    status, solver = solve_model(model, fix_variables_to_their_hinted_value=True)
    assert status == cp_model.OPTIMAL
    assert solver.objective_value == value
