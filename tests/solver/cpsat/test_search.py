"""The CP-SAT run: the read-back, the proven bound, infeasibility, and the watchdog."""

from __future__ import annotations

import dataclasses
import logging
import math
import multiprocessing
import os
import signal
import time
from types import SimpleNamespace

import pytest
from google.protobuf import text_format
from ortools.sat import sat_parameters_pb2
from ortools.sat.python import cp_model

from pipesat.models import Instance, Tuning
from pipesat.models.solve_result import StopReason
from pipesat.solver.cpsat import child as child_module
from pipesat.solver.cpsat.child import STOP_GRACE, Bound, Ended, Finished, Solution, run_search
from pipesat.solver.cpsat.model import build_model
from pipesat.solver.cpsat.search import (
    PROBE_PRECEDENCE_SUBSOLVER,
    PROBE_STRONG_SUBSOLVER,
    SearchOptions,
    _parameters,
    _Record,
    _why_stopped,
    search,
)
from pipesat.solver.cpsat.warm_start import warm_start
from pipesat.solver.evaluate.bounds import lower_bound
from pipesat.solver.evaluate.metrics import compute_metrics
from pipesat.solver.evaluate.simulator import simulate
from tests.strategies import assert_valid

SMALL_OPS = Tuning().proof_small_ops
INSTANCE = Instance.from_dict({"num_devices": 3, "num_microbatches": 4, "weight_times": 1, "memory_limit": "1x"})


def _options(seconds: float = 10.0) -> SearchOptions:
    return SearchOptions(
        workers=1, seed=0, deterministic=False, gap=0.0, deadline=time.monotonic() + seconds, time_limit=seconds
    )


def test_search_reads_back_an_optimal_order_with_its_proof() -> None:
    model = build_model(INSTANCE, split_backward=True)
    warm_start(model, None)
    calls: list[tuple[float, float | None, float | None]] = []
    clock = time.monotonic()
    bound = lower_bound(INSTANCE, "makespan", True)
    outcome = search(model, _options(), clock, bound, None, lambda *args: calls.append(args))
    assert outcome.orders is not None and not outcome.infeasible and not outcome.interrupted
    value = compute_metrics(assert_valid(simulate(INSTANCE, outcome.orders))).makespan
    assert outcome.bound == value >= bound
    assert outcome.first_at is not None and outcome.found_at is not None and 0 <= outcome.first_at <= outcome.found_at
    assert calls and all(b is None or b <= value for _, _, b in calls)


def test_search_says_when_the_model_is_infeasible() -> None:
    model = build_model(INSTANCE, split_backward=True, minimize_memory=True, time_cap=1)
    outcome = search(model, _options(), time.monotonic(), 0.0, None, None)
    assert outcome.infeasible and outcome.orders is None


def _deaf_child(*_: object) -> None:
    """A child that ignores the request to stop, as CP-SAT can while it loads a large model."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    time.sleep(60)


def test_a_child_deaf_to_the_stop_is_killed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(child_module, "_child", _deaf_child)
    model = build_model(INSTANCE, split_backward=True)
    started = time.monotonic()
    ended = run_search(model.cp_model, "", [], 0.2, lambda message: None)
    assert ended.finished is None and not ended.interrupted and ended.deadline
    assert ended.how_ended == f"did not stop within {STOP_GRACE:g} s of being asked and was killed"
    assert time.monotonic() - started < 0.2 + STOP_GRACE + 5.0  # generous: a busy machine
    assert multiprocessing.active_children() == []


def test_a_finished_search_reports_its_status_and_leaves_no_process() -> None:
    model = build_model(INSTANCE, split_backward=True)
    messages: list[object] = []
    watched = list(model.variables.starts.values())
    ended = run_search(model.cp_model, "num_workers: 1", watched, 10, messages.append)
    finished = ended.finished
    assert finished is not None and finished.status == cp_model.OPTIMAL and not ended.interrupted
    assert ended.how_ended is None
    assert isinstance(messages[-1], Finished) and any(isinstance(m, Solution) for m in messages)
    assert all(len(m.values) == len(watched) for m in messages if isinstance(m, Solution))
    assert multiprocessing.active_children() == []


def test_ctrl_c_in_a_progress_report_stops_the_child_and_keeps_the_best(hard_instance: Instance) -> None:
    model = build_model(hard_instance, split_backward=True)
    warm_start(model, None)
    reports: list[float | None] = []

    def progress(elapsed: float, value: float | None, bound: float | None) -> None:
        reports.append(value)
        if value is not None:
            raise KeyboardInterrupt

    options = SearchOptions(
        workers=2, seed=0, deterministic=False, gap=0.0, deadline=time.monotonic() + 30, time_limit=30
    )
    started = time.monotonic()
    outcome = search(model, options, started, 0.0, None, progress)
    assert outcome.interrupted and outcome.orders is not None
    assert_valid(simulate(hard_instance, outcome.orders))
    assert time.monotonic() - started < 10  # far from the 30 s limit: the stop was answered
    assert multiprocessing.active_children() == []


class _FakeClock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.time = 100.0

    def __call__(self) -> float:
        return self.time


def test_progress_refreshes_every_half_second_between_news() -> None:
    clock = _FakeClock()
    reports: list[tuple[float, float | None, float | None]] = []
    record = _Record(100.0, 2, 30.0, 20.0, lambda ticks: ticks / 2, lambda *args: reports.append(args), clock)
    record.refresh()  # the first poll shows the line at once, with the analytic bound
    assert reports == [(0.0, 30.0, 20.0)]
    for elapsed in (0.1, 0.2, 0.4):
        clock.time = 100.0 + elapsed
        record.refresh()
    assert len(reports) == 1
    clock.time = 100.5
    record.refresh()
    assert reports[-1] == (0.5, 30.0, 20.0)
    clock.time = 100.7
    record.on_message(Bound(44.0))  # a better bound is news at once: 22 in instance units
    record.on_message(Bound(30.0))  # a worse one does not lower it
    assert reports[-2:] == [(pytest.approx(0.7), 30.0, 22.0)] * 2
    clock.time = 101.1
    record.refresh()
    assert len(reports) == 4
    clock.time = 101.2
    record.refresh()
    assert reports[-1] == (pytest.approx(1.2), 30.0, 22.0)
    clock.time = 103.0
    record.on_message(Solution(50.0, 46.0, [0]))
    assert reports[-1] == (3.0, 25.0, 23.0) and record.found_at == 3.0


def test_the_search_loop_polls_the_progress_while_it_waits() -> None:
    model = build_model(INSTANCE, split_backward=True)
    polls: list[None] = []
    ended = run_search(model.cp_model, "num_workers: 1", [], 10, lambda message: None, lambda: polls.append(None))
    assert ended.finished is not None and polls


def test_ctrl_c_in_a_progress_refresh_stops_the_search(hard_instance: Instance) -> None:
    model = build_model(hard_instance, split_backward=True)

    def interrupt() -> None:
        raise KeyboardInterrupt

    ended = run_search(model.cp_model, "num_workers: 2", [], 30, lambda message: None, interrupt)
    assert ended.interrupted
    assert multiprocessing.active_children() == []


def test_a_search_is_stopped_when_stop_when_says_so(hard_instance: Instance) -> None:
    model = build_model(hard_instance, split_backward=True)
    started = time.monotonic()
    ended = run_search(model.cp_model, "num_workers: 2", [], 30, lambda message: None, None, lambda: True)
    assert ended.stopped_early and not ended.deadline and not ended.interrupted
    assert time.monotonic() - started < 30  # generous: stopped long before its 30 s
    assert multiprocessing.active_children() == []


def test_a_record_stalls_when_neither_its_value_nor_its_bound_moves_near_the_bound() -> None:
    clock = SimpleNamespace(time=100.0)
    record = _Record(100.0, 1, 21.0, 20.0, lambda ticks: ticks, None, lambda: clock.time)
    stalled = record.stalled_for(5.0, 0.05)
    clock.time = 104.0
    assert not stalled()
    record.on_message(Bound(19.0))  # no higher than the bound it has: no news
    clock.time = 105.0
    assert stalled()
    record.on_message(Bound(20.5))
    assert not stalled()
    clock.time = 109.0
    record.on_message(Solution(21.0, 20.5, [0]))
    clock.time = 113.0
    assert not stalled()
    clock.time = 114.0
    assert stalled()
    far = _Record(100.0, 1, 30.0, 20.0, lambda ticks: ticks, None, lambda: clock.time)
    clock.time = 200.0
    assert not far.stalled_for(5.0, 0.05)() and far.stalled_for(5.0, 0.5)()  # 50% from its bound


def test_a_deterministic_search_spends_its_time_limit_whatever_the_wall_clock_left() -> None:
    # A busy machine that reaches the search late (here: past its deadline) must not search less.
    late = SearchOptions(workers=2, seed=0, deterministic=True, gap=0.0, deadline=time.monotonic() - 5, time_limit=3.0)
    on_time = dataclasses.replace(late, deadline=time.monotonic() + 3)
    budgets = {_parsed(options, 40).max_deterministic_time for options in (late, on_time)}
    assert len(budgets) == 1 and 2.5 < budgets.pop() <= 3.0


def test_a_phase_shares_the_time_limit_when_deterministic_and_the_wall_time_left_otherwise() -> None:
    late = SearchOptions(workers=2, seed=0, deterministic=True, gap=0.0, deadline=time.monotonic() - 5, time_limit=3.0)
    assert late.share(1 / 3).time_limit == pytest.approx(1.0)
    timed = SearchOptions(
        workers=2, seed=0, deterministic=False, gap=0.0, deadline=time.monotonic() + 30, time_limit=3.0
    ).share(0.5)
    assert 14 < timed.time_limit <= 15 and timed.deadline - time.monotonic() <= 15


def test_deterministic_time_is_capped_by_the_wall_factor() -> None:

    options = SearchOptions(
        workers=1, seed=0, deterministic=True, gap=0.0, deadline=time.monotonic() + 100, time_limit=100, wall_factor=2.0
    )
    text, seconds = _parameters(options, 10)
    params = text_format.Parse(text, sat_parameters_pb2.SatParameters())
    assert params.max_deterministic_time > 50
    assert seconds == params.max_time_in_seconds == pytest.approx(2 * params.max_deterministic_time)


def test_expert_parameters_come_after_pipesats_but_the_deadline_stays() -> None:
    expert = 'num_workers: 3\nmax_time_in_seconds: 500\nextra_subsolvers: "max_lp"\n'
    options = SearchOptions(
        workers=1,
        seed=0,
        deterministic=False,
        gap=0.0,
        deadline=time.monotonic() + 10,
        time_limit=10,
        cpsat_params=expert,
    )
    text, seconds = _parameters(options, 10)
    params = text_format.Parse(text, sat_parameters_pb2.SatParameters())
    assert params.num_workers == 3 and params.max_time_in_seconds == 500
    assert list(params.extra_subsolvers) == ["max_lp"] and seconds < 10


def _parsed(options: SearchOptions, num_ops: int = 10) -> sat_parameters_pb2.SatParameters:
    return text_format.Parse(_parameters(options, num_ops)[0], sat_parameters_pb2.SatParameters())


def test_two_workers_add_the_objective_lower_bound_search() -> None:
    deadline = time.monotonic() + 10
    small = _parsed(
        SearchOptions(workers=2, seed=0, deterministic=False, gap=0.0, deadline=deadline, time_limit=10),
        SMALL_OPS,
    )
    assert small.num_workers == 2 and small.num_full_subsolvers == 2
    assert list(small.extra_subsolvers) == ["objective_lb_search"]
    large = _parsed(
        SearchOptions(workers=2, seed=0, deterministic=False, gap=0.0, deadline=deadline, time_limit=10),
        SMALL_OPS + 1,
    )
    assert large.num_workers == 3 and not large.num_full_subsolvers
    assert list(large.extra_subsolvers) == ["objective_lb_search"]
    for options in (
        SearchOptions(workers=1, seed=0, deterministic=False, gap=0.0, deadline=deadline, time_limit=10),
        SearchOptions(workers=4, seed=0, deterministic=False, gap=0.0, deadline=deadline, time_limit=10),
    ):
        assert _parsed(options).num_workers == options.workers and not _parsed(options).extra_subsolvers
    deterministic = _parsed(
        SearchOptions(workers=2, seed=0, deterministic=True, gap=0.0, deadline=deadline, time_limit=10)
    )
    # One worker whatever the options say: CP-SAT's interleaved two-worker search is not reproducible
    # on a loaded machine.
    assert deterministic.num_workers == 1 and not deterministic.extra_subsolvers
    assert not deterministic.interleave_search


def test_a_probe_on_two_workers_runs_default_lp_and_the_precedence_search_with_and_without_strong_propagation() -> None:
    deadline = time.monotonic() + 10
    text, _ = _parameters(
        SearchOptions(workers=2, seed=0, deterministic=False, gap=0.0, deadline=deadline, time_limit=10),
        10,
        5.0,
        probe=True,
    )
    params = text_format.Parse(text, sat_parameters_pb2.SatParameters())
    # Three threads on the two cores (Tuning.strong_probes): default_lp, the search branching on precedences,
    # and the same propagating the no-overlaps strongly, for the refutations at tight values.
    assert params.num_workers == 3 and params.num_full_subsolvers == 3
    assert list(params.extra_subsolvers) == [PROBE_PRECEDENCE_SUBSOLVER, PROBE_STRONG_SUBSOLVER]
    precedences, strong = params.subsolver_params
    assert precedences.name == PROBE_PRECEDENCE_SUBSOLVER and precedences.use_dynamic_precedence_in_disjunctive
    assert not precedences.use_strong_propagation_in_disjunctive
    assert strong.name == PROBE_STRONG_SUBSOLVER and strong.use_dynamic_precedence_in_disjunctive
    assert strong.use_strong_propagation_in_disjunctive
    # default_lp stays as CP-SAT has it, and so does every search that minimises
    assert not params.use_dynamic_precedence_in_disjunctive and not params.use_strong_propagation_in_disjunctive
    assert not _parsed(
        SearchOptions(workers=2, seed=0, deterministic=False, gap=0.0, deadline=deadline, time_limit=10)
    ).use_strong_propagation_in_disjunctive
    for options in (
        SearchOptions(workers=4, seed=0, deterministic=False, gap=0.0, deadline=deadline, time_limit=10),
        SearchOptions(workers=2, seed=0, deterministic=True, gap=0.0, deadline=deadline, time_limit=10),
        SearchOptions(
            workers=2,
            seed=0,
            deterministic=False,
            gap=0.0,
            deadline=deadline,
            time_limit=10,
            cpsat_params='extra_subsolvers: "max_lp"\n',
        ),
    ):
        other = text_format.Parse(_parameters(options, 10, 5.0, probe=True)[0], sat_parameters_pb2.SatParameters())
        assert not other.subsolver_params and PROBE_PRECEDENCE_SUBSOLVER not in other.extra_subsolvers


def test_an_expert_who_chooses_subsolvers_replaces_the_proof_portfolio() -> None:
    expert = 'extra_subsolvers: "max_lp"\n'
    params = _parsed(
        SearchOptions(
            workers=2,
            seed=0,
            deterministic=False,
            gap=0.0,
            deadline=time.monotonic() + 10,
            time_limit=10,
            cpsat_params=expert,
        )
    )
    assert params.num_workers == 2 and list(params.extra_subsolvers) == ["max_lp"]
    unrelated = _parsed(
        SearchOptions(
            workers=2,
            seed=0,
            deterministic=False,
            gap=0.0,
            deadline=time.monotonic() + 10,
            time_limit=10,
            cpsat_params="linearization_level: 2\n",
        )
    )
    assert list(unrelated.extra_subsolvers) == ["objective_lb_search"] and unrelated.linearization_level == 2


def test_cpsat_log_is_relayed_to_the_log_only_when_wanted(caplog: pytest.LogCaptureFixture) -> None:
    text, _ = _parameters(_options(), 10)
    assert not text_format.Parse(text, sat_parameters_pb2.SatParameters()).log_search_progress
    caplog.set_level(logging.DEBUG, logger="pipesat")
    model = build_model(INSTANCE, split_backward=True)
    outcome = search(model, _options(), time.monotonic(), 0.0, None, None)
    relayed = [record.getMessage() for record in caplog.records if record.name == child_module.LOG.name]
    assert any(line.startswith("CpSolverResponse") for line in relayed)
    assert outcome.stopped_by == StopReason.PROOF and outcome.reason == "proven by CP-SAT"
    assert "search stopped (proof): proven by CP-SAT" in caplog.messages


def test_a_model_cpsat_refuses_says_why() -> None:
    model = build_model(INSTANCE, split_backward=True)
    model.cp_model.new_int_var(5, 2, "broken")
    outcome = search(model, _options(), time.monotonic(), 0.0, None, None)
    assert outcome.stopped_by == StopReason.MODEL_INVALID and outcome.orders is None
    assert outcome.reason.startswith("CP-SAT refused the model: var #") and "has no domain" in outcome.reason


def test_a_child_killed_mid_search_says_how_it_ended(hard_instance: Instance) -> None:
    model = build_model(hard_instance, split_backward=True)

    def kill(*_: object) -> None:
        for child in multiprocessing.active_children():
            os.kill(child.pid or 0, signal.SIGKILL)

    outcome = search(model, _options(30), time.monotonic(), 0.0, None, kill)
    assert outcome.stopped_by == StopReason.CRASH and not outcome.interrupted
    assert outcome.reason == "the CP-SAT process was killed by signal SIGKILL"
    assert multiprocessing.active_children() == []


def _search_reporting_its_child(model: cp_model.CpModel, pids: multiprocessing.SimpleQueue) -> None:  # type: ignore[type-arg]
    """A parent (as a plan's pool worker is) that searches for 30 s and says its CP-SAT child's pid."""

    def report() -> None:
        for child in multiprocessing.active_children():
            pids.put(child.pid)

    run_search(model, "num_workers: 1", [], 30, lambda message: None, report)


def test_a_search_whose_parent_is_killed_ends_too(monkeypatch: pytest.MonkeyPatch) -> None:
    """A plan kills a pool worker that does not answer a stop in time: its CP-SAT child must not outlive it,
    even in a long stretch of search with nothing to send (a send to the dead parent would end it)."""
    monkeypatch.setattr(cp_model.CpSolver, "solve", lambda *_: time.sleep(60))
    context = multiprocessing.get_context("fork")
    pids = context.SimpleQueue()
    parent = context.Process(target=_search_reporting_its_child, args=(build_model(INSTANCE).cp_model, pids))
    parent.start()
    child = pids.get()
    os.kill(parent.pid or 0, signal.SIGKILL)
    parent.join()
    started = time.monotonic()
    while _alive(child) and time.monotonic() - started < 10:
        time.sleep(0.05)
    assert not _alive(child)


def _alive(pid: int) -> bool:
    """Whether process `pid` runs (a zombie, ended but not yet reaped by init, does not)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_a_child_that_dies_says_what_it_last_wrote() -> None:
    model = build_model(INSTANCE, split_backward=True)
    beyond = SimpleNamespace(index=10**6)  # a variable the model lacks: the child raises, its traceback on stderr
    ended = run_search(model.cp_model, "num_workers: 1", [beyond], 10, lambda message: None)  # type: ignore[list-item]
    assert ended.finished is None and ended.how_ended is not None
    assert ended.how_ended.startswith("exited with code 1 before its result; it last wrote: ")
    assert ended.how_ended.endswith("out of bound index 1000000") and "\n" not in ended.how_ended


@pytest.mark.parametrize(
    ("finished", "deadline", "objective", "deterministic", "stopped_by", "words"),
    [
        (Finished(cp_model.OPTIMAL, 40.0), False, 40.0, False, StopReason.PROOF, "proven by CP-SAT"),
        (Finished(cp_model.OPTIMAL, 38.0), False, 40.0, False, StopReason.GAP, "CP-SAT reached the gap asked for, 5%"),
        (Finished(cp_model.INFEASIBLE, math.inf), False, None, False, StopReason.PROOF, "no schedule fits"),
        (Finished(cp_model.FEASIBLE, 38.0), True, 40.0, False, StopReason.TIME_LIMIT, "the time limit ran out"),
        (Finished(cp_model.UNKNOWN, 0.0), False, None, False, StopReason.TIME_LIMIT, "before CP-SAT found a schedule"),
        (Finished(cp_model.FEASIBLE, 38.0), True, 40.0, True, StopReason.WALL_CLOCK, "the wall clock ran out (10x"),
        (None, True, None, False, StopReason.TIME_LIMIT, "ran out; CP-SAT did not stop within"),
    ],
)
def test_why_a_search_stopped(
    finished: Finished | None,
    deadline: bool,
    objective: float | None,
    deterministic: bool,
    stopped_by: StopReason,
    words: str,
) -> None:
    how = None if finished is not None else f"did not stop within {STOP_GRACE:g} s of being asked and was killed"
    ended = Ended(finished, deadline=deadline, how_ended=how)
    options = SearchOptions(
        workers=1, seed=0, deterministic=deterministic, gap=0.05, deadline=time.monotonic() + 10, time_limit=10
    )
    assert _why_stopped(ended, options, objective)[0] == stopped_by
    assert words in _why_stopped(ended, options, objective)[1]
