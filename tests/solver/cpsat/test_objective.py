"""The objective: the makespan and max span as the model defines them, and the time cap."""

from __future__ import annotations

from ortools.sat.python import cp_model

from pipesat.models import Instance, Objective
from pipesat.solver.cpsat.data import model_data
from pipesat.solver.cpsat.model import build_model
from pipesat.solver.evaluate.metrics import compute_metrics
from pipesat.solver.evaluate.retime import min_span_schedule
from tests.solver.cpsat.test_model import solve_model

INSTANCE = Instance.from_dict({"num_devices": 3, "num_microbatches": 4, "weight_times": 1, "p2p_time": 0.5})


def test_the_span_variables_are_each_devices_first_start_and_last_end() -> None:
    model = build_model(model_data(INSTANCE, objective=Objective.SPAN, split_backward=True))
    status, solver = solve_model(model)
    assert status == cp_model.OPTIMAL
    starts = {key: solver.value(var) for key, var in model.variables.starts.items()}
    for d in range(3):
        on_device = model.data.on_device(d)
        assert solver.value(model.variables.first[d]) <= min(starts[k] for k in on_device)
        assert solver.value(model.variables.last[d]) >= max(starts[k] + model.data.durations[k] for k in on_device)
    span = compute_metrics(min_span_schedule(INSTANCE, model.orders(solver.value))).max_span
    assert solver.objective_value == span * model.data.scale.time


def test_a_time_cap_below_the_optimum_is_infeasible() -> None:
    optimum = build_model(model_data(INSTANCE, split_backward=True))
    status, solver = solve_model(optimum)
    assert status == cp_model.OPTIMAL
    best = solver.objective_value / optimum.data.scale.time
    capped = build_model(model_data(INSTANCE, split_backward=True, minimize_memory=True, time_cap=best - 0.5))
    assert solve_model(capped)[0] == cp_model.INFEASIBLE
    at_best = build_model(model_data(INSTANCE, split_backward=True, minimize_memory=True, time_cap=best))
    status, solver = solve_model(at_best)
    assert status == cp_model.OPTIMAL
    assert solver.value(at_best.variables.time_objective) <= best * at_best.data.scale.time
