"""The CP-SAT run: its parameters, the search in a child process (`solver.cpsat.child`), progress
reports, and the read-back of the best solution.

The search gets what is left of the wall budget after building the model, less a reserve for
reading its solution back; at that deadline the child is told to stop, and killed if it does not
(CP-SAT itself can run far past its time limit while loading and presolving a model of thousands of
ops). Ctrl-C and SIGTERM stop it the same way, and the best solution so far is kept. The outcome says
why the search stopped, in words too, and logs it.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass

from google.protobuf import text_format
from ortools.sat import sat_parameters_pb2
from ortools.sat.python import cp_model

from pipesat.models import Step
from pipesat.models.solve_result import StopReason
from pipesat.models.tuning import DEFAULT_TUNING, Tuning
from pipesat.solver.cpsat.child import (
    STOP_GRACE,
    Bound,
    Ended,
    Finished,
    Message,
    Solution,
    cpsat_log_wanted,
    run_search,
)
from pipesat.solver.cpsat.data import SOLVER_BOUND_NOISE
from pipesat.solver.cpsat.model import PipelineModel, orders_from_starts
from pipesat.solver.cpsat.probes import Bisection, Outcome, Probe, RunProbe, bisect
from pipesat.solver.cpsat.warm_start import ObjectiveRange, tick_value

# Kept back from the search: the grace a stopping child gets and, per op of the model, the time to read
# back, re-time and validate a schedule (about 20 microseconds an op), at most RESERVE_SHARE of what
# is left. The least time a search gets.
FINISH_SECONDS_PER_OP = 3e-5
RESERVE_SHARE = 0.1
MIN_SEARCH_SECONDS = 0.05
# The longest the progress line goes without a report while CP-SAT searches.
REFRESH_SECONDS = 0.5
# With two workers CP-SAT runs one full search (default_lp) and one thread of LNS, and leaves out every
# bound-raising subsolver. pipesat adds CP-SAT's objective lower-bound search: on a model of at most
# `Tuning.proof_small_ops` ops as a second full search in place of LNS (small models are where proofs are
# expected), on a larger one as a third thread sharing the two cores, so that the LNS which improves
# the warm start stays. Measured in benchmarks/bench_proofs.py and bench_targets.py (docs/manual.md,
# "Proofs on two cores"). An expert's parameters that choose workers or subsolvers replace this whole;
# a deterministic search runs CP-SAT on one worker, without it.
PROOF_PORTFOLIO_WORKERS = 2
PROOF_SUBSOLVER = "objective_lb_search"
# A probe on two workers runs two full searches (and `Tuning.strong_probes`' third): CP-SAT's default_lp and
# the same search branching on which of two ops of a device comes first
# (use_dynamic_precedence_in_disjunctive), which finds schedules at a tight value that branching on
# start times misses (V p4 m8 under limit 6: 48.6 in 4.8-8.0 s, where default_lp and feasibility
# jump end open after 25 s). Measured in bench_proofs (variant `no-probe-precedences`,
# docs/manual.md). CP-SAT calls the option experimental; in the portfolio's main search it lowered
# bounds and once aborted (docs/manual.md). `Tuning.probe_precedences` turns it off.
PROBE_PRECEDENCE_SUBSOLVER = "precedences"
# A probe on two workers runs, as a third thread sharing the two cores, the search branching on
# precedences with each device's no-overlap propagated by CP-SAT's stronger, costlier disjunctive
# reasoning (use_strong_propagation_in_disjunctive): with the objective's domain cut to T it refutes
# what the default leaves open (bench_targets' 400-op V p = 3, m = 7 under limit 3: "at most 96.5?"
# refuted in 8.7-10.8 s, open after 60 s without). On a thread of their own the two others keep
# finding schedules as fast: strong propagation in place of either slowed that (V p4 m8 under limit
# 8: the opening probe open after 2.7 s where it finds one in 0.2 s; bench_suite's V p8 m16 at 2x:
# 375.75-380.5 against 373.5). In the portfolio's own searches it cost bounds (bench_targets' 400-op
# interleaved p = 3, m = 9: phase 0 no longer proved 158). Measured in bench_proofs (variant
# `no-strong-probes`, docs/manual.md). `Tuning.strong_probes` turns it off.
PROBE_STRONG_SUBSOLVER = "strong_precedences"
PORTFOLIO_FIELDS = {"num_workers", "subsolvers", "extra_subsolvers", "ignore_subsolvers", "num_full_subsolvers"}
LOG = logging.getLogger(__name__)
INTERRUPTED = "stopped by Ctrl-C or SIGTERM"


def available_cores() -> int:
    """The CPU cores this process may run on (its affinity where the platform says, else all of them)."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


Progress = Callable[[float, float | None, float | None], None]
"""`progress(elapsed seconds, best value, best bound)`, called as the search finds them."""


@dataclass(frozen=True, kw_only=True)
class SearchOptions:
    """The search's settings; `deadline` is the `time.monotonic()` by which the solve returns and
    `time_limit` the seconds it was given.

    `deterministic` makes `time_limit` CP-SAT's deterministic time (wall clock stops it only at
    `wall_factor` times that) on one CP-SAT worker; nothing it decides reads the wall
    clock, so a run slowed by a busy machine searches exactly as far as one that was not. `gap` stops
    it at that relative gap. `cpsat_params` are SatParameters in text form (`solver.cpsat.parameters`),
    applied after these. `tuning` chooses the portfolios and the probes (`Tuning`'s search fields).
    """

    workers: int
    seed: int
    deterministic: bool
    gap: float
    deadline: float
    time_limit: float
    wall_factor: float = 10.0
    cpsat_params: str = ""
    tuning: Tuning = DEFAULT_TUNING

    def share(self, fraction: float) -> SearchOptions:
        """These options for a phase given `fraction` of the time: of the time limit when
        deterministic, else of the wall time left to the deadline."""
        now = time.monotonic()
        left = self.deadline - now
        limit = self.time_limit if self.deterministic else left
        return dataclasses.replace(self, deadline=now + fraction * left, time_limit=fraction * limit)


@dataclass(frozen=True)
class SearchOutcome:
    """What a search found: the best solution's per-device op orders (None when it found none) and
    when (seconds since the solve's clock), the proven bound in instance units, whether CP-SAT
    proved the model infeasible, and whether Ctrl-C (or the progress callback) interrupted it.
    `tick_optimum` is the minimised variable's optimum in ticks when CP-SAT proved one. `stopped_by`
    and `reason` say why the search stopped."""

    orders: list[list[Step]] | None
    found_at: float | None
    first_at: float | None
    bound: float
    infeasible: bool
    interrupted: bool
    stopped_by: StopReason
    reason: str
    tick_optimum: int | None = None


def search(
    model: PipelineModel,
    options: SearchOptions,
    clock: float,
    bound: float,
    start_value: float | None,
    progress: Progress | None,
    objective_range: ObjectiveRange | None = None,
) -> SearchOutcome:
    """Run CP-SAT on the (warm-started) `model` until `options.deadline` less the reserve.

    `bound` is the analytic lower bound (instance units), which every reported bound is at least;
    `start_value` the hinted schedule's value, the best value reported until CP-SAT finds one. Given
    the minimised variable's `objective_range` (ticks, from `warm_start`), one probe at its lower end
    opens the search when the start is within `Tuning.opening_gap` of it (a schedule found there is
    optimal; a refutation raises the bound); a search that stalls near its bound (neither its value nor
    its bound moved for `Tuning.stall_share` of its time, at a gap of at most `Tuning.probe_gap`) is
    stopped and bisection probes (`solver.cpsat.probes`) take the rest of the time between its bound
    and its best value. A deterministic search runs to its limit and does not probe: when it stalls
    depends on the wall clock.
    """
    data = model.data
    keys = list(model.variables.starts)
    record = _Record(clock, data.ticks_per_unit, start_value, bound, data.proven_bound, progress)
    lower, upper = (0, None) if objective_range is None else (objective_range.lower, objective_range.upper)
    probing = not options.deterministic and upper is not None
    if probing and upper is not None:
        opening = _opening_probe(model, options, lower, upper, record)
        if opening.outcome == Outcome.FOUND:
            LOG.info("search stopped (proof): the opening probe found a schedule at the bound")
            return _outcome(model, record, StopReason.PROOF, "proven by the opening probe", tick_optimum=opening.value)
        if opening.outcome == Outcome.INTERRUPTED:
            return _outcome(model, record, StopReason.INTERRUPT, INTERRUPTED, interrupted=True)
        if opening.outcome == Outcome.REFUTED:
            lower = data.least_value_from(lower + 1)
    parameters, seconds = _parameters(options, len(keys))
    watched = [model.variables.starts[key] for key in keys]
    tuning = options.tuning
    stalled = record.stalled_for(tuning.stall_share * seconds, tuning.probe_gap) if probing else None
    ended = run_search(model.cp_model, parameters, watched, seconds, record.on_message, record.refresh, stalled)
    finished = ended.finished
    tick_bound = None
    if finished is not None and (
        finished.status in (cp_model.OPTIMAL, cp_model.FEASIBLE)
        or (finished.status == cp_model.UNKNOWN and math.isfinite(finished.bound))
    ):
        record.bound = record.to_bound(finished.bound)
        tick_bound = data.proven_ticks(finished.bound)
    stopped_by, reason = _why_stopped(ended, options, record.objective)
    optimal = stopped_by == StopReason.PROOF  # CP-SAT says OPTIMAL at a gap limit too
    tick_optimum = round(record.objective) if optimal and record.objective is not None else None
    if ended.stopped_early and upper is not None:
        LOG.info("search stalled: no news for %.3g s; bisection probes take the rest", tuning.stall_share * seconds)
        lower = max(lower, tick_bound or 0)
        upper = upper if record.objective is None else round(record.objective)
        stopped_by, reason, tick_optimum = _probe_after_stall(model, options, lower, upper, record)
    LOG.info("search stopped (%s): %s", stopped_by, reason)
    infeasible = finished is not None and finished.status == cp_model.INFEASIBLE
    interrupted = ended.interrupted or stopped_by == StopReason.INTERRUPT
    return _outcome(model, record, stopped_by, reason, interrupted, infeasible, tick_optimum)


def _outcome(
    model: PipelineModel,
    record: _Record,
    stopped_by: StopReason,
    reason: str,
    interrupted: bool = False,
    infeasible: bool = False,
    tick_optimum: int | None = None,
) -> SearchOutcome:
    """The outcome from what `record` holds: its best solution's orders, when it came, its bound."""
    orders = None if record.values is None else _orders(model, record.values)
    return SearchOutcome(
        orders=orders,
        found_at=record.found_at,
        first_at=record.first_at,
        bound=record.bound,
        infeasible=infeasible,
        interrupted=interrupted,
        stopped_by=stopped_by,
        reason=reason,
        tick_optimum=tick_optimum,
    )


def _orders(model: PipelineModel, values: list[int]) -> list[list[Step]]:
    """Per-device orders (pairs included) from the watched values (every op's start, in `model.variables.starts` order)."""
    return orders_from_starts(
        model.data.instance, dict(zip(model.variables.starts, values, strict=True)), model.data.durations
    )


def _opening_probe(model: PipelineModel, options: SearchOptions, lower: int, upper: int, record: _Record) -> Probe:
    """One probe at the analytic bound before the search, for `Tuning.opening_share` of its time, when
    the start is within `Tuning.opening_gap` of it; a probe that does not run settles nothing (open)."""
    share, gap = options.tuning.opening_share, options.tuning.opening_gap
    if share <= 0 or upper <= lower or upper > lower * (1 + gap):
        return Probe(Outcome.OPEN)
    seconds = share * _search_seconds(options, len(model.variables.starts))
    return _probe_runner(model, options, record)(lower, seconds)


def _probe_after_stall(
    model: PipelineModel, options: SearchOptions, lower: int, upper: int, record: _Record
) -> tuple[StopReason, str, int | None]:
    """The probes in the time a stalled search left: why the search ended, and the optimum (ticks)
    when they proved one."""
    bisection = _bisect(model, options, lower, upper, record)
    if bisection.interrupted:
        return StopReason.INTERRUPT, INTERRUPTED, None
    if bisection.proven_optimal(upper):
        return StopReason.PROOF, "proven by the bisection probes", upper if bisection.value is None else bisection.value
    return StopReason.TIME_LIMIT, "the search stalled; bisection probes settled what they could", None


def _bisect(model: PipelineModel, options: SearchOptions, lower: int, upper: int, record: _Record) -> Bisection:
    """Bisection probes between `lower` and `upper` (ticks) in what is left of the search's time; what
    they find and prove goes to `record` as it comes."""
    seconds = _search_seconds(options, len(model.variables.starts))
    run_probe = _probe_runner(model, options, record)
    bisection = bisect(lower, upper, run_probe, seconds, options.gap, time.monotonic, model.data.least_value_from)
    LOG.info(
        "%d probes: no schedule below %g, best %s",
        bisection.probes,
        model.data.proven_bound(bisection.lower),
        "none better than the start" if bisection.value is None else f"{bisection.value / model.data.ticks_per_unit:g}",
    )
    return bisection


def _probe_runner(model: PipelineModel, options: SearchOptions, record: _Record) -> RunProbe:
    """`run_probe(T, seconds)`: a CP-SAT run of the model with the minimised variable at most T and no
    objective; the schedule it finds or the bound it proves goes to `record`."""
    keys = list(model.variables.starts)
    watched = [model.variables.starts[key] for key in keys]
    minimized = model.variables.minimized
    per_unit = model.data.ticks_per_unit

    def run_probe(limit: int, seconds: float) -> Probe:
        probe = model.cp_model.clone()
        probe.add(probe.get_int_var_from_proto_index(minimized.index) <= limit)
        probe.clear_objective()
        probe.clear_hints()  # the start's value is above the limit: repairing its hint only costs time
        parameters, wall = _parameters(options, len(keys), seconds, probe=True)
        solutions: list[Solution] = []
        began = time.monotonic()
        ended = run_search(probe, parameters, watched, wall, _keep_solutions(solutions), record.refresh)
        status = None if ended.finished is None else ended.finished.status
        result = Probe(Outcome.OPEN)
        if ended.interrupted:
            result = Probe(Outcome.INTERRUPTED)
        elif solutions:
            values = solutions[-1].values
            value = math.ceil(tick_value(model, _orders(model, values)) - SOLVER_BOUND_NOISE)
            if record.objective is None or value < record.objective:
                record.take(values, value)
            result = Probe(Outcome.FOUND, value, values)
        elif status == cp_model.INFEASIBLE:
            record.improve(limit + 1)
            result = Probe(Outcome.REFUTED)
        LOG.info(
            "probe: a value of at most %g? %s in %.2f s",
            limit / per_unit,
            result.outcome.value,
            time.monotonic() - began,
        )
        return result

    return run_probe


def _keep_solutions(solutions: list[Solution]) -> Callable[[Message], None]:
    def keep(message: Message) -> None:
        if isinstance(message, Solution):
            solutions.append(message)

    return keep


def _why_stopped(ended: Ended, options: SearchOptions, objective: float | None) -> tuple[StopReason, str]:
    """Why the search stopped, and in words: `objective` is the best solution's (ticks), if any."""
    finished = ended.finished
    if ended.interrupted:
        return StopReason.INTERRUPT, INTERRUPTED
    if finished is None and not ended.deadline:
        return StopReason.CRASH, f"the CP-SAT process {ended.how_ended}"
    if finished is not None and finished.status == cp_model.MODEL_INVALID:
        return StopReason.MODEL_INVALID, f"CP-SAT refused the model: {finished.info}"
    if finished is not None and finished.status == cp_model.INFEASIBLE:
        return StopReason.PROOF, "CP-SAT proved that no schedule fits"
    if finished is not None and finished.status == cp_model.OPTIMAL:
        if objective is not None and finished.bound < objective:
            return StopReason.GAP, f"CP-SAT reached the gap asked for, {100 * options.gap:.3g}%"
        return StopReason.PROOF, "proven by CP-SAT"
    killed = "" if finished is not None else f"; CP-SAT {ended.how_ended}"
    if options.deterministic and ended.deadline:
        return StopReason.WALL_CLOCK, f"the wall clock ran out ({options.wall_factor:g}x the time limit){killed}"
    ran_out = "the time limit ran out"
    if options.cpsat_params:  # CP-SAT may have stopped at a limit the expert set (solutions, time)
        ran_out = "CP-SAT stopped at the time limit or a limit in the expert parameters"
    if finished is not None and finished.status == cp_model.UNKNOWN:
        return StopReason.TIME_LIMIT, f"{ran_out} before CP-SAT found a schedule{killed}"
    return StopReason.TIME_LIMIT, f"{ran_out}{killed}"


def _parameters(
    options: SearchOptions, num_ops: int, seconds: float | None = None, probe: bool = False
) -> tuple[str, float]:
    """The search's SatParameters (text form) and the wall seconds it may run: `seconds` when given,
    else what is left to the deadline less the reserve. The expert's `options.cpsat_params` come last
    and win, but the wall seconds stay pipesat's: the solve returns by its deadline whatever time
    limit they give CP-SAT. With two workers (and not deterministic), unless the expert chose the
    subsolvers, a search runs the proof portfolio (PROOF_PORTFOLIO_WORKERS) and a `probe` (which has
    no objective to bound) the probe portfolio (`Tuning.probe_precedences`, `Tuning.strong_probes`)."""
    params = sat_parameters_pb2.SatParameters()
    params.num_workers = cpsat_workers(options.workers, options.deterministic)
    params.random_seed = options.seed
    # CP-SAT's relative gap is (value - bound) / value; pipesat's gap is (value - bound) / bound.
    params.relative_gap_limit = options.gap / (1 + options.gap)
    remaining = _search_seconds(options, num_ops) if seconds is None else max(seconds, MIN_SEARCH_SECONDS)
    if options.deterministic:
        params.max_deterministic_time = remaining
        params.max_time_in_seconds = options.wall_factor * remaining
    else:
        params.max_time_in_seconds = remaining
    seconds = params.max_time_in_seconds
    params.log_search_progress = cpsat_log_wanted()
    expert = text_format.Parse(options.cpsat_params, sat_parameters_pb2.SatParameters())
    expert_sets = {field.name for field, _ in expert.ListFields()}
    two_workers = options.workers == PROOF_PORTFOLIO_WORKERS and not options.deterministic
    if two_workers and not expert_sets & PORTFOLIO_FIELDS:
        if not probe:
            _add_proof_portfolio(params, num_ops, options.tuning.proof_small_ops)
        elif options.tuning.probe_precedences:
            _add_probe_portfolio(params, options.tuning.strong_probes)
    params.MergeFrom(expert)
    return text_format.MessageToString(params), seconds


def cpsat_workers(workers: int, deterministic: bool) -> int:
    """The CP-SAT workers a search runs: `workers`, or one when deterministic (CP-SAT's interleaved
    search of two workers returned different optimal schedules of one instance in runs on a loaded
    machine; one worker gave the same schedule in every run)."""
    return 1 if deterministic else workers


def _search_seconds(options: SearchOptions, num_ops: int) -> float:
    """The seconds left to the deadline (a deterministic search: its whole time limit), less the
    reserve for reading the result back."""
    left = options.time_limit if options.deterministic else options.deadline - time.monotonic()
    reserve = min(STOP_GRACE + FINISH_SECONDS_PER_OP * num_ops, RESERVE_SHARE * left)
    return max(left - reserve, MIN_SEARCH_SECONDS)


def _add_proof_portfolio(params: sat_parameters_pb2.SatParameters, num_ops: int, small_ops: int) -> None:
    """Two workers' portfolio for proofs (see PROOF_PORTFOLIO_WORKERS), for a small model (at most
    `small_ops` ops) or a larger one."""
    params.extra_subsolvers.append(PROOF_SUBSOLVER)
    if num_ops <= small_ops:
        params.num_full_subsolvers = PROOF_PORTFOLIO_WORKERS
        role, size = "a second full search", "at most"
    else:
        params.num_workers = PROOF_PORTFOLIO_WORKERS + 1
        role, size = "a third thread beside LNS", "more than"
    LOG.info("CP-SAT subsolvers: %s added as %s (%d ops, %s %d)", PROOF_SUBSOLVER, role, num_ops, size, small_ops)


def _add_probe_portfolio(params: sat_parameters_pb2.SatParameters, strong: bool) -> None:
    """Two workers' portfolio for a probe (see PROBE_PRECEDENCE_SUBSOLVER): default_lp beside the search
    branching on precedences and, when `strong` (PROBE_STRONG_SUBSOLVER), as a third thread, the same
    propagating strongly."""
    precedences = params.subsolver_params.add()
    precedences.name = PROBE_PRECEDENCE_SUBSOLVER
    precedences.use_dynamic_precedence_in_disjunctive = True
    params.extra_subsolvers.append(PROBE_PRECEDENCE_SUBSOLVER)
    params.num_full_subsolvers = PROOF_PORTFOLIO_WORKERS
    if strong:
        strongly = params.subsolver_params.add()
        strongly.CopyFrom(precedences)
        strongly.name = PROBE_STRONG_SUBSOLVER
        strongly.use_strong_propagation_in_disjunctive = True
        params.extra_subsolvers.append(PROBE_STRONG_SUBSOLVER)
        params.num_workers = params.num_full_subsolvers = PROOF_PORTFOLIO_WORKERS + 1


class _Record:
    """The search as the parent sees it: the best solution's values and objective (ticks), when it came,
    the best bound (instance units, never below the analytic `floor`), and the progress reports: one
    for each solution and bound, and one at least every REFRESH_SECONDS (so the elapsed time moves
    between solutions). `now` is the clock, `time.monotonic` but in tests."""

    def __init__(
        self,
        clock: float,
        per_unit: int,
        start_value: float | None,
        floor: float,
        proven_bound: Callable[[float], float],
        progress: Progress | None,
        now: Callable[[], float] = time.monotonic,
    ) -> None:
        self.clock = clock
        self.per_unit = per_unit
        self.proven_bound = proven_bound
        self.progress = progress
        self.now = now
        self.best_value = start_value  # instance units, for progress reports
        self.bound = floor
        self.values: list[int] | None = None
        self.objective: float | None = None
        self.found_at: float | None = None
        self.first_at: float | None = None
        self.reported_at = -math.inf
        self.changed_at = now()  # the last new solution or raised bound

    def to_bound(self, ticks: float) -> float:
        """A bound CP-SAT reported (ticks) in instance units, at least the analytic floor."""
        return max(self.bound, self.proven_bound(ticks))

    def on_message(self, message: Message) -> None:
        if isinstance(message, Solution):
            self.take(message.values, message.objective)
            self.improve(message.bound)
        elif isinstance(message, Bound):
            self.improve(message.bound)
        elif isinstance(message, Finished) and math.isfinite(message.bound):
            self.bound = self.to_bound(message.bound)

    def take(self, values: list[int], objective: float) -> None:
        """Keep a solution: the watched variables' `values` and its `objective` (ticks)."""
        self.changed_at = self.now()
        now = self.changed_at - self.clock
        self.values, self.objective, self.found_at = values, objective, now
        self.first_at = now if self.first_at is None else self.first_at
        self.best_value = objective / self.per_unit

    def improve(self, ticks: float) -> None:
        """Take a bound CP-SAT reported (ticks) and report the news."""
        raised = self.to_bound(ticks)
        if raised > self.bound:
            self.bound, self.changed_at = raised, self.now()
        self.report()

    def stalled_for(self, seconds: float, gap: float) -> Callable[[], bool]:
        """A test of whether `seconds` have passed with neither a new solution nor a raised bound, at
        a relative gap of at most `gap`."""

        def stalled() -> bool:
            if self.best_value is None or self.now() - self.changed_at < seconds:
                return False
            return self.best_value <= self.bound * (1 + gap)

        return stalled

    def refresh(self) -> None:
        """Report again if the last report is REFRESH_SECONDS old."""
        if self.now() - self.reported_at >= REFRESH_SECONDS:
            self.report()

    def report(self) -> None:
        if self.progress is not None:
            self.reported_at = self.now()
            self.progress(self.reported_at - self.clock, self.best_value, self.bound)
