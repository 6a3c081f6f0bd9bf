"""The CP-SAT formulation: tick scaling, the model solved on its own, and complete hints."""

from __future__ import annotations

import math

import pytest
from ortools.sat.python import cp_model

from models import Instance, PipesatError
from solver.cpsat.model import PipelineModel, choose_scale, orders_from_starts, scaled_instance
from solver.evaluate.metrics import compute_metrics
from solver.evaluate.retime import min_span_schedule
from solver.evaluate.simulator import simulate
from solver.heuristics import all_heuristics, run_heuristic
from tests.strategies import assert_valid


def _instance(**changes: object) -> Instance:
    data = {"num_devices": 3, "num_microbatches": 4, "forward_times": 1, "backward_times": 2}
    return Instance.from_dict({**data, **changes})


def _solve(model: PipelineModel, **params: object) -> tuple[int, cp_model.CpSolver]:
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    solver.parameters.random_seed = 0
    solver.parameters.max_time_in_seconds = 20
    solver.parameters.catch_sigint_signal = False  # CP-SAT's handler would replace Python's Ctrl-C
    for key, value in params.items():
        setattr(solver.parameters, key, value)
    return solver.solve(model.model), solver


def test_decimal_times_scale_exactly() -> None:
    instance = _instance(forward_times=18.522, backward_times=[18.086, 18.1, 1 / 3], weight_times=9.337, p2p_time=0.601)
    scale = choose_scale(instance, "makespan")
    assert scale.exact_time and scale.time == 3000
    ticks = scaled_instance(instance, scale)
    assert ticks.forward_times[0] == 55566 and ticks.p2p_time == 1803 and ticks.backward_times[2] == 1000


def test_span_scale_makes_cycle_means_whole_ticks() -> None:
    instance = _instance(forward_times=0.5)
    assert choose_scale(instance, "makespan").time == 2
    span_scale = choose_scale(instance, "span")
    assert span_scale.exact_span and span_scale.time == 2 * math.lcm(1, 2, 3)
    assert choose_scale(_instance(num_devices=8, forward_times=0.001), "span").time == 1000 * 840
    assert not choose_scale(_instance(num_devices=16, forward_times=0.001), "span").exact_span


def test_irrational_times_are_floored_at_fine_resolution() -> None:
    instance = _instance(forward_times=math.pi, backward_times=math.e)
    scale = choose_scale(instance, "makespan")
    assert not scale.exact_time
    ticks = scaled_instance(instance, scale)
    assert ticks.forward_times[0] == math.floor(math.pi * scale.time)
    assert ticks.forward_times[0] / scale.time == pytest.approx(math.pi, rel=1e-4)


def test_memory_of_three_chunks_scales_exactly() -> None:
    instance = _instance(chunks=3, placement="interleaved", memory_limit=2)
    scale = choose_scale(instance, "makespan")
    assert scale.exact_memory and scale.memory == 3
    assert scaled_instance(instance, scale).activation_memory[0] == 1


@pytest.mark.parametrize(("p", "m"), [(2, 3), (3, 4), (4, 4), (4, 6)])
def test_fused_uniform_optimum_is_one_f_one_b(p: int, m: int) -> None:
    # The model alone, without hints or analytic bounds, proves (m + p - 1)(F + B).
    model = PipelineModel(_instance(num_devices=p, num_microbatches=m))
    status, solver = _solve(model)
    assert status == cp_model.OPTIMAL
    assert solver.objective_value == (m + p - 1) * 3
    orders = model.orders(solver.value)
    assert compute_metrics(assert_valid(simulate(model.instance, orders))).makespan == (m + p - 1) * 3


def test_memory_limit_and_span_objective_in_the_model() -> None:
    # p=2, m=3, unit F/B/W, one microbatch of memory per device: only one microbatch in flight.
    instance = _instance(num_devices=2, num_microbatches=3, backward_times=1, weight_times=1, memory_limit=1)
    model = PipelineModel(instance, "span", split_backward=True)
    status, solver = _solve(model)
    assert status == cp_model.OPTIMAL
    schedule = assert_valid(min_span_schedule(instance, model.orders(solver.value)))
    assert compute_metrics(schedule).max_span == solver.objective_value / model.scale.time
    assert compute_metrics(schedule).max_peak_memory <= 1


def test_minimize_memory_with_a_time_cap() -> None:
    instance = _instance(num_devices=2, num_microbatches=3)
    model = PipelineModel(instance, minimize_memory=True, time_cap=12)
    status, solver = _solve(model)
    assert status == cp_model.OPTIMAL
    schedule = assert_valid(simulate(instance, model.orders(solver.value)))
    assert compute_metrics(schedule).makespan <= 12
    assert compute_metrics(schedule).max_peak_memory == solver.objective_value / model.scale.memory == 2


def _hint_instances() -> list[Instance]:
    base = {"num_devices": 4, "num_microbatches": 8, "weight_times": 1, "p2p_time": 0.5}
    return [
        Instance.from_dict(base),
        Instance.from_dict({**base, "memory_limit": "2x"}),
        Instance.from_dict({**base, "chunks": 2, "placement": "vshape"}),
        Instance.from_dict({**base, "chunks": 2, "placement": "interleaved"}),
    ]


@pytest.mark.parametrize("objective", ["makespan", "span"])
@pytest.mark.parametrize("instance", _hint_instances())
def test_every_heuristic_gives_a_complete_feasible_hint(instance: Instance, objective: str) -> None:
    hinted = 0
    for heuristic in all_heuristics():
        try:
            schedule = run_heuristic(heuristic.name, instance)
        except PipesatError:  # not applicable to this instance
            continue
        if compute_metrics(schedule).max_peak_memory > (instance.memory_limit or math.inf):
            continue
        model = PipelineModel(instance, objective, split_backward=schedule.split_backward)
        timing = min_span_schedule if objective == "span" else simulate
        ticks = timing(model.ticks, schedule.orders())
        value = model.add_hint({op.key: round(op.start) for op in ticks.ops})
        proto = model.model.proto
        assert len(proto.solution_hint.vars) == len(proto.variables), heuristic.name
        status, solver = _solve(model, fix_variables_to_their_hinted_value=True)
        assert status == cp_model.OPTIMAL, heuristic.name
        assert solver.objective_value == value == compute_metrics(ticks).objective(objective)
        hinted += 1
    assert hinted >= 2


def test_orders_from_starts_put_a_zero_length_w_first() -> None:
    instance = _instance(num_devices=1, num_microbatches=2, weight_times=[0])
    starts = {("F", 0, 0): 0, ("B", 0, 0): 1, ("W", 0, 0): 3, ("F", 0, 1): 3, ("B", 0, 1): 4, ("W", 0, 1): 6}
    duration = {("F", 0, 0): 1, ("B", 0, 0): 2, ("W", 0, 0): 0, ("F", 0, 1): 1, ("B", 0, 1): 2, ("W", 0, 1): 0}
    assert orders_from_starts(instance, starts, duration)[0][2:4] == [("W", 0, 0), ("F", 0, 1)]
