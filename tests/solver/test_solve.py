"""The solve: proven optima against brute force, warm starts, limits, interruption, options."""

from __future__ import annotations

import dataclasses
import logging
import math
import multiprocessing
import os
import signal
import time
from multiprocessing import resource_tracker

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipesat.models import Instance, InstanceError, Objective, OptionError, PipesatError, Tuning
from pipesat.models.solve_result import InfeasibleReason, NamedValue, StopReason
from pipesat.solver.cpsat import child as child_module
from pipesat.solver.evaluate.bounds import lower_bound, minimum_memory_limit
from pipesat.solver.evaluate.metrics import compute_metrics
from pipesat.solver.evaluate.retime import retime_for_span
from pipesat.solver.evaluate.validator import validate
from pipesat.solver.heuristics import all_heuristics, run_heuristic
from pipesat.solver.report.solve_text import outcome_text, summary_fields
from pipesat.solver.solve import solve
from tests.conftest import make_instance
from tests.solver.brute_force import brute_force_optimum, two_chunk_instance
from tests.strategies import PROPERTY_SETTINGS, assert_valid, instances, with_feasible_limit

FAST = {"time_limit": 10.0, "workers": 1, "seed": 0}


def _instance(p: int, m: int, split: bool, p2p: float, limit: float | None) -> Instance:
    times = {"forward_times": [1, 1.5, 2][:p], "backward_times": [2, 1.5, 2.5][:p], "p2p_time": p2p}
    weight_times = {"weight_times": [1, 0.5, 1][:p]} if split else {}
    return make_instance(p, m, **times, **weight_times, memory_limit=limit)


BRUTE_FORCE_CASES = [
    # (p, m, split, p2p, limit, objective): limits between the least feasible and the 1F1B peak.
    (2, 2, True, 0.0, None, "makespan"),
    (2, 2, True, 0.5, 1.25, "makespan"),
    (2, 2, True, 0.5, 1.25, "span"),
    (2, 3, False, 0.0, 1.25, "makespan"),
    (2, 3, False, 0.5, None, "span"),
    (2, 3, False, 0.5, 1.25, "span"),
    (3, 2, False, 0.5, None, "span"),
    (3, 2, True, 0.0, None, "makespan"),
    (3, 2, True, 0.0, 1.25, "span"),
    (3, 2, True, 0.5, 2.0, "makespan"),
    (3, 2, True, 0.5, None, "span"),
]


@pytest.mark.parametrize(("p", "m", "split", "p2p", "limit", "objective"), BRUTE_FORCE_CASES)
def test_proven_optimum_equals_brute_force(
    p: int, m: int, split: bool, p2p: float, limit: float | None, objective: str
) -> None:
    instance = _instance(p, m, split, p2p, limit)
    result = solve(instance, objective, **FAST)
    assert result.status == "optimal", outcome_text(result)
    assert result.value == brute_force_optimum(instance, split, objective)
    assert result.bound == result.value and result.gap == 0
    schedule = assert_valid(result.schedule)
    assert compute_metrics(schedule).objective(objective) == result.value
    assert schedule.split_backward == split


@pytest.mark.parametrize("workers", [1, 2])  # 2: the proof portfolio (objective lower-bound search)
@pytest.mark.parametrize("symmetry_breaking", [True, False])
@pytest.mark.parametrize(("placement", "objective"), [("interleaved", "makespan"), ("vshape", "span")])
def test_brute_force_with_two_chunks(placement: str, objective: str, symmetry_breaking: bool, workers: int) -> None:
    instance = two_chunk_instance(placement)
    result = solve(instance, objective, symmetry_breaking=symmetry_breaking, **(FAST | {"workers": workers}))
    assert result.status == "optimal"
    assert result.value == brute_force_optimum(instance, False, objective)
    assert_valid(result.schedule)


@pytest.mark.parametrize("placement", ["interleaved", "vshape"])
def test_brute_force_with_two_chunks_at_the_least_memory(placement: str) -> None:
    # Limit 1: a device holds one microbatch's two chunks (0.5 each) and no more, so the precedences
    # between the stages of a device and the shortened room of the inner stage all apply.
    instance = two_chunk_instance(placement).with_changes(memory_limit=1.0)
    result = solve(instance, "span", **FAST)
    assert result.status == "optimal"
    assert result.value == brute_force_optimum(instance, False, "span")
    assert_valid(result.schedule)


IRRATIONAL_TIMES = {
    "forward_times": [2 * math.pi, math.sqrt(3), math.pi, math.e],
    "backward_times": [math.pi, math.sqrt(3), math.e, 1 / math.pi],
    "p2p_time": 1 / math.pi,
}


@pytest.mark.parametrize("objective", ["makespan", "span"])
@pytest.mark.parametrize("placement", ["interleaved", "vshape"])
def test_an_order_proven_optimal_for_floored_times_is_optimal_at_that_resolution(
    objective: str, placement: str
) -> None:
    # Two chunks a device, where the analytic bounds leave a gap for CP-SAT to close (on one chunk a
    # device, 2 devices, they prove the start optimal without it) and brute force is quick.
    instance = two_chunk_instance(placement).with_changes(**IRRATIONAL_TIMES, memory_limit="0.75x")
    result = solve(instance, objective, **FAST)
    assert_valid(result.schedule)
    assert result.status == "optimal" and result.resolution is not None
    assert result.bound < result.value and 0 < result.gap < 1e-5
    # The true optimum lies between the proven bound and the value, which differ by the rounding.
    assert result.bound <= brute_force_optimum(instance, False, objective) <= result.value


def test_an_inexact_time_never_rounds_up_to_a_bound_above_a_schedule() -> None:
    # Once 2π at 10^5 ticks rounded up (within 10^-6 of a whole tick), the proven bound passed the
    # start's value and the solve stopped on an internal error (`scale.to_ticks` floors it now).
    times = {"forward_times": [math.pi, math.e, math.sqrt(2)], "backward_times": [math.sqrt(3), 2 * math.pi, math.e]}
    instance = _instance(3, 4, False, 1 / math.pi, None).with_changes(**times, memory_limit="0.75x")
    result = solve(instance, "makespan", **FAST)
    assert_valid(result.schedule)
    assert result.status == "optimal" and result.bound <= result.value


@pytest.mark.parametrize(("p", "m"), [(2, 4), (3, 3), (4, 6), (4, 8)])
def test_fused_uniform_linear_optimum_is_one_f_one_b(p: int, m: int) -> None:
    instance = Instance.from_dict({"num_devices": p, "num_microbatches": m, "forward_times": 2, "backward_times": 3})
    result = solve(instance, **FAST)
    assert result.status == "optimal"
    assert result.value == (m + p - 1) * (2 + 3)
    assert_valid(result.schedule)


@pytest.mark.parametrize(
    "data",
    [
        {"num_devices": 3, "num_microbatches": 4, "weight_times": 1, "p2p_time": 0.5, "memory_limit": "1x"},
        {"num_devices": 3, "num_microbatches": 3, "backward_times": [2, 3, 1], "memory_limit": "0.7x"},
        {"num_devices": 2, "num_microbatches": 4, "chunks": 2, "placement": "vshape", "weight_times": 1},
    ],
)
def test_symmetry_breaking_on_and_off_give_the_same_optimum(data: dict) -> None:
    instance = Instance.from_dict(data)
    on = solve(instance, **FAST)
    off = solve(instance, symmetry_breaking=False, **FAST)
    assert on.status == off.status == "optimal"
    assert on.value == off.value
    assert_valid(on.schedule)
    assert_valid(off.schedule)


def test_search_improves_on_the_best_heuristic_and_reports_it() -> None:
    # The fused instance's heuristics are 1F1B and GPipe; with W split out CP-SAT does better.
    instance = Instance.from_dict({"num_devices": 3, "num_microbatches": 4, "backward_times": 1, "weight_times": 1})
    gpipe = compute_metrics(run_heuristic("gpipe", instance)).makespan
    calls: list[tuple[float, float | None, float | None]] = []
    result = solve(instance, progress=lambda *args: calls.append(args), **FAST)
    assert result.status == "optimal"
    start = result.starting_point
    assert start is not None
    assert result.value <= start.value <= gpipe
    # The best heuristic is named and valued as `pipesat schedule NAME` makes it.
    best = result.best_heuristic
    assert best is not None and best.value >= result.value
    assert best.value == compute_metrics(run_heuristic(best.name, instance)).makespan
    assert result.time_to_first is not None and result.time_to_best is not None
    assert 0 <= result.time_to_first <= result.solve_time and result.time_to_best <= result.solve_time
    assert calls and all(value is None or value >= result.value for _, value, _ in calls)
    assert result.schedule.source["kind"] == "solver" and result.schedule.source["status"] == "optimal"


def test_a_heuristic_meeting_the_bound_is_optimal_without_search(one_f_one_b_instance: Instance) -> None:
    result = solve(one_f_one_b_instance, **FAST)
    assert result.status == "optimal" and result.starting_point.name in ("1f1b", "gpipe")
    assert "meets the lower bound" in outcome_text(result)
    assert result.best_heuristic.value == result.value


def test_among_equal_values_the_lower_peak_memory_wins(one_f_one_b_instance: Instance) -> None:
    # Fused and no limit: GPipe and 1F1B both meet the bound; 1F1B holds half the activations.
    instance = one_f_one_b_instance
    result = solve(instance, **FAST)
    assert_valid(result.schedule)
    peaks = {}
    for name in ("gpipe", "1f1b"):
        metrics = compute_metrics(run_heuristic(name, instance))
        assert metrics.makespan == pytest.approx(result.value)
        peaks[name] = metrics.max_peak_memory
    assert peaks["1f1b"] < peaks["gpipe"]
    assert compute_metrics(result.schedule).max_peak_memory == peaks["1f1b"]
    assert result.starting_point.name == "1f1b"


def test_the_wall_time_including_the_model_honours_the_time_limit() -> None:
    # About 1,200 ops that CP-SAT cannot close: the watchdog stops it and the best so far comes back.
    # The wall-time margin is generous (a busy CI machine); without the watchdog CP-SAT overran by seconds.
    # The limit leaves the search time to start: the starting schedules alone take about 2 s here.
    times = {"forward_times": 18.5, "backward_times": 18.1, "weight_times": 9.3, "p2p_time": 0.6}
    instance = make_instance(8, 48, **times, memory_limit="1.5x")
    started = time.monotonic()
    result = solve(instance, "span", time_limit=3.0, workers=1, seed=0)
    wall = time.monotonic() - started
    assert wall <= 3.0 + 2.0 and result.solve_time <= wall
    assert result.searched and result.status == "feasible" and result.gap > 0
    assert_valid(result.schedule)
    assert result.value <= result.starting_point.value


def test_minimize_memory_without_a_cap_is_the_minimum_limit() -> None:
    instance = Instance.from_dict({"num_devices": 3, "num_microbatches": 3, "weight_times": 1, "memory_limit": 5})
    result = solve(instance, minimize="memory", **FAST)
    assert result.objective == "memory" and result.status == "optimal"
    assert result.value == result.smallest_feasible_limit == minimum_memory_limit(instance)
    assert_valid(result.schedule)


def test_minimize_memory_under_a_makespan_cap_matches_brute_force() -> None:
    instance = _instance(2, 3, False, 0.5, None)
    cap = 14.0
    result = solve(instance, minimize="memory", makespan_cap=cap, **FAST)
    assert result.status == "optimal"
    assert compute_metrics(result.schedule).makespan <= cap
    feasible = [
        limit
        for limit in (1.0, 2.0, 3.0)
        if brute_force_optimum(instance.with_changes(memory_limit=limit), False) <= cap
    ]
    assert result.value == min(feasible) > minimum_memory_limit(instance)
    assert_valid(dataclasses.replace(result.schedule, instance=instance.with_changes(memory_limit=result.value)))


def test_a_cap_below_the_lower_bound_is_infeasible() -> None:
    result = solve(_instance(2, 3, False, 0.0, None), minimize="memory", makespan_cap=3)
    assert result.status == "infeasible" and "lower bound" in outcome_text(result)
    assert result.infeasibility is not None and result.infeasibility.reason == InfeasibleReason.TIME_CAP
    assert result.infeasibility.limit == 3 and result.infeasibility.least > 3


def test_keyboard_interrupt_in_progress_returns_the_best_so_far(hard_instance: Instance) -> None:
    calls = []

    def progress(elapsed: float, value: float | None, bound: float | None) -> None:
        calls.append(value)
        if len(calls) == 2:
            raise KeyboardInterrupt

    result = solve(hard_instance, time_limit=30, symmetry_breaking=False, progress=progress)
    assert result.status == "interrupted", outcome_text(result)
    assert result.solve_time < 20
    assert_valid(result.schedule)
    assert result.value <= result.starting_point.value


def test_ctrl_c_during_the_search_returns_the_best_so_far(hard_instance: Instance) -> None:
    calls = []

    def progress(elapsed: float, value: float | None, bound: float | None) -> None:
        calls.append(value)
        if len(calls) == 2:
            signal.raise_signal(signal.SIGINT)  # delivered to the main thread, as Ctrl-C is
            time.sleep(0.5)  # hold the search until the main thread has taken the signal

    result = solve(hard_instance, time_limit=30, symmetry_breaking=False, progress=progress)
    assert result.status == "interrupted", outcome_text(result)
    assert_valid(result.schedule)


def test_deterministic_runs_agree(hard_instance: Instance) -> None:
    first = solve(hard_instance, time_limit=1.0, deterministic=True, workers=2)
    second = solve(hard_instance, time_limit=1.0, deterministic=True, workers=2)
    assert first.value == second.value and first.bound == second.bound
    assert first.schedule.ops == second.schedule.ops


def test_gap_stops_early_with_an_honest_message(hard_instance: Instance) -> None:
    result = solve(hard_instance, gap=0.5, **FAST)
    assert result.status in ("feasible", "optimal")
    if result.status == "feasible":
        assert 0 < result.gap <= 0.5 and "gap" in outcome_text(result)
    assert result.solve_time < 5


@pytest.mark.parametrize(
    ("options", "error", "match"),
    [
        ({"objective": "latency"}, OptionError, "objective"),
        ({"minimize": "energy"}, OptionError, "minimize"),
        ({"time_limit": 0}, OptionError, "time limit"),
        ({"workers": 0}, OptionError, "workers"),
        ({"gap": -0.5}, OptionError, "gap"),
        ({"makespan_cap": 10}, OptionError, "cap"),
        ({"split_backward": True}, InstanceError, "weight_times"),
    ],
)
def test_bad_options_say_what_is_wrong(options: dict, error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        solve(Instance.from_dict({"num_devices": 2, "num_microbatches": 2}), **options)


@st.composite
def _limited_instances(draw: st.DrawFn) -> Instance:
    instance = draw(instances(max_devices=3, max_microbatches=4))
    fraction = draw(st.sampled_from([None, 0.0, 0.5, 1.0]))
    return instance if fraction is None else with_feasible_limit(instance, fraction)


@PROPERTY_SETTINGS
@given(_limited_instances(), st.sampled_from(["makespan", "span"]))
def test_never_worse_than_any_fitting_heuristic(instance: Instance, objective: str) -> None:
    result = solve(instance, objective, time_limit=1.0, workers=1, seed=0)
    assert result.status in ("optimal", "feasible"), outcome_text(result)
    assert not validate(result.schedule)
    assert compute_metrics(result.schedule).objective(objective) == result.value
    assert result.bound <= result.value
    for heuristic in all_heuristics():
        try:
            schedule = run_heuristic(heuristic.name, instance)
        except PipesatError:
            continue
        if validate(schedule):
            continue  # does not fit the limit
        if objective == "span":
            schedule = retime_for_span(schedule)
        assert result.value <= compute_metrics(schedule).objective(objective) + 1e-9, heuristic.name


def test_result_names_the_best_handwritten_schedule_even_when_starting_elsewhere() -> None:
    instance = Instance.from_dict(
        {"num_devices": 4, "num_microbatches": 8, "weight_times": 1, "backward_times": 1, "memory_limit": "0.5x"}
    )
    result = solve(instance, time_limit=10, workers=1, seed=0)
    zb_auto = compute_metrics(run_heuristic("zb-auto", instance)).makespan
    assert result.best_heuristic == NamedValue("zb-auto", zb_auto)
    assert result.value < zb_auto
    assert not validate(result.schedule)


@pytest.mark.parametrize(
    ("times", "options"),
    [
        ({"forward_times": 1, "backward_times": 1, "weight_times": 1}, {"minimize": "memory", "makespan_cap": 31}),
        ({"forward_times": 2, "backward_times": 3, "weight_times": 1, "p2p_time": 1, "memory_limit": "1x"}, {}),
    ],
)
def test_the_best_heuristic_is_reported_as_pipesat_schedule_makes_it(times: dict, options: dict) -> None:
    # Both once named "1F1B" for a variant with W split out (4 for a 1F1B peak of 4; 74 for 1F1B's 82).
    instance = make_instance(4, 8, **times)
    result = solve(instance, **options, **FAST)
    best = result.best_heuristic
    assert best is not None and best.name != "1f1b"
    schedule = assert_valid(run_heuristic(best.name, instance))
    metrics = compute_metrics(schedule)
    assert best.value == (metrics.max_peak_memory if "minimize" in options else metrics.makespan)


def _dying_child(*_: object) -> None:
    """A CP-SAT child that dies at once, as a crash in CP-SAT's C++ would end it."""
    os._exit(3)


def test_a_crashed_search_keeps_the_best_start_and_says_how_cpsat_ended(
    hard_instance: Instance, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(child_module, "_child", _dying_child)
    result = solve(hard_instance, **FAST)
    assert result.status == "feasible" and result.stopped_by == StopReason.CRASH
    assert result.reason == "the CP-SAT process exited with code 3 before its result"
    assert result.starting_point is not None and result.value == result.starting_point.value
    assert dict(summary_fields(result))["status"] == f"feasible ({result.reason})"


def test_expert_cpsat_parameters_are_checked_first_and_applied(
    hard_instance: Instance, caplog: pytest.LogCaptureFixture
) -> None:
    with pytest.raises(OptionError, match="num_workers"):
        solve(hard_instance, cpsat_params={"num_workers": "-1"}, **FAST)
    with pytest.raises(OptionError, match="no parameter 'linearisation_level'; did you mean linearization_level"):
        solve(hard_instance, cpsat_params={"linearisation_level": "2"}, **FAST)
    caplog.set_level(logging.DEBUG, logger="pipesat")
    result = solve(hard_instance, time_limit=2.0, workers=1, cpsat_params={"linearization_level": "2"})
    assert_valid(result.schedule)
    parameters = [line for line in caplog.messages if line.startswith("Parameters:")]
    assert parameters and "linearization_level: 2" in parameters[0]


def _v_with_room() -> Instance:
    """A V-shape whose bound from stage 0's device leaves room, so that every phase may run (36 ops)."""
    times = {"weight_times": 1, "backward_times": [3, 1, 1, 1]}
    return make_instance(2, 6, chunks=2, placement="vshape", **times, memory_limit="0.75x")


def test_the_log_says_what_the_solve_decided(caplog: pytest.LogCaptureFixture) -> None:
    tuning = Tuning(proof_small_ops=0)  # the phases on a model small enough for a test
    caplog.set_level(logging.INFO, logger="pipesat")
    solve(_v_with_room(), objective="span", tuning=tuning, **FAST)
    log = "\n".join(caplog.messages)
    for decision in (
        "lower bound on the max span: ",
        "tuning: proof_small_ops=0",
        "start zb-v: does not fit",
        "best start: ",
        "span solve, phase 0: a bound from stage 0's device",
        "CP-SAT searches from ",
        "search stopped (",
    ):
        assert decision in log
    assert "phase 1" not in log  # no makespan phase on a V
    assert not any(line.startswith("CpSolverResponse") for line in caplog.messages)  # CP-SAT's log is DEBUG

    caplog.clear()
    interleaved = _v_with_room().with_changes(placement="interleaved")
    result = solve(interleaved, objective="span", tuning=tuning, **FAST)
    log = "\n".join(caplog.messages)
    assert "span solve, phase 1: the makespan for " in log
    assert "span solve, phase 2: the max span, from " in log or "no phase 2: cp-sat (makespan) meets" in log
    assert result.value == compute_metrics(assert_valid(result.schedule)).max_span


def test_a_small_span_solve_searches_the_span_from_the_start(caplog: pytest.LogCaptureFixture) -> None:
    # That V-shape at its own size (36 ops): the span's search, which runs the proof portfolio
    # on a model this small, gets the whole time; no phase 0 or makespan phase takes a share of it.
    caplog.set_level(logging.INFO, logger="pipesat")
    result = solve(_v_with_room(), objective="span", **FAST)
    log = "\n".join(caplog.messages)
    assert "CP-SAT searches from " in log and "span solve, phase" not in log
    assert result.status == "optimal" and result.value == result.bound
    assert result.value == compute_metrics(assert_valid(result.schedule)).max_span


def test_a_fused_span_solve_is_the_makespan_solve(caplog: pytest.LogCaptureFixture) -> None:
    # One route, B and W fused: every schedule's max span is its makespan, so the makespan's search and
    # proof are the span's, with the whole time (a V-shape under a tight limit, fused).
    instance = two_chunk_instance("vshape").with_changes(memory_limit=1.5)
    caplog.set_level(logging.INFO, logger="pipesat")
    span = solve(instance, "span", **FAST)
    log = "\n".join(caplog.messages)
    assert "the makespan solve is the solve" in log and "phase 2" not in log
    makespan = solve(instance, "makespan", **FAST)
    assert span.status == makespan.status == "optimal" and span.objective == Objective.SPAN
    assert span.value == makespan.value == span.bound == brute_force_optimum(instance, False, "span")
    metrics = compute_metrics(assert_valid(span.schedule))
    assert metrics.max_span == metrics.makespan == span.value


@pytest.mark.parametrize(("limit", "symmetry_breaking"), [(None, True), (None, False), (3.5, True)])
@pytest.mark.parametrize("objective", ["makespan", "span"])
def test_overlapped_pairs_are_chosen_and_proven_against_brute_force(
    objective: str, limit: float | None, symmetry_breaking: bool
) -> None:
    """On an interleaved two-chunk instance with all-to-alls, pairs save time: CP-SAT proves the optimum
    over every schedule with pairs, below the best without them (also under a memory limit)."""
    times = {"forward_times": [2, 2.5, 2, 2], "backward_times": [3, 2.5, 3, 3.5], "p2p_time": 0.5}
    plain = make_instance(2, 2, chunks=2, placement="interleaved", **times, memory_limit=limit)
    moe = plain.with_changes(forward_comm_times=[1, 1.5, 1, 1], backward_comm_times=[2, 1, 2, 2.5])
    result = solve(moe, objective, symmetry_breaking=symmetry_breaking, **FAST)
    assert result.status == "optimal", outcome_text(result)
    assert result.value == brute_force_optimum(moe, False, objective)
    assert result.value < brute_force_optimum(plain, False, objective)
    schedule = assert_valid(result.schedule)
    assert schedule.has_pairs and compute_metrics(schedule).objective(objective) == result.value


@pytest.mark.parametrize("communication", [False, True])
@pytest.mark.parametrize("limit", [None, 4.5])
@pytest.mark.parametrize("symmetry_breaking", [True, False])
@pytest.mark.parametrize("objective", ["makespan", "span"])
def test_a_bidirectional_placement_is_proven_against_brute_force(
    objective: str, symmetry_breaking: bool, limit: float | None, communication: bool
) -> None:
    """DualPipe's placement, one microbatch each way: CP-SAT's optimum is brute force's, over every
    schedule of the two copies (with pairs across the ways when the ops communicate), and its bound holds."""
    comm = {"forward_comm_times": [1, 1.5], "backward_comm_times": [2, 1]} if communication else {}
    times = {"forward_times": [2, 2.5], "backward_times": [3, 2.5], "p2p_time": 0.5, "activation_memory": [2, 3]}
    instance = make_instance(2, 2, chunks=2, placement="bidirectional", **times, **comm, memory_limit=limit)
    result = solve(instance, objective, symmetry_breaking=symmetry_breaking, **FAST)
    assert result.status == "optimal", outcome_text(result)
    optimum = brute_force_optimum(instance, False, objective)
    assert result.value == optimum and lower_bound(instance, objective) <= optimum
    schedule = assert_valid(result.schedule)
    assert compute_metrics(schedule).objective(objective) == result.value


def test_the_least_memory_with_pairs_is_valid_and_within_the_bounds() -> None:
    moe = make_instance(2, 4, chunks=2, placement="vshape", forward_comm_times=0.3, backward_comm_times=0.5)
    result = solve(moe, "makespan", minimize="memory", makespan_cap=30, **FAST)
    assert result.status == "optimal", outcome_text(result)
    assert_valid(result.schedule)
    assert compute_metrics(result.schedule).max_peak_memory == result.value and result.bound == result.value


def test_a_solve_with_pairs_starts_from_dualpipev_and_never_does_worse() -> None:
    moe = make_instance(
        3, 6, chunks=2, placement="vshape", weight_times=1, forward_comm_times=0.45, backward_comm_times=0.45
    )
    start = compute_metrics(assert_valid(run_heuristic("dualpipe-v", moe))).makespan
    result = solve(moe, "makespan", **(FAST | {"time_limit": 3.0}))
    assert result.value <= start and result.bound <= result.value
    assert_valid(result.schedule)


def test_a_tuning_reaches_a_spawned_search_child(
    hard_instance: Instance, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where the platform cannot fork, the search's child is spawned and imports pipesat afresh, so a
    setting read from module state would be the default there. The child's own CP-SAT log (relayed
    to the parent) says the parameters it ran: on two workers, a model of at most
    `proof_small_ops` ops (144 here) runs the bound search as a second full search, a larger one as
    a third thread."""
    monkeypatch.setattr(multiprocessing, "get_all_start_methods", lambda: ["spawn"])
    caplog.set_level(logging.DEBUG, logger="pipesat")
    try:
        for tuning, portfolio in ((Tuning(), "num_full_subsolvers: 2"), (Tuning(proof_small_ops=0), "num_workers: 3")):
            caplog.clear()
            result = solve(hard_instance, "span", time_limit=4.0, workers=2, tuning=tuning)
            assert result.tuning == tuning and result.schedule is not None
            assert result.schedule.source["tuning"] == tuning.as_dict()
            assert_valid(result.schedule)
            relayed = [record.getMessage() for record in caplog.records if record.name == child_module.LOG.name]
            searched = [line for line in relayed if line.startswith("Parameters:") and "objective_lb_search" in line]
            assert searched and all(portfolio in line for line in searched), (tuning, searched)
    finally:
        # Spawning starts multiprocessing's resource tracker, a child of this process for its life;
        # the tests that count this process's children expect none.
        resource_tracker._resource_tracker._stop()  # type: ignore[attr-defined]
