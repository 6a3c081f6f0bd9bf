"""The solve: CP-SAT warm-started from the heuristics and bounded by the analytic lower bounds.

Steps: check the memory limit against the smallest feasible one (exact, `solver.evaluate.bounds`); time every
applicable heuristic (and any extra starting schedules) on the instance, keep those that fit the limit;
when the best leaves room to the lower bound, add the best periodic schedule (`solver.heuristics.periodic`, a
tenth of the time at most); if the best meets the bound it is optimal and no search runs (among
equal values the lower peak memory wins). Otherwise build the CP-SAT model, give it the best one as a
complete hint, put [lower bound, its value] into the objective's domain, and search until the
deadline: a watchdog stops CP-SAT there, so the wall time, heuristics and model building included,
honours the time limit. The model's best per-device order is re-timed at the instance's exact float times (the
simulator for the makespan, `retime` for the max span) and validated; the value comes from
`solver.evaluate.metrics`. The result is never worse than the best starting schedule: when the search does not
beat it, that schedule is returned with the search's bound. A max-span solve first runs a shorter
makespan solve and starts from its order too. The smallest feasible memory limit is known exactly
(`minimum_memory_limit`), so an impossible limit is reported without a search.
"""

from __future__ import annotations

import dataclasses
import math
import signal
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ortools.sat.python import cp_model

from models import Instance, InstanceError, OpKey, PipesatError, Schedule
from solver.cpsat.model import PipelineModel, orders_from_starts
from solver.evaluate.bounds import lower_bound, minimum_memory_limit, resolve_split
from solver.evaluate.metrics import OBJECTIVES, compute_metrics, relative_gap
from solver.evaluate.retime import min_span_schedule
from solver.evaluate.simulator import simulate
from solver.evaluate.validator import RELATIVE_TOLERANCE, validate
from solver.heuristics import all_heuristics, run_heuristic
from solver.heuristics.one_at_a_time import NAME as ONE_AT_A_TIME
from solver.heuristics.one_at_a_time import one_at_a_time_orders
from solver.heuristics.periodic import NAME as PERIODIC
from solver.heuristics.periodic import periodic_schedule

MINIMIZE = ("time", "memory")
STATUSES = ("optimal", "feasible", "infeasible", "unknown", "interrupted")
# Share of the time limit that a max-span solve first spends on the makespan (see `solve`).
MAKESPAN_PHASE = 1 / 3
# CP-SAT can take seconds to stop once told to (measured up to 20 s on a 12,288-op model, where a
# worker was still loading its LP): the search is left to finish in the background after STOP_GRACE
# seconds, and its best solution so far is used. Kept back from the search: that grace and, per op
# of the model, the time to read back, re-time and validate a schedule (about 20 microseconds an op),
# at most RESERVE_SHARE of what is left. The least time a search gets.
STOP_GRACE = 0.5
FINISH_SECONDS_PER_OP = 3e-5
RESERVE_SHARE = 0.1
# Share of the remaining time the periodic starting schedules may take when the heuristics leave room.
PERIODIC_SHARE = 0.1
MIN_SEARCH_SECONDS = 0.05

Progress = Callable[[float, float | None, float | None], None]
"""`progress(elapsed seconds, best value, best bound)`, called as the search finds them."""


@dataclass(frozen=True, kw_only=True)
class SolveResult:
    """What a solve found and proved.

    `value` is the schedule's objective (makespan, max span or peak memory) by `solver.evaluate.metrics`;
    `bound` a proven lower bound on it; `gap = (value - bound) / value`. Times are seconds since
    `solve` was called: `time_to_first` until a schedule was in hand (the starting heuristic or
    CP-SAT's first solution), `time_to_best` until the returned one was. `improvement` is the
    fraction by which the result beats `start_value`, the best starting schedule's value.
    """

    status: str
    objective: str
    schedule: Schedule | None = None
    value: float | None = None
    bound: float | None = None
    gap: float | None = None
    solve_time: float
    time_to_first: float | None = None
    time_to_best: float | None = None
    start_heuristic: str | None = None
    start_value: float | None = None
    improvement: float | None = None
    smallest_feasible_limit: float | None = None
    message: str
    # The best handwritten schedule that fits (or a given start) and its value: what a user compares
    # the result with. The search may have started from a better one (the periodic start).
    best_heuristic: str | None = None
    best_heuristic_value: float | None = None


@dataclass(frozen=True)
class _Start:
    """A valid schedule the search can start from, with its objective value."""

    name: str
    schedule: Schedule
    value: float
    peak: float
    found_at: float


@dataclass(frozen=True)
class _Problem:
    """One solve's settings, resolved."""

    instance: Instance
    objective: str  # the time objective: "makespan" or "span"
    minimize: str  # "time" or "memory"
    split: bool
    time_cap: float | None
    symmetry_breaking: bool

    @property
    def result_objective(self) -> str:
        return "memory" if self.minimize == "memory" else self.objective

    def timed(self, orders: Sequence[Sequence[OpKey]], instance: Instance | None = None, name: str = "") -> Schedule:
        """The orders timed at exact floats: as soon as possible, or for the least max span."""
        target = instance or self.instance
        if self.objective == "span":
            return min_span_schedule(target, orders, name)
        return simulate(target, orders, name)

    def start(self, name: str, schedule: Schedule, found_at: float) -> _Start | None:
        """`schedule` as a start with its value and peak, or None unless it is valid (memory limit
        included) and within the time cap."""
        if validate(schedule):
            return None
        metrics = compute_metrics(schedule)
        time_value = metrics.objective(self.objective)
        if self.time_cap is not None and time_value > self.time_cap * (1 + RELATIVE_TOLERANCE):
            return None
        value = metrics.max_peak_memory if self.minimize == "memory" else time_value
        return _Start(name, schedule, value, metrics.max_peak_memory, found_at)


def solve(
    instance: Instance,
    objective: str = "makespan",
    minimize: str = "time",
    time_limit: float = 10.0,
    workers: int = 1,
    seed: int = 0,
    deterministic: bool = False,
    gap: float = 0.0,
    symmetry_breaking: bool = True,
    split_backward: bool | None = None,
    makespan_cap: float | None = None,
    progress: Progress | None = None,
    starts: Sequence[Schedule] = (),
) -> SolveResult:
    """The best schedule CP-SAT finds within `time_limit` seconds, with its proof.

    `objective` is "makespan" or "span" (max span). `minimize="memory"` minimises the peak memory
    instead, ignoring the instance's memory limit, with the time objective capped at `makespan_cap`
    when given. `split_backward` None schedules W apart exactly when the instance has weight times.
    `deterministic` makes repeated runs give the same result: the time limit becomes CP-SAT's
    deterministic time (wall clock stops it only at ten times the limit) and several workers
    interleave. `gap` stops the search at that relative gap. `starts` are extra starting schedules
    (for instance the previous point of a Pareto sweep). A max-span solve first spends a third of
    the time limit on the makespan, whose model CP-SAT searches far better, and starts from that
    order re-timed for the span when it is the best start.
    """
    clock = time.monotonic()
    _check_options(objective, minimize, time_limit, workers, gap, makespan_cap)
    split = resolve_split(instance, split_backward)
    if minimize == "memory":
        instance = dataclasses.replace(instance, memory_limit=None)
    problem = _Problem(instance, objective, minimize, split, makespan_cap, symmetry_breaking)
    options = _Options(workers, seed, deterministic, gap, clock + time_limit)
    return _solve(problem, options, clock, progress, starts)


@dataclass(frozen=True)
class _Options:
    """The search's settings; `deadline` is the `time.monotonic()` by which the solve returns."""

    workers: int
    seed: int
    deterministic: bool
    gap: float
    deadline: float


def _solve(
    problem: _Problem,
    options: _Options,
    clock: float,
    progress: Progress | None,
    starts: Sequence[Schedule],
    heuristics: Sequence[tuple[str, Schedule]] | None = None,
) -> SolveResult:
    """`solve` with its settings resolved; `heuristics` are the heuristics' schedules when known."""
    instance, objective = problem.instance, problem.objective
    smallest = minimum_memory_limit(instance)
    limit = instance.memory_limit
    if limit is not None and smallest > limit * (1 + RELATIVE_TOLERANCE) + RELATIVE_TOLERANCE:
        message = f"infeasible: memory limit {limit:g} is too small; the smallest feasible limit is {smallest:g}"
        return _empty(problem, "infeasible", clock, message, smallest_feasible_limit=smallest)

    bound = lower_bound(instance, problem.result_objective, problem.split)
    if problem.time_cap is not None:
        time_bound = lower_bound(instance, objective, problem.split)
        if time_bound > problem.time_cap * (1 + RELATIVE_TOLERANCE):
            message = (
                f"infeasible: no schedule has a {objective} within {problem.time_cap:g}; "
                f"the lower bound is {time_bound:g}"
            )
            return _empty(problem, "infeasible", clock, message)

    if heuristics is None:
        heuristics = heuristic_schedules(instance)
    candidates = _starting_points(problem, [*heuristics, *_named(starts)], clock)
    handwritten = _preferred(candidates)
    result = _improve(problem, options, clock, progress, starts, heuristics, candidates, handwritten, bound)
    if handwritten is None:
        return result
    return dataclasses.replace(result, best_heuristic=handwritten.name, best_heuristic_value=handwritten.value)


def _improve(
    problem: _Problem,
    options: _Options,
    clock: float,
    progress: Progress | None,
    starts: Sequence[Schedule],
    heuristics: Sequence[tuple[str, Schedule]],
    candidates: list[_Start],
    handwritten: _Start | None,
    bound: float,
) -> SolveResult:
    """From the best fitting start (`handwritten`, the best of `candidates`) to the result: a
    periodic start where the heuristics leave room, a makespan phase for the span, then the search."""
    instance, objective = problem.instance, problem.objective
    best = handwritten
    if best is None or not _meets(best.value, bound, options.gap):
        # The heuristics leave room: a periodic schedule may fill it (it does under tight limits).
        budget = time.monotonic() + (options.deadline - time.monotonic()) * PERIODIC_SHARE
        periodic = periodic_schedule(instance, problem.split, deadline=budget)
        found = _as_start(problem, PERIODIC, periodic, clock)
        best = _preferred([*candidates, found] if found is not None else candidates)
    if best is not None:
        if progress is not None:
            try:
                progress(time.monotonic() - clock, best.value, bound)
            except KeyboardInterrupt:
                return _result(problem, best, best, bound, clock, interrupted=True, searched=False)
        if _meets(best.value, bound, options.gap):
            return _result(problem, best, best, bound, clock, interrupted=False, searched=False)
    lead = best
    if objective == "span" and problem.minimize == "time":
        # The makespan model searches far better; its best order re-timed for the span leads the search.
        start_value = None if best is None else best.value
        phase_deadline = time.monotonic() + (options.deadline - time.monotonic()) * MAKESPAN_PHASE
        phase = _solve(
            dataclasses.replace(problem, objective="makespan"),
            dataclasses.replace(options, deadline=phase_deadline),
            time.monotonic(),
            progress and (lambda *_: progress(time.monotonic() - clock, start_value, bound)),
            starts,
            heuristics,
        )
        found = _as_start(problem, "cp-sat (makespan)", phase.schedule, clock) if phase.schedule else None
        if found is not None and (lead is None or found.value < lead.value):
            lead = found
        if phase.status == "interrupted":
            if lead is None:
                return _empty(problem, "interrupted", clock, "interrupted before any schedule was found")
            return _result(problem, lead, best, bound, clock, interrupted=True, searched=True)
    return _search(problem, best, lead, bound, clock, options, progress)


def heuristic_schedules(instance: Instance) -> list[tuple[str, Schedule]]:
    """(name, schedule) of every heuristic that applies to `instance` (not yet validated)."""
    schedules = []
    for heuristic in all_heuristics():
        try:
            schedules.append((heuristic.name, run_heuristic(heuristic.name, instance)))
        except PipesatError:
            continue
    return schedules


def _named(schedules: Sequence[Schedule]) -> list[tuple[str, Schedule]]:
    return [(schedule.name or "start", schedule) for schedule in schedules]


def _check_options(
    objective: str, minimize: str, time_limit: float, workers: int, gap: float, cap: float | None
) -> None:
    if objective not in OBJECTIVES:
        raise InstanceError(f"unknown objective {objective!r}; use one of {', '.join(OBJECTIVES)}")
    if minimize not in MINIMIZE:
        raise InstanceError(f"unknown quantity to minimize {minimize!r}; use time or memory")
    if not time_limit > 0:
        raise InstanceError(f"the time limit must be positive, got {time_limit:g} seconds")
    if workers < 1:
        raise InstanceError(f"workers must be at least 1, got {workers}")
    if not 0 <= gap < 1:
        raise InstanceError(f"the gap to stop at must be a fraction in [0, 1), got {gap:g}")
    if cap is not None and minimize != "memory":
        raise InstanceError("a makespan cap applies only when minimizing memory; drop it or minimize memory")
    if cap is not None and not cap > 0:
        raise InstanceError(f"the makespan cap must be positive, got {cap:g}")


def _starting_points(problem: _Problem, sources: Sequence[tuple[str, Schedule]], clock: float) -> list[_Start]:
    """Every source schedule that fits, re-timed for the objective, plus the one-at-a-time schedule
    when minimising memory or when nothing else fits."""
    starts = [start for name, schedule in sources if (start := _as_start(problem, name, schedule, clock))]
    if not starts or problem.minimize == "memory":
        orders = one_at_a_time_orders(problem.instance, problem.split)
        start = _as_start(problem, ONE_AT_A_TIME, simulate(problem.instance, orders, ONE_AT_A_TIME), clock)
        starts += [start] if start else []
    return starts


def _preferred(candidates: Sequence[_Start]) -> _Start | None:
    """The best value; among equal values (to the validator's tolerance) the lowest peak memory."""
    if not candidates:
        return None
    least = min(candidate.value for candidate in candidates)
    ties = [c for c in candidates if c.value <= least * (1 + RELATIVE_TOLERANCE) + RELATIVE_TOLERANCE]
    return min(ties, key=lambda c: c.peak)


def _as_start(problem: _Problem, name: str, schedule: Schedule, clock: float) -> _Start | None:
    """The schedule's order for this problem (W split out after each B of a fused schedule), re-timed."""
    orders = schedule.orders()
    if schedule.split_backward != problem.split:
        if not problem.split:
            return None  # a schedule with separate W ops is not a fused-backward schedule
        orders = [
            [op for key in order for op in ([key, ("W", key[1], key[2])] if key[0] == "B" else [key])]
            for order in orders
        ]
    try:
        timed = problem.timed(orders, name=name).with_source(kind="heuristic", name=name)
    except PipesatError:
        return None
    return problem.start(name, timed, time.monotonic() - clock)


def _tick_hint(problem: _Problem, model: PipelineModel, start: _Start) -> tuple[dict[OpKey, int], int | None]:
    """The starting schedule's order timed in the model's ticks: a complete, feasible hint."""
    orders = start.schedule.orders()
    timed = problem.timed(orders, instance=model.ticks)
    if any(op.start != round(op.start) for op in timed.ops):
        # A min-span timing with a fractional span: the next whole tick keeps every time whole.
        timed = min_span_schedule(model.ticks, orders, span=math.ceil(compute_metrics(timed).max_span - 1e-9))
    starts = {op.key: round(op.start) for op in timed.ops}
    capacity = round(compute_metrics(timed).max_peak_memory) if problem.minimize == "memory" else None
    return starts, capacity


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
        self.starts = {key: self.value(var) for key, var in self.model.starts.items()}
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


def _search(
    problem: _Problem,
    best: _Start | None,
    lead: _Start | None,
    bound: float,
    clock: float,
    options: _Options,
    progress: Progress | None,
) -> SolveResult:
    """CP-SAT from `lead` (the best schedule so far; `best` is the best heuristic, for the report).

    The search gets what is left of the wall budget after building the model, less a reserve for
    reading its solution back; a watchdog stops it at that deadline, since CP-SAT itself can run
    far past its time limit while loading and presolving a model of thousands of ops.
    """
    if lead is not None and time.monotonic() >= options.deadline:
        return _result(problem, lead, best, bound, clock, interrupted=False, searched=True)
    memory = problem.minimize == "memory"
    model = PipelineModel(
        problem.instance, problem.objective, problem.split, problem.symmetry_breaking, memory, problem.time_cap
    )
    per_unit = model.scale.memory if memory else model.scale.time
    if memory:
        tick_bound = minimum_memory_limit(model.ticks)
    else:
        tick_bound = lower_bound(model.ticks, problem.objective, problem.split)
    upper = None
    if lead is not None:
        upper = model.add_hint(*_tick_hint(problem, model, lead))
    model.restrict_objective(math.ceil(tick_bound * (1 - 1e-9) - 1e-9), upper)

    # Flooring times keeps the model a relaxation; only a fractional min span loses up to a tick.
    loose_tick = 0 if memory or problem.objective == "makespan" or model.scale.exact_span else 1

    def to_bound(ticks: float) -> float:
        return max(bound, (math.ceil(ticks - 1e-6) - loose_tick) / per_unit)

    start_value = None if lead is None else lead.value
    recorder = _Recorder(model, clock, lambda ticks: ticks / per_unit, progress, to_bound, start_value)
    solver = cp_model.CpSolver()
    recorder.stop = solver.stop_search
    params = solver.parameters
    params.num_workers = options.workers
    params.random_seed = options.seed
    params.relative_gap_limit = options.gap
    params.catch_sigint_signal = False
    left = options.deadline - time.monotonic()
    reserve = min(STOP_GRACE + FINISH_SECONDS_PER_OP * len(model.keys), RESERVE_SHARE * left)
    remaining = max(left - reserve, MIN_SEARCH_SECONDS)
    if options.deterministic:
        params.max_deterministic_time = remaining
        params.max_time_in_seconds = 10 * remaining
        params.interleave_search = options.workers > 1
    else:
        params.max_time_in_seconds = remaining
    solver.best_bound_callback = recorder.on_bound
    status, interrupted = _run(solver, model, recorder, params.max_time_in_seconds)
    recorder.closed = True  # a search left to stop in the background reports nothing more
    if recorder.error is not None:
        raise recorder.error
    interrupted = interrupted or recorder.interrupted

    found = None
    if recorder.starts is not None:
        orders = orders_from_starts(problem.instance, recorder.starts, model.duration)
        timed = problem.timed(orders, name="cp-sat")
        found = problem.start("cp-sat", timed, recorder.found_at or 0.0)
    proven = bound
    if status is None:  # still stopping: the bound it last reported
        proven = bound if recorder.best_bound is None else recorder.best_bound
    elif status in (cp_model.OPTIMAL, cp_model.FEASIBLE) or (
        status == cp_model.UNKNOWN and math.isfinite(solver.best_objective_bound)
    ):
        proven = to_bound(solver.best_objective_bound)
    chosen = found if found is not None and (lead is None or found.value < lead.value) else lead
    if chosen is None:
        if interrupted:
            return _empty(problem, "interrupted", clock, "interrupted before any schedule was found")
        if status == cp_model.INFEASIBLE:
            what = f"a {problem.objective} within {problem.time_cap:g}" if problem.time_cap is not None else "one"
            return _empty(problem, "infeasible", clock, f"infeasible: no schedule fits; searched for {what}")
        return _empty(problem, "unknown", clock, f"unknown: no schedule found in {time.monotonic() - clock:.3g} s")
    first = next((start.found_at for start in (best, lead) if start is not None), recorder.first_at)
    return _result(problem, chosen, best, proven, clock, interrupted, searched=True, time_to_first=first)


def _run(
    solver: cp_model.CpSolver, model: PipelineModel, recorder: _Recorder, seconds: float
) -> tuple[int | None, bool]:
    """Solve in a worker thread so that Ctrl-C in the main thread stops the search gracefully, and
    stop it after `seconds` of wall time whatever phase CP-SAT is in. The status is None when the
    search has not stopped STOP_GRACE seconds later: it finishes in the background, and the
    recorder holds its best solution so far.

    The main thread waits on an event rather than `Thread.join`: a join interrupted by Ctrl-C can
    report the thread finished while it still runs (CPython before 3.13).
    """
    outcome: dict[str, object] = {}
    done = threading.Event()

    def work() -> None:
        try:
            outcome["status"] = solver.solve(model.model, recorder)
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


def _result(
    problem: _Problem,
    chosen: _Start,
    start: _Start | None,
    bound: float,
    clock: float,
    interrupted: bool,
    searched: bool,
    time_to_first: float | None = None,
) -> SolveResult:
    value = chosen.value
    if bound > value * (1 + RELATIVE_TOLERANCE) + RELATIVE_TOLERANCE:
        raise RuntimeError(f"internal error: lower bound {bound!r} exceeds the value {value!r} of a valid schedule")
    optimal = value <= bound * (1 + RELATIVE_TOLERANCE)
    if optimal:
        bound = value
    gap = relative_gap(value, bound)
    status = "interrupted" if interrupted else "optimal" if optimal else "feasible"
    elapsed = time.monotonic() - clock
    message = status if optimal and not interrupted else f"{status}, gap {_percent(gap)}"
    if not searched:
        message += f" ({chosen.name} meets the lower bound)" if optimal else f" ({chosen.name} is within the gap)"
    schedule = chosen.schedule.with_source(
        kind="solver",
        made_by=chosen.name,
        status=status,
        objective=problem.result_objective,
        value=value,
        bound=bound,
        gap=gap,
        solve_time=elapsed,
    )
    improvement = None
    if start is not None and start.value > 0:
        improvement = (start.value - value) / start.value
    memory = problem.minimize == "memory"
    return SolveResult(
        status=status,
        objective=problem.result_objective,
        schedule=schedule,
        value=value,
        bound=bound,
        gap=gap,
        solve_time=elapsed,
        time_to_first=chosen.found_at if time_to_first is None else time_to_first,
        time_to_best=chosen.found_at,
        start_heuristic=None if start is None else start.name,
        start_value=None if start is None else start.value,
        improvement=improvement,
        smallest_feasible_limit=value if memory and optimal else None,
        message=message,
    )


def _empty(
    problem: _Problem, status: str, clock: float, message: str, smallest_feasible_limit: float | None = None
) -> SolveResult:
    """A result without a schedule (infeasible, or interrupted before any was found)."""
    return SolveResult(
        status=status,
        objective=problem.result_objective,
        solve_time=time.monotonic() - clock,
        smallest_feasible_limit=smallest_feasible_limit,
        message=message,
    )


def _meets(value: float, bound: float, gap: float) -> bool:
    """Whether `value` is optimal or within the relative `gap` of `bound`."""
    return value <= bound * (1 + RELATIVE_TOLERANCE) or relative_gap(value, bound) <= gap


def _percent(fraction: float) -> str:
    """A percentage with three significant digits, never rounded to zero."""
    return f"{100 * fraction:.3g}%"
