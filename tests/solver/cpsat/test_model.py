"""The CP-SAT formulation solved on its own, without hints or analytic bounds, and its read-back."""

from __future__ import annotations

import pytest
from ortools.sat.python import cp_model

from pipesat.models import Instance, Objective, OpKey
from pipesat.solver.cpsat.data import model_data
from pipesat.solver.cpsat.model import PipelineModel, build_model, orders_from_starts
from pipesat.solver.evaluate.metrics import compute_metrics
from pipesat.solver.evaluate.retime import min_span_schedule
from pipesat.solver.evaluate.simulator import simulate
from tests.solver.brute_force import brute_force_optimum
from tests.strategies import assert_valid


def _instance(**changes: object) -> Instance:
    data = {"num_devices": 3, "num_microbatches": 4, "forward_times": 1, "backward_times": 2}
    return Instance.from_dict({**data, **changes})


def solve_model(model: PipelineModel, **params: object) -> tuple[int, cp_model.CpSolver]:
    """CP-SAT on the model alone: one worker, seed 0, at most 20 s, and the given parameters."""
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    solver.parameters.random_seed = 0
    solver.parameters.max_time_in_seconds = 20
    solver.parameters.catch_sigint_signal = False  # CP-SAT's handler would replace Python's Ctrl-C
    for key, value in params.items():
        setattr(solver.parameters, key, value)
    return solver.solve(model.cp_model), solver


@pytest.mark.parametrize(("p", "m"), [(2, 3), (3, 4), (4, 4), (4, 6)])
def test_fused_uniform_optimum_is_one_f_one_b(p: int, m: int) -> None:
    # The model alone, without hints or analytic bounds, proves (m + p - 1)(F + B).
    model = build_model(model_data(_instance(num_devices=p, num_microbatches=m)))
    status, solver = solve_model(model)
    assert status == cp_model.OPTIMAL
    assert solver.objective_value == (m + p - 1) * 3
    orders = model.orders(solver.value)
    assert compute_metrics(assert_valid(simulate(model.data.instance, orders))).makespan == (m + p - 1) * 3


def test_memory_limit_and_span_objective_in_the_model() -> None:
    # p=2, m=3, unit F/B/W, one microbatch of memory per device: only one microbatch in flight.
    instance = _instance(num_devices=2, num_microbatches=3, backward_times=1, weight_times=1, memory_limit=1)
    model = build_model(model_data(instance, objective=Objective.SPAN, split_backward=True))
    status, solver = solve_model(model)
    assert status == cp_model.OPTIMAL
    schedule = assert_valid(min_span_schedule(instance, model.orders(solver.value)))
    assert compute_metrics(schedule).max_span == solver.objective_value / model.data.scale.time
    assert compute_metrics(schedule).max_peak_memory <= 1


def test_minimize_memory_with_a_time_cap() -> None:
    instance = _instance(num_devices=2, num_microbatches=3)
    model = build_model(model_data(instance, minimize_memory=True, time_cap=12))
    status, solver = solve_model(model)
    assert status == cp_model.OPTIMAL
    schedule = assert_valid(simulate(instance, model.orders(solver.value)))
    assert compute_metrics(schedule).makespan <= 12
    assert compute_metrics(schedule).max_peak_memory == solver.objective_value / model.data.scale.memory == 2


@pytest.mark.parametrize("limit", [1.5, 1.2])
@pytest.mark.parametrize("symmetry_breaking", [True, False])
def test_the_model_with_and_without_symmetry_breaking_meets_brute_force(symmetry_breaking: bool, limit: float) -> None:
    # The limit binds: the optimum is 15 under it and 11 without. (m = 3 took the brute force 2 minutes.)
    # Below 1.5 a forward also waits for the W before it (the tight memory precedences).
    instance = _instance(num_devices=2, num_microbatches=2, weight_times=1, p2p_time=0.5, memory_limit=limit)
    model = build_model(model_data(instance, split_backward=True, symmetry_breaking=symmetry_breaking))
    status, solver = solve_model(model)
    assert status == cp_model.OPTIMAL
    assert_valid(simulate(instance, model.orders(solver.value)))
    assert solver.objective_value / model.data.scale.time == brute_force_optimum(instance, True)


def test_orders_from_starts_put_a_zero_length_w_first() -> None:
    instance = _instance(num_devices=1, num_microbatches=2, weight_times=[0])
    keys = [OpKey(kind, 0, j) for j in (0, 1) for kind in "FBW"]
    starts = dict(zip(keys, [0, 1, 3, 3, 4, 6], strict=True))
    duration = dict(zip(keys, [1, 2, 0, 1, 2, 0], strict=True))
    assert orders_from_starts(instance, starts, duration)[0][2:4] == [("W", 0, 0), ("F", 0, 1)]


def test_only_a_time_objective_builds_a_model() -> None:
    with pytest.raises(ValueError, match="makespan or span"):
        build_model(model_data(_instance(), objective=Objective.MEMORY))
