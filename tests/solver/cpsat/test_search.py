"""The CP-SAT run: the read-back, the proven bound, infeasibility, and the watchdog."""

from __future__ import annotations

import time

from ortools.sat.python import cp_model

from models import Instance
from solver.cpsat.model import build_model
from solver.cpsat.search import STOP_GRACE, SearchOptions, run_with_watchdog, search
from solver.cpsat.warm_start import warm_start
from solver.evaluate.bounds import lower_bound
from solver.evaluate.metrics import compute_metrics
from solver.evaluate.simulator import simulate
from tests.strategies import assert_valid

INSTANCE = Instance.from_dict({"num_devices": 3, "num_microbatches": 4, "weight_times": 1, "memory_limit": "1x"})


def _options(seconds: float = 10.0) -> SearchOptions:
    return SearchOptions(workers=1, seed=0, deterministic=False, gap=0.0, deadline=time.monotonic() + seconds)


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


class _SlowToStop:
    """A solver that ignores `stop_search` for a while, as CP-SAT can while loading a large model."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.stopped = False

    def solve(self, model: object, callback: object) -> int:
        time.sleep(self.seconds)
        return 0

    def stop_search(self) -> None:
        self.stopped = True


def test_a_search_slow_to_stop_is_left_behind_at_the_deadline() -> None:
    solver = _SlowToStop(seconds=STOP_GRACE + 10.0)
    started = time.monotonic()
    status, interrupted = run_with_watchdog(solver, None, None, seconds=0.2)  # type: ignore[arg-type]
    assert solver.stopped and status is None and not interrupted
    assert time.monotonic() - started < 0.2 + STOP_GRACE + 5.0  # generous: a busy machine


def test_a_finished_search_reports_its_status() -> None:
    model = build_model(INSTANCE, split_backward=True)
    solver = cp_model.CpSolver()
    solver.parameters.catch_sigint_signal = False  # CP-SAT's handler would replace Python's Ctrl-C
    status, interrupted = run_with_watchdog(solver, model.cp_model, None, seconds=10)
    assert status == cp_model.OPTIMAL and not interrupted
