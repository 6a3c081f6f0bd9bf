"""The CP-SAT run: parameters, the solution callback, the watchdog that stops it, and the read-back.

The search gets what is left of the wall budget after building the model, less a reserve for
reading its solution back; a watchdog stops it at that deadline, since CP-SAT itself can run far
past its time limit while loading and presolving a model of thousands of ops. Ctrl-C stops it
gracefully: it runs in a worker thread while the main thread waits.
"""

from __future__ import annotations

import math
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from ortools.sat.python import cp_model

from models import OpKey
from solver.cpsat.model import PipelineModel, orders_from_starts

# CP-SAT can take seconds to stop once told to (measured up to 20 s on a 12,288-op model, where a
# worker was still loading its LP): the search is left to finish in the background after STOP_GRACE
# seconds, and its best solution so far is used. Kept back from the search: that grace and, per op
# of the model, the time to read back, re-time and validate a schedule (about 20 microseconds an op),
# at most RESERVE_SHARE of what is left. The least time a search gets.
STOP_GRACE = 0.5
FINISH_SECONDS_PER_OP = 3e-5
RESERVE_SHARE = 0.1
MIN_SEARCH_SECONDS = 0.05

Progress = Callable[[float, float | None, float | None], None]
"""`progress(elapsed seconds, best value, best bound)`, called as the search finds them."""


@dataclass(frozen=True)
class SearchOptions:
    """The search's settings; `deadline` is the `time.monotonic()` by which the solve returns.

    `deterministic` makes the time limit CP-SAT's deterministic time (wall clock stops it only at
    ten times that) with several workers interleaved; `gap` stops it at that relative gap.
    """

    workers: int
    seed: int
    deterministic: bool
    gap: float
    deadline: float


@dataclass(frozen=True)
class SearchOutcome:
    """What a search found: the best solution's per-device op orders (None when it found none) and
    when (seconds since the solve's clock), the proven bound in instance units, whether CP-SAT
    proved the model infeasible, and whether Ctrl-C (or the progress callback) interrupted it.
    `tick_optimum` is the minimised variable's optimum in ticks when CP-SAT proved one."""

    orders: list[list[OpKey]] | None
    found_at: float | None
    first_at: float | None
    bound: float
    infeasible: bool
    interrupted: bool
    tick_optimum: int | None = None


def search(
    model: PipelineModel,
    options: SearchOptions,
    clock: float,
    bound: float,
    start_value: float | None,
    progress: Progress | None,
) -> SearchOutcome:
    """Run CP-SAT on the (warm-started) `model` until `options.deadline` less the reserve.

    `bound` is the analytic lower bound (instance units), which every reported bound is at least;
    `start_value` the hinted schedule's value, the best value reported until CP-SAT finds one.
    """
    per_unit = model.data.ticks_per_unit

    def to_bound(ticks: float) -> float:
        return max(bound, model.data.proven_bound(ticks))

    recorder = _Recorder(model, clock, lambda ticks: ticks / per_unit, progress, to_bound, start_value)
    solver = cp_model.CpSolver()
    recorder.stop = solver.stop_search
    seconds = _set_parameters(solver, options, len(model.data.keys))
    solver.best_bound_callback = recorder.on_bound
    status, interrupted = run_with_watchdog(solver, model.cp_model, recorder, seconds)
    recorder.closed = True  # a search left to stop in the background reports nothing more
    if recorder.error is not None:
        raise recorder.error
    proven = bound
    if status is None:  # still stopping: the bound it last reported
        proven = bound if recorder.best_bound is None else recorder.best_bound
    elif status in (cp_model.OPTIMAL, cp_model.FEASIBLE) or (
        status == cp_model.UNKNOWN and math.isfinite(solver.best_objective_bound)
    ):
        proven = to_bound(solver.best_objective_bound)
    orders = None
    if recorder.starts is not None:
        orders = orders_from_starts(model.data.instance, recorder.starts, model.data.durations)
    return SearchOutcome(
        orders=orders,
        found_at=recorder.found_at,
        first_at=recorder.first_at,
        bound=proven,
        infeasible=status == cp_model.INFEASIBLE,
        interrupted=interrupted or recorder.interrupted,
        tick_optimum=round(solver.objective_value) if status == cp_model.OPTIMAL else None,
    )


def _set_parameters(solver: cp_model.CpSolver, options: SearchOptions, num_ops: int) -> float:
    """Set the search's parameters; returns the wall seconds the watchdog allows it."""
    params = solver.parameters
    params.num_workers = options.workers
    params.random_seed = options.seed
    # CP-SAT's relative gap is (value - bound) / value; pipesat's gap is (value - bound) / bound.
    params.relative_gap_limit = options.gap / (1 + options.gap)
    params.catch_sigint_signal = False
    left = options.deadline - time.monotonic()
    reserve = min(STOP_GRACE + FINISH_SECONDS_PER_OP * num_ops, RESERVE_SHARE * left)
    remaining = max(left - reserve, MIN_SEARCH_SECONDS)
    if options.deterministic:
        params.max_deterministic_time = remaining
        params.max_time_in_seconds = 10 * remaining
        params.interleave_search = options.workers > 1
    else:
        params.max_time_in_seconds = remaining
    return params.max_time_in_seconds


class _Recorder(cp_model.CpSolverSolutionCallback):
    """Keeps the latest (best) solution's starts and reports progress."""

    def __init__(
        self,
        model: PipelineModel,
        clock: float,
        to_value: Callable[[float], float],
        progress: Progress | None,
        bound: Callable[[float], float],
        start_value: float | None,
    ) -> None:
        super().__init__()
        self.model = model
        self.clock = clock
        self.to_value = to_value
        self.to_bound = bound
        self.progress = progress
        # The best value so far (the model's, in instance units) and bound, for progress reports.
        self.best_value = start_value
        self.best_bound: float | None = None
        self.starts: dict[OpKey, int] | None = None
        self.found_at: float | None = None
        self.first_at: float | None = None
        self.interrupted = False
        self.closed = False
        self.error: BaseException | None = None
        # Set once the solver exists: the solver's own stop works from every callback.
        self.stop: Callable[[], None] = lambda: None

    def on_solution_callback(self) -> None:
        if self.closed:
            return
        now = time.monotonic() - self.clock
        self.starts = {key: self.value(var) for key, var in self.model.variables.starts.items()}
        self.found_at = now
        if self.first_at is None:
            self.first_at = now
        self.best_value = self.to_value(self.objective_value)
        self.report(bound=self.to_bound(self.best_objective_bound))

    def on_bound(self, ticks: float) -> None:
        if not self.closed:
            self.report(bound=self.to_bound(ticks))

    def report(self, bound: float) -> None:
        self.best_bound = bound if self.best_bound is None else max(self.best_bound, bound)
        if self.progress is None:
            return
        try:
            self.progress(time.monotonic() - self.clock, self.best_value, self.best_bound)
        except KeyboardInterrupt:
            self.interrupted = True
            self.stop()
        except Exception as error:  # re-raised after the search stops
            self.error = error
            self.stop()


def run_with_watchdog(
    solver: cp_model.CpSolver, model: cp_model.CpModel, recorder: _Recorder | None, seconds: float
) -> tuple[int | None, bool]:
    """Solve in a worker thread so that Ctrl-C in the main thread stops the search gracefully, and
    stop it after `seconds` of wall time whatever phase CP-SAT is in. Returns the status and whether
    Ctrl-C stopped it. The status is None when the search has not stopped STOP_GRACE seconds later:
    it finishes in the background, and the recorder holds its best solution so far.

    The main thread waits on an event rather than `Thread.join`: a join interrupted by Ctrl-C can
    report the thread finished while it still runs (CPython before 3.13).
    """
    outcome: dict[str, object] = {}
    done = threading.Event()

    def work() -> None:
        try:
            outcome["status"] = solver.solve(model, recorder)
        except BaseException as error:  # surfaced in the calling thread
            outcome["error"] = error
        finally:
            done.set()

    if (
        threading.current_thread() is threading.main_thread()
        and signal.getsignal(signal.SIGINT) is signal.default_int_handler
    ):
        # A CP-SAT solve elsewhere in this process that caught SIGINT itself may have left the
        # operating system's handler replaced; re-installing Python's makes Ctrl-C reach us.
        signal.signal(signal.SIGINT, signal.default_int_handler)
    threading.Thread(target=work, name="cp-sat", daemon=True).start()
    deadline = time.monotonic() + seconds
    interrupted = False
    try:
        while not done.wait(0.05):
            if time.monotonic() >= deadline:
                solver.stop_search()
                if not done.wait(STOP_GRACE):
                    return None, False
                break
    except KeyboardInterrupt:
        interrupted = True
        solver.stop_search()
        done.wait()
    if "error" in outcome:
        raise outcome["error"]  # type: ignore[misc]
    return int(outcome["status"]), interrupted  # type: ignore[call-overload]
