"""The CP-SAT run: the read-back, the proven bound, infeasibility, the watchdog, and why a search stopped."""

from __future__ import annotations

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

from pipesat.models import Instance, load_instance
from pipesat.models.solve_result import StopReason
from pipesat.solver.cpsat import child as child_module
from pipesat.solver.cpsat.child import STOP_GRACE, Ended, Finished, Solution, run_search
from pipesat.solver.cpsat.data import model_data
from pipesat.solver.cpsat.model import build_model
from pipesat.solver.cpsat.search import _why_stopped, search
from pipesat.solver.cpsat.search_parameters import SearchOptions, search_parameters
from pipesat.solver.cpsat.warm_start import warm_start
from pipesat.solver.evaluate.bounds import lower_bound
from pipesat.solver.evaluate.metrics import compute_metrics
from pipesat.solver.evaluate.simulator import simulate
from pipesat.solver.solve import solve
from tests.conftest import INSTANCES_DIR
from tests.strategies import assert_valid

INSTANCE = Instance.from_dict({"num_devices": 3, "num_microbatches": 4, "weight_times": 1, "memory_limit": "1x"})


def _options(seconds: float = 10.0) -> SearchOptions:
    return SearchOptions(
        workers=1, seed=0, deterministic=False, gap=0.0, deadline=time.monotonic() + seconds, time_limit=seconds
    )


def test_search_reads_back_an_optimal_order_with_its_proof() -> None:
    model = build_model(model_data(INSTANCE, split_backward=True))
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
    model = build_model(model_data(INSTANCE, split_backward=True, minimize_memory=True, time_cap=1))
    outcome = search(model, _options(), time.monotonic(), 0.0, None, None)
    assert outcome.infeasible and outcome.orders is None


def _deaf_child(*_: object) -> None:
    """A child that ignores the request to stop, as CP-SAT can while it loads a large model."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    time.sleep(60)


def test_a_child_deaf_to_the_stop_is_killed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(child_module, "_child", _deaf_child)
    model = build_model(model_data(INSTANCE, split_backward=True))
    started = time.monotonic()
    ended = run_search(model.cp_model, "", [], 0.2, lambda message: None)
    assert ended.finished is None and not ended.interrupted and ended.deadline
    assert ended.how_ended == f"did not stop within {STOP_GRACE:g} s of being asked and was killed"
    assert time.monotonic() - started < 0.2 + STOP_GRACE + 5.0  # generous: a busy machine
    assert multiprocessing.active_children() == []


def test_a_finished_search_reports_its_status_and_leaves_no_process() -> None:
    model = build_model(model_data(INSTANCE, split_backward=True))
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
    model = build_model(model_data(hard_instance, split_backward=True))
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


def test_the_search_loop_polls_the_progress_while_it_waits() -> None:
    model = build_model(model_data(INSTANCE, split_backward=True))
    polls: list[None] = []
    ended = run_search(model.cp_model, "num_workers: 1", [], 10, lambda message: None, lambda: polls.append(None))
    assert ended.finished is not None and polls


def test_ctrl_c_in_a_progress_refresh_stops_the_search(hard_instance: Instance) -> None:
    model = build_model(model_data(hard_instance, split_backward=True))

    def interrupt() -> None:
        raise KeyboardInterrupt

    ended = run_search(model.cp_model, "num_workers: 2", [], 30, lambda message: None, interrupt)
    assert ended.interrupted
    assert multiprocessing.active_children() == []


def test_a_search_is_stopped_when_stop_when_says_so(hard_instance: Instance) -> None:
    model = build_model(model_data(hard_instance, split_backward=True))
    started = time.monotonic()
    ended = run_search(model.cp_model, "num_workers: 2", [], 30, lambda message: None, None, lambda: True)
    assert ended.stopped_early and not ended.deadline and not ended.interrupted
    assert time.monotonic() - started < 30  # generous: stopped long before its 30 s
    assert multiprocessing.active_children() == []


def test_cpsat_log_is_relayed_to_the_log_only_when_wanted(caplog: pytest.LogCaptureFixture) -> None:
    text, _ = search_parameters(_options(), 10)
    assert not text_format.Parse(text, sat_parameters_pb2.SatParameters()).log_search_progress
    caplog.set_level(logging.DEBUG, logger="pipesat")
    model = build_model(model_data(INSTANCE, split_backward=True))
    outcome = search(model, _options(), time.monotonic(), 0.0, None, None)
    relayed = [record.getMessage() for record in caplog.records if record.name == child_module.LOG.name]
    assert any(line.startswith("CpSolverResponse") for line in relayed)
    assert outcome.stopped_by == StopReason.PROOF and outcome.reason == "proven by CP-SAT"
    assert "search stopped (proof): proven by CP-SAT" in caplog.messages


def test_a_model_cpsat_refuses_says_why() -> None:
    model = build_model(model_data(INSTANCE, split_backward=True))
    model.cp_model.new_int_var(5, 2, "broken")
    outcome = search(model, _options(), time.monotonic(), 0.0, None, None)
    assert outcome.stopped_by == StopReason.MODEL_INVALID and outcome.orders is None
    assert outcome.reason.startswith("CP-SAT refused the model: var #") and "has no domain" in outcome.reason


def test_a_child_killed_mid_search_says_how_it_ended(hard_instance: Instance) -> None:
    model = build_model(model_data(hard_instance, split_backward=True))

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
    parent = context.Process(
        target=_search_reporting_its_child, args=(build_model(model_data(INSTANCE)).cp_model, pids)
    )
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
    model = build_model(model_data(INSTANCE, split_backward=True))
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


def test_a_search_of_thousands_of_ops_stops_at_its_limit_and_keeps_its_start() -> None:
    # The 14B interleaved instance with 24 microbatches (1,728 ops) at 0.5x: before each device's tail
    # interval named the makespan, CP-SAT spent its whole search building its linear relaxation and
    # had to be killed ("did not stop within 0.5 s of being asked").
    path = INSTANCES_DIR / "tight" / "qwen14b-interleaved-p4-v6-m64.yaml"
    instance = load_instance(path, memory_limit="0.5x", num_microbatches=24)
    result = solve(instance, time_limit=3.0, workers=2, seed=0)
    assert result.schedule is not None
    assert_valid(result.schedule)
    assert result.stopped_by == StopReason.TIME_LIMIT
    assert result.reason is not None and "killed" not in result.reason
    assert result.starting_point is not None and result.value is not None
    assert result.value <= result.starting_point.value
