"""The starting schedules a solve chooses from, and which one it prefers.

Every handwritten schedule that serves the instance and every schedule given to the solve is re-timed
for the objective (as soon as possible for the makespan, for the least max span otherwise) and kept
when it is valid, memory limit and time cap included. The one-at-a-time schedule joins them when
minimising memory or when nothing else fits; the periodic schedule, and of a linear or interleaved
pipeline the memory-gated one, when the best leaves room to the lower bound. The preferred one has
the lowest value; among values equal within `models.tolerance` the lowest peak memory, then the
earliest in the list (`solver.heuristics.SCHEDULES` order).

A handwritten schedule keeps its name only as `pipesat schedule NAME` makes it: a fused one with its
W ops split out for a split-backward solve is another schedule, named so ("1F1B with W split out"),
and is never reported as the best handwritten schedule.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass

from pipesat.models import Instance, Objective, PipesatError, Schedule, Step
from pipesat.models.names import SCHEDULE_TITLES, SPLIT_OUT
from pipesat.models.ops import split_out_weight
from pipesat.models.solve_result import NamedValue
from pipesat.models.tolerance import fits
from pipesat.models.tuning import DEFAULT_TUNING, Tuning
from pipesat.solver.evaluate.bounds import lower_bound, memory_bound_under_cap, without_communication
from pipesat.solver.evaluate.metrics import compute_metrics
from pipesat.solver.evaluate.offload_bounds import last_backward_bound, offload_energy_bound
from pipesat.solver.evaluate.retime import timed_for
from pipesat.solver.evaluate.simulator import TransferPlan, simulate, transfer_plan_of
from pipesat.solver.evaluate.validator import validate
from pipesat.solver.heuristics.memory_gated import NAME as MEMORY_GATED
from pipesat.solver.heuristics.memory_gated import memory_gated_schedules
from pipesat.solver.heuristics.offload_gated import NAME as OFFLOAD_GATED
from pipesat.solver.heuristics.offload_gated import offload_gated_schedules
from pipesat.solver.heuristics.offloaded import NAME as OFFLOADED
from pipesat.solver.heuristics.offloaded import offloaded_one_at_a_time
from pipesat.solver.heuristics.one_at_a_time import NAME as ONE_AT_A_TIME
from pipesat.solver.heuristics.one_at_a_time import one_at_a_time_orders
from pipesat.solver.heuristics.periodic import NAME as PERIODIC
from pipesat.solver.heuristics.periodic import periodic_schedule

LOG = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class Problem:
    """One solve's settings, resolved: the time `objective` (makespan or max span) is minimised, or
    with `minimize_memory` the peak memory with the time objective at most `time_cap` when given.
    `known_bound` is a lower bound on the result's objective proven elsewhere (a Pareto sweep's).
    `tuning` is the solve's (`models.tuning`): the bounds read it here. With `offload` the search may
    offload activations over the instance's host link (docs/offload.md); the starting schedules
    that offload are the handwritten offload families, the offload-gated one where the starts leave
    room, and the one-at-a-time order with everything offloaded when nothing else fits."""

    instance: Instance
    objective: Objective
    minimize_memory: bool
    split: bool
    time_cap: float | None
    symmetry_breaking: bool
    known_bound: float | None = None
    tuning: Tuning = DEFAULT_TUNING
    offload: bool = False

    def lower_bound(self) -> float:
        """The best lower bound on the result's objective: the analytic one, or the known one. With
        offload the bounds under a memory limit, which assume none, give way to the unlimited ones, to
        the memory energy less what the host link can save, and to the chain after a device's last B
        beyond the W time it can hold (`offload_bounds`)."""
        if self.offload:
            unlimited = self.instance.with_limit(None)
            analytic = lower_bound(unlimited, self.result_objective, self.split, tuning=self.tuning)
            if self.result_objective != Objective.MEMORY:
                compute = without_communication(self.instance)
                offloading = max(
                    offload_energy_bound(compute, self.split),
                    last_backward_bound(compute, self.split, tuning=self.tuning),
                )
                analytic = max(analytic, offloading)
            return analytic if self.known_bound is None else max(analytic, self.known_bound)
        if self.minimize_memory and self.time_cap is not None:
            cap = self.time_cap
            analytic = memory_bound_under_cap(self.instance, self.split, self.objective, cap, tuning=self.tuning)
        else:
            analytic = lower_bound(self.instance, self.result_objective, self.split, tuning=self.tuning)
        return analytic if self.known_bound is None else max(analytic, self.known_bound)

    @property
    def result_objective(self) -> Objective:
        """What the result's value measures."""
        return Objective.MEMORY if self.minimize_memory else self.objective

    def timed(
        self, orders: Sequence[Sequence[Step]], name: str = "", transfers: TransferPlan | None = None
    ) -> Schedule:
        """The orders timed at exact floats: as soon as possible, or for the least max span; with a
        solution's `transfers` (offload: the makespan only) as soon as possible with them."""
        if transfers is not None:
            return simulate(self.instance, orders, name, links=transfers.links, waits=transfers.waits)
        return timed_for(self.objective, self.instance, orders, name)

    def candidate(self, name: str, schedule: Schedule, found_at: float) -> Candidate | None:
        """`schedule` with its value and peak, or None unless it is valid (memory limit included) and
        within the time cap."""
        if validate(schedule):
            return None
        metrics = compute_metrics(schedule)
        time_value = metrics.objective(self.objective)
        if self.time_cap is not None and not fits(time_value, self.time_cap):
            return None
        value = metrics.max_peak_memory if self.minimize_memory else time_value
        return Candidate(name, schedule, value, metrics.max_peak_memory, found_at)


@dataclass(frozen=True)
class Candidate:
    """A valid schedule a solve can return or start the search from, with its objective value, its
    peak memory and when it was in hand (seconds since the solve's clock). `handwritten`: a
    handwritten schedule exactly as `pipesat schedule NAME` makes it."""

    name: str
    schedule: Schedule
    value: float
    peak: float
    found_at: float
    handwritten: bool = False

    @property
    def named_value(self) -> NamedValue:
        return NamedValue(self.name, self.value)


def starting_candidates(
    problem: Problem, handwritten: Sequence[tuple[str, Schedule]], others: Sequence[Schedule], clock: float
) -> list[Candidate]:
    """Every handwritten (name, schedule) and every other given schedule that fits, re-timed for the
    objective, plus the one-at-a-time schedule when minimising memory or when nothing else fits, and
    with offload, when that does not fit either, it with everything offloaded."""
    sources = [*handwritten, *((schedule.name or "start", schedule) for schedule in others)]
    names = {name for name, _ in handwritten}
    found = []
    for name, schedule in sources:
        candidate = as_candidate(problem, name, schedule, clock)
        _log_start(name, candidate)
        if candidate is not None:
            found.append(dataclasses.replace(candidate, handwritten=candidate.name in names))
    if not found or problem.minimize_memory:
        one = one_at_a_time_candidate(problem, clock)
        _log_start(ONE_AT_A_TIME, one)
        found += [one] if one else []
    if not found and problem.offload:
        offloaded = problem.candidate(
            OFFLOADED, offloaded_one_at_a_time(problem.instance, problem.split), time.monotonic() - clock
        )
        _log_start(OFFLOADED, offloaded)
        found += [offloaded] if offloaded else []
    return found


def _log_start(name: str, candidate: Candidate | None) -> None:
    """Log a starting schedule tried: its value, or that it does not fit."""
    if candidate is None:
        LOG.info("start %s: does not fit (memory limit, time cap or backward)", name)
    else:
        renamed = "" if candidate.name == name else f" as {candidate.name}"
        LOG.info("start %s%s: %g, peak memory %g", name, renamed, candidate.value, candidate.peak)


def one_at_a_time_candidate(problem: Problem, clock: float) -> Candidate | None:
    """The one-at-a-time schedule (one microbatch in flight: it fits every feasible memory limit)."""
    orders = one_at_a_time_orders(problem.instance, problem.split)
    return as_candidate(problem, ONE_AT_A_TIME, simulate(problem.instance, orders, ONE_AT_A_TIME), clock)


def periodic_candidate(problem: Problem, clock: float) -> Candidate | None:
    """The best periodic schedule (every period of its grid), if it fits."""
    schedule = periodic_schedule(problem.instance, problem.split)
    return as_candidate(problem, PERIODIC, schedule, clock)


def memory_gated_candidate(problem: Problem, clock: float) -> Candidate | None:
    """Of a linear or interleaved pipeline, the best memory-gated schedule (`solver.heuristics.memory_gated`)
    that fits."""
    found = (
        as_candidate(problem, MEMORY_GATED, schedule, clock)
        for schedule in memory_gated_schedules(problem.instance, problem.split)
    )
    return preferred([candidate for candidate in found if candidate is not None])


def offload_gated_candidate(problem: Problem, clock: float) -> Candidate | None:
    """With offload under a memory limit, the best offload-gated schedule
    (`solver.heuristics.offload_gated`) that fits; None otherwise."""
    if not problem.offload or problem.instance.memory_limit is None:
        return None
    found = (
        as_candidate(problem, OFFLOAD_GATED, schedule, clock)
        for schedule in offload_gated_schedules(problem.instance, problem.split)
    )
    return preferred([candidate for candidate in found if candidate is not None])


def preferred(candidates: Sequence[Candidate], within: float = 0.0) -> Candidate | None:
    """The best value; among values equal to it (within `models.tolerance`), or up to `within` of it
    more, the lowest peak memory, then the first."""
    if not candidates:
        return None
    least = min(candidate.value for candidate in candidates)
    ties = [c for c in candidates if fits(c.value, least * (1 + within))]
    return min(ties, key=lambda c: c.peak)


def as_candidate(problem: Problem, name: str, schedule: Schedule, clock: float) -> Candidate | None:
    """The schedule's order for this problem (W split out after each B of a fused schedule), re-timed;
    with offload, a schedule that offloads keeps its transfers (timed with its plan), so that a
    handwritten offload schedule can start the search: re-timed without them it would not fit."""
    orders = schedule.orders()
    if problem.offload and schedule.transfers and schedule.split_backward == problem.split:
        timed = problem.timed(orders, name=name, transfers=transfer_plan_of(schedule))
        return problem.candidate(name, timed.with_source(kind="heuristic", name=name), time.monotonic() - clock)
    if schedule.split_backward != problem.split:
        if not problem.split:
            return None  # a schedule with separate W ops is not a fused-backward schedule
        orders = [[part for step in order for part in split_out_weight(step)] for order in orders]
        name = f"{SCHEDULE_TITLES.get(name, name)}{SPLIT_OUT}"
    try:
        timed = problem.timed(orders, name=name).with_source(kind="heuristic", name=name)
    except PipesatError:
        return None
    return problem.candidate(name, timed, time.monotonic() - clock)
