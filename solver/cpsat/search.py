"""The CP-SAT run: the search in a child process (`solver.cpsat.child`) with the parameters
`solver.cpsat.search_parameters` gives it, its probes, and the read-back of the best solution.

The search gets what is left of the wall budget after building the model, less a reserve for
reading its solution back; at that deadline the child is told to stop, and killed if it does not
(CP-SAT itself can run far past its time limit while loading and presolving a model of thousands of
ops). Ctrl-C and SIGTERM stop it the same way, and the best solution so far is kept (`Record`, which
also reports progress). The outcome says why the search stopped, in words too, and logs it.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass

from ortools.sat.python import cp_model

from pipesat.models import Step
from pipesat.models.solve_result import StopReason
from pipesat.solver.cpsat.child import Ended, Message, Solution, run_search
from pipesat.solver.cpsat.data import SOLVER_BOUND_NOISE
from pipesat.solver.cpsat.model import PipelineModel, orders_from_starts
from pipesat.solver.cpsat.probes import Bisection, Outcome, Probe, RunProbe, bisect
from pipesat.solver.cpsat.record import Progress, Record
from pipesat.solver.cpsat.search_parameters import SearchOptions, search_parameters, search_seconds
from pipesat.solver.cpsat.warm_start import ObjectiveRange, tick_value
from pipesat.solver.evaluate.simulator import TransferPlan

LOG = logging.getLogger(__name__)
INTERRUPTED = "stopped by Ctrl-C or SIGTERM"


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
    transfers: TransferPlan | None = None
    """With offload: the best solution's transfers (`solver.cpsat.offload`)."""


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
    record = Record(clock, data.ticks_per_unit, start_value, bound, data.proven_bound, progress)
    lower, upper = (0, None) if objective_range is None else (objective_range.lower, objective_range.upper)
    # A probe times a solution's orders to know its value, which offloads would change: none with them.
    probing = not options.deterministic and upper is not None and not data.offload
    if probing and upper is not None:
        opening = _opening_probe(model, options, lower, upper, record)
        if opening.outcome == Outcome.FOUND:
            LOG.info("search stopped (proof): the opening probe found a schedule at the bound")
            return _outcome(model, record, StopReason.PROOF, "proven by the opening probe", tick_optimum=opening.value)
        if opening.outcome == Outcome.INTERRUPTED:
            return _outcome(model, record, StopReason.INTERRUPT, INTERRUPTED, interrupted=True)
        if opening.outcome == Outcome.REFUTED:
            lower = data.least_value_from(lower + 1)
    parameters, seconds = search_parameters(options, len(keys))
    watched = model.watched()
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
    record: Record,
    stopped_by: StopReason,
    reason: str,
    interrupted: bool = False,
    infeasible: bool = False,
    tick_optimum: int | None = None,
) -> SearchOutcome:
    """The outcome from what `record` holds: its best solution's orders, when it came, its bound."""
    orders, transfers = (None, None) if record.values is None else model.read_back(record.values)
    return SearchOutcome(
        orders=orders,
        transfers=transfers,
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


def _opening_probe(model: PipelineModel, options: SearchOptions, lower: int, upper: int, record: Record) -> Probe:
    """One probe at the analytic bound before the search, for `Tuning.opening_share` of its time, when
    the start is within `Tuning.opening_gap` of it; a probe that does not run settles nothing (open)."""
    share, gap = options.tuning.opening_share, options.tuning.opening_gap
    if share <= 0 or upper <= lower or upper > lower * (1 + gap):
        return Probe(Outcome.OPEN)
    seconds = share * search_seconds(options, len(model.variables.starts))
    return _probe_runner(model, options, record)(lower, seconds)


def _probe_after_stall(
    model: PipelineModel, options: SearchOptions, lower: int, upper: int, record: Record
) -> tuple[StopReason, str, int | None]:
    """The probes in the time a stalled search left: why the search ended, and the optimum (ticks)
    when they proved one."""
    bisection = _bisect(model, options, lower, upper, record)
    if bisection.interrupted:
        return StopReason.INTERRUPT, INTERRUPTED, None
    if bisection.proven_optimal(upper):
        return StopReason.PROOF, "proven by the bisection probes", upper if bisection.value is None else bisection.value
    return StopReason.TIME_LIMIT, "the search stalled; bisection probes settled what they could", None


def _bisect(model: PipelineModel, options: SearchOptions, lower: int, upper: int, record: Record) -> Bisection:
    """Bisection probes between `lower` and `upper` (ticks) in what is left of the search's time; what
    they find and prove goes to `record` as it comes."""
    seconds = search_seconds(options, len(model.variables.starts))
    run_probe = _probe_runner(model, options, record)
    bisection = bisect(lower, upper, run_probe, seconds, options.gap, time.monotonic, model.data.least_value_from)
    LOG.info(
        "%d probes: no schedule below %g, best %s",
        bisection.probes,
        model.data.proven_bound(bisection.lower),
        "none better than the start" if bisection.value is None else f"{bisection.value / model.data.ticks_per_unit:g}",
    )
    return bisection


def _probe_runner(model: PipelineModel, options: SearchOptions, record: Record) -> RunProbe:
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
        parameters, wall = search_parameters(options, len(keys), seconds, probe=True)
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
