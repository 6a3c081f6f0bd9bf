"""The solve: CP-SAT warm-started from the heuristics and bounded by the analytic lower bounds.

Steps: check the memory limit against the smallest feasible one (exact, `solver.evaluate.bounds`); time
every applicable heuristic (and any extra starting schedules) on the instance, keep those that fit the
limit (`solver.portfolio`); when the best leaves room to the lower bound, add the best periodic
schedule (every period of its grid: the same start whatever the time limit); if the best meets the bound it is optimal and no search runs.
Otherwise build the CP-SAT model (`solver.cpsat`), give it the best one as a complete hint, put
[lower bound, its value] into the objective's domain, and search until the deadline (a search that
stalls near its bound hands the rest of its time to bisection probes, `solver.cpsat.probes`): a watchdog
stops CP-SAT there, so the wall time, heuristics and model building included, honours the time
limit. The model's best per-device order is re-timed at the instance's exact float times (the
simulator for the makespan, `retime` for the max span) and validated; the value comes from
`solver.evaluate.metrics`. The result is never worse than the best starting schedule: when the
search does not beat it, that schedule is returned with the search's bound. A max-span solve first
runs a shorter makespan solve (not on a V placement) and starts from its order too; where every
schedule's max span is its makespan (`span_is_makespan`) the makespan solve is the whole solve, and
on one route with W apart it may first prove a bound (`solver.span_phases` says
where): the optimum makespan of the instance whose makespan is at most stage 0's device's span
(`first_device_instance`), a model CP-SAT settles far sooner than the span's. The smallest feasible
memory limit is known exactly (`minimum_memory_limits`), so an impossible limit is reported without a
search.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pipesat.models import (
    TIME_OBJECTIVES,
    Instance,
    Minimize,
    Objective,
    OptionError,
    Schedule,
    Status,
    expected_op_keys,
)
from pipesat.models.host_link import check_offload
from pipesat.models.limits import check_model_size
from pipesat.models.solve_result import Infeasibility, InfeasibleReason, SolveResult, StopReason
from pipesat.models.tolerance import fits
from pipesat.models.tuning import DEFAULT_TUNING, Tuning
from pipesat.solver.cpsat.data import model_data
from pipesat.solver.cpsat.model import build_model
from pipesat.solver.cpsat.parameters import cpsat_parameters
from pipesat.solver.cpsat.processes import available_cores
from pipesat.solver.cpsat.record import Progress
from pipesat.solver.cpsat.search import INTERRUPTED, search
from pipesat.solver.cpsat.search_parameters import SearchOptions
from pipesat.solver.cpsat.warm_start import tick_value, warm_start
from pipesat.solver.evaluate.bounds import (
    first_device_instance,
    resolve_split,
    span_is_makespan,
)
from pipesat.solver.evaluate.simulator import transfer_plan_of
from pipesat.solver.heuristics import handwritten_schedules
from pipesat.solver.portfolio import (
    Candidate,
    Problem,
    as_candidate,
    memory_gated_candidate,
    offload_gated_candidate,
    one_at_a_time_candidate,
    periodic_candidate,
    preferred,
    starting_candidates,
)
from pipesat.solver.problem_bounds import bound_origin, bounds_infeasibility
from pipesat.solver.result import meets, no_schedule, schedule_result
from pipesat.solver.span_phases import first_device_phase_applies, makespan_phase_applies

MINIMIZE = tuple(Minimize)
MAKESPAN_PHASE_NAME = "cp-sat (makespan)"
LOG = logging.getLogger(__name__)


def solve(
    instance: Instance,
    objective: Objective | str = Objective.MAKESPAN,
    minimize: Minimize | str = Minimize.TIME,
    time_limit: float = 10.0,
    workers: int | None = None,
    seed: int = 0,
    deterministic: bool = False,
    gap: float = 0.0,
    symmetry_breaking: bool = True,
    split_backward: bool | None = None,
    makespan_cap: float | None = None,
    progress: Progress | None = None,
    starts: Sequence[Schedule] = (),
    known_bound: float | None = None,
    wall_factor: float = 10.0,
    cpsat_params: Mapping[str, str] | None = None,
    tuning: Tuning = DEFAULT_TUNING,
    offload: bool = False,
) -> SolveResult:
    """The best schedule CP-SAT finds within `time_limit` seconds, with its proof. A deterministic solve
    gives the same result every run (the limit counts CP-SAT's deterministic time; the wall clock stops
    it at `wall_factor` times the limit); a long max-span solve may first search the makespan
    (`Tuning.makespan_phase`, `first_device_phase`). What a solve decides goes to the `pipesat` loggers.

    Parameters
    ----------
    instance
        What is scheduled, under its memory limit.
    objective, minimize
        `makespan` or `span` (max span); `time`, or `memory` (the peak; the time within `makespan_cap`).
    time_limit, workers
        Seconds CP-SAT may search; its search workers (None: the cores this process may use).
    seed, deterministic, gap, symmetry_breaking, split_backward
        CP-SAT's random seed; the same result every run; stop at this relative gap; break the symmetry
        of equal stages; schedule W apart (None: when the instance has weight times).
    makespan_cap, progress, starts, known_bound
        With memory minimised, the most time (instance units); called with each better schedule;
        extra starting schedules; a lower bound on the objective proven elsewhere.
    wall_factor, cpsat_params, tuning, offload
        The wall-clock stop of a deterministic solve; CP-SAT's own parameters (after pipesat's);
        pipesat's settings (`models.tuning`); offload activations over the host link (docs/offload.md).

    Returns
    -------
    SolveResult
        The schedule (validated), status, value and bound (instance units); `infeasibility` without one.

    Raises
    ------
    OptionError
        An option out of its range (time limit, workers, gap, a cap without `minimize="memory"`).
    """
    clock = time.monotonic()
    workers = available_cores() if workers is None else workers
    _check_options(objective, minimize, time_limit, workers, seed, gap, makespan_cap)
    if offload:
        check_offload(instance.host_link_bandwidth, objective, minimize)
    objective, minimize = Objective(objective), Minimize(minimize)
    split = resolve_split(instance, split_backward)
    check_model_size(len(expected_op_keys(instance, split)))
    if minimize == Minimize.MEMORY:
        instance = instance.with_limit(None)
    problem = Problem(
        instance=instance,
        objective=objective,
        minimize_memory=minimize == Minimize.MEMORY,
        split=split,
        time_cap=makespan_cap,
        symmetry_breaking=symmetry_breaking,
        known_bound=known_bound,
        tuning=tuning,
        offload=offload,
    )
    parameters = cpsat_parameters(cpsat_params or {})
    LOG.info("tuning: %s", tuning.describe())
    why = bounds_infeasibility(problem)
    if why is not None:
        LOG.info("no search: the analytic bounds show that no schedule fits (%s)", why.reason)
        smallest = why.least if why.reason == InfeasibleReason.MEMORY_LIMIT else None
        reason = "shown by the analytic bounds; no search ran"
        return no_schedule(problem, Status.INFEASIBLE, clock, StopReason.BOUNDS, reason, why, smallest)
    options = SearchOptions(
        workers=workers,
        seed=seed,
        deterministic=deterministic,
        gap=gap,
        deadline=clock + time_limit,
        time_limit=time_limit,
        wall_factor=wall_factor,
        cpsat_params=parameters,
        tuning=tuning,
    )
    run = _Solve(problem, options, clock, progress, tuple(starts))
    try:
        # A solve that may offload starts from the offload schedules too (PipeOffload's, docs/offload.md).
        return run.run(handwritten_schedules(instance, offload=offload))
    except KeyboardInterrupt:
        return run.stopped()


def _check_options(
    objective: Objective | str,
    minimize: Minimize | str,
    time_limit: float,
    workers: int,
    seed: int,
    gap: float,
    cap: float | None,
) -> None:
    if objective not in TIME_OBJECTIVES:
        raise OptionError(f"unknown objective {objective!r}; use one of {', '.join(TIME_OBJECTIVES)}")
    if minimize not in MINIMIZE:
        raise OptionError(f"unknown quantity to minimize {minimize!r}; use time or memory")
    if not time_limit > 0:
        raise OptionError(f"the time limit must be positive, got {time_limit:g} seconds")
    if workers < 1:
        raise OptionError(f"workers must be at least 1, got {workers}")
    if not 0 <= seed < 2**31:
        raise OptionError(f"the seed must be in 0..{2**31 - 1} (CP-SAT's random seed), got {seed}")
    if not (math.isfinite(gap) and gap >= 0):
        raise OptionError(f"the gap to stop at must be a fraction of at least 0 (0.05: 5% over the bound), got {gap:g}")
    if cap is not None and minimize != Minimize.MEMORY:
        raise OptionError("a makespan cap applies only when minimizing memory; drop it or minimize memory")
    if cap is not None and not cap > 0:
        raise OptionError(f"the makespan cap must be positive, got {cap:g}")


@dataclass(frozen=True)
class _Solve:
    """One solve: what it solves, how long and how it searches, its clock (`time.monotonic()` when it
    began) and progress callback, and what it starts from: the handwritten (name, schedule) pairs,
    then the other schedules given. The span's makespan phase is the same solve with another problem,
    deadline, clock and progress. The problem is known feasible as far as the analytic bounds tell
    (`bounds_infeasibility`)."""

    problem: Problem
    options: SearchOptions
    clock: float
    progress: Progress | None
    others: Sequence[Schedule]
    found: list[Candidate] = dataclasses.field(default_factory=list)

    def run(self, handwritten: Sequence[tuple[str, Schedule]]) -> SolveResult:
        """The result, naming the best handwritten schedule that fits."""
        problem = self.problem
        span = problem.objective == Objective.SPAN and not problem.minimize_memory
        if span and span_is_makespan(problem.instance, problem.split):
            return self._span_as_makespan(handwritten)
        bound = problem.lower_bound()
        if LOG.isEnabledFor(logging.INFO):
            label = problem.result_objective.label
            LOG.info("lower bound on the %s: %g, %s", label, bound, bound_origin(problem, bound))
        candidates = starting_candidates(problem, handwritten, self.others, self.clock)
        self.found.extend(candidates)
        best_handwritten = preferred([candidate for candidate in candidates if candidate.handwritten])
        result = self._improve(candidates, bound, handwritten)
        if best_handwritten is None:
            return result
        return dataclasses.replace(result, best_heuristic=best_handwritten.named_value)

    def stopped(self) -> SolveResult:
        """The result of a solve interrupted (Ctrl-C, SIGTERM) outside the search: the best schedule in
        hand, or the one-at-a-time schedule when none is yet."""
        problem = self.problem
        best = preferred(self.found) or one_at_a_time_candidate(problem, self.clock)
        if best is None:
            return self._empty(Status.INTERRUPTED, StopReason.INTERRUPT, INTERRUPTED)
        bound = problem.lower_bound()
        result = schedule_result(
            self.problem,
            self.clock,
            best,
            best,
            min(bound, best.value),
            StopReason.INTERRUPT,
            INTERRUPTED,
            searched=False,
        )
        best_handwritten = preferred([candidate for candidate in self.found if candidate.handwritten])
        if best_handwritten is None:
            return result
        return dataclasses.replace(result, best_heuristic=best_handwritten.named_value)

    def _improve(
        self, candidates: list[Candidate], bound: float, handwritten: Sequence[tuple[str, Schedule]]
    ) -> SolveResult:
        """From the starting `candidates` to the result: for a max span on one route with W apart, when
        the best start leaves room, first the bound from stage 0's device (`Tuning.first_device_phase`)."""
        problem, options = self.problem, self.options
        share = problem.tuning.first_device_phase
        best = preferred(candidates)
        if not first_device_phase_applies(problem, best, bound, options.gap):
            return self._search_from(candidates, bound, handwritten)
        phase = self._phase(
            dataclasses.replace(problem, instance=first_device_instance(problem.instance), known_bound=None),
            share,
            "span solve, phase 0: a bound from stage 0's device, the makespan with every W off it free",
            best,
            bound,
            handwritten,
        )
        if phase.status == Status.INTERRUPTED:
            return self._interrupted_in_phase(best, best, bound)
        if phase.bound is not None and phase.bound > bound:
            LOG.info("lower bound on the max span: %g, stage 0's device's span (proven in phase 0)", phase.bound)
            bound = phase.bound
        rest = self
        if options.deterministic:  # the rest gets the rest of the time limit, whatever the wall clock says
            rest = dataclasses.replace(self, options=options.share(1 - share))
        return rest._search_from(candidates, bound, handwritten)

    def _search_from(
        self, candidates: list[Candidate], bound: float, handwritten: Sequence[tuple[str, Schedule]]
    ) -> SolveResult:
        """From the best of the starting `candidates` to the result: a periodic start where they leave
        room, a makespan phase for the span of a larger model, then the search."""
        problem, options = self.problem, self.options
        best = preferred(candidates)
        if best is None or not meets(best.value, bound, options.gap):
            # The heuristics leave room: a periodic schedule may fill it (it does under tight limits),
            # of a linear or interleaved pipeline the memory-gated one, and with offload the
            # offload-gated one; all depend on the instance alone, never on the time limit.
            found = periodic_candidate(problem, self.clock)
            LOG.info("periodic start: %s", "none fits" if found is None else f"{found.value:g}")
            gated = [memory_gated_candidate(problem, self.clock), offload_gated_candidate(problem, self.clock)]
            for start in (start for start in gated if start is not None):
                LOG.info("%s start: %g", start.name, start.value)
            more = [start for start in (found, *gated) if start is not None]
            self.found.extend(more)
            best = preferred([*candidates, *more])
        LOG.info("best start: %s", "none" if best is None else f"{best.name} = {best.value:g}")
        if best is not None:
            if self.progress is not None:
                try:
                    self.progress(time.monotonic() - self.clock, best.value, bound)
                except KeyboardInterrupt:
                    return schedule_result(
                        self.problem, self.clock, best, best, bound, StopReason.INTERRUPT, INTERRUPTED, searched=False
                    )
            if meets(best.value, bound, options.gap):
                return self._meets_bound(best, best, bound, "no search", searched=False)
        lead, search = best, self
        if makespan_phase_applies(problem):
            phase = self._makespan_phase(best, bound, handwritten)
            if options.deterministic:  # the search gets the rest of the time limit, whatever the wall clock says
                search = dataclasses.replace(self, options=options.share(1 - problem.tuning.makespan_phase))
            found = None
            if phase.schedule is not None:
                found = as_candidate(problem, MAKESPAN_PHASE_NAME, phase.schedule, self.clock)
            if found is not None and (lead is None or found.value < lead.value):
                lead = found
                self.found.append(found)
            if phase.status == Status.INTERRUPTED:
                return self._interrupted_in_phase(lead, best, bound)
            if lead is not None and meets(lead.value, bound, options.gap):
                return self._meets_bound(lead, best, bound, "no phase 2", searched=True)
            LOG.info("span solve, phase 2: the max span, from %s", "no schedule" if lead is None else lead.name)
        return search._search(best, lead, bound)

    def _meets_bound(
        self, chosen: Candidate, start: Candidate | None, bound: float, skipped: str, searched: bool
    ) -> SolveResult:
        """The result returning `chosen`, which meets `bound` or is within the gap, so that what is
        `skipped` (logged so) need not run."""
        met = "meets the lower bound" if fits(chosen.value, bound) else "is within the gap"
        LOG.info("%s: %s %s", skipped, chosen.name, met)
        return schedule_result(
            self.problem, self.clock, chosen, start, bound, StopReason.BOUNDS, f"{chosen.name} {met}", searched=searched
        )

    def _interrupted_in_phase(self, chosen: Candidate | None, start: Candidate | None, bound: float) -> SolveResult:
        """The result of a span solve interrupted in one of its phases: `chosen`, the best in hand."""
        if chosen is None:
            return self._empty(Status.INTERRUPTED, StopReason.INTERRUPT, INTERRUPTED)
        return schedule_result(
            self.problem, self.clock, chosen, start, bound, StopReason.INTERRUPT, INTERRUPTED, searched=True
        )

    def _makespan_phase(
        self, best: Candidate | None, bound: float, handwritten: Sequence[tuple[str, Schedule]]
    ) -> SolveResult:
        """The makespan solve, in `Tuning.makespan_phase` of the time: the makespan model searches far
        better, and its best order re-timed for the span may lead the span's search."""
        problem = self.problem
        share = problem.tuning.makespan_phase
        return self._phase(problem, share, "span solve, phase 1: the makespan", best, bound, handwritten)

    def _phase(
        self,
        problem: Problem,
        share: float,
        what: str,
        best: Candidate | None,
        bound: float,
        handwritten: Sequence[tuple[str, Schedule]],
    ) -> SolveResult:
        """A max-span solve's phase: the makespan solve of `problem` in `share` of the time
        (`SearchOptions.share`), logged as `what`, whose progress reports show the span's best value
        (`best`'s) and `bound`."""
        progress = self.progress
        start_value = None if best is None else best.value
        report = None
        if progress is not None:

            def report(*_: float | None) -> None:
                progress(time.monotonic() - self.clock, start_value, bound)

        options = self.options.share(share)
        LOG.info("%s for %.3g s", what, options.time_limit)
        phase = dataclasses.replace(
            self,
            problem=dataclasses.replace(problem, objective=Objective.MAKESPAN),
            options=options,
            clock=time.monotonic(),
            progress=report,
            found=[],
        )
        return phase.run(handwritten)

    def _span_as_makespan(self, handwritten: Sequence[tuple[str, Schedule]]) -> SolveResult:
        """The span solve where every schedule's max span is its makespan (`span_is_makespan`): the
        makespan solve, with all the time, the solve's clock, progress and starts, its schedule
        re-timed for the span and its proof (a bound on every makespan is one on every max span)."""
        LOG.info("span solve: every schedule's max span is its makespan here; the makespan solve is the solve")
        problem = self.problem
        solved = dataclasses.replace(self, problem=dataclasses.replace(problem, objective=Objective.MAKESPAN)).run(
            handwritten
        )
        chosen = None
        if solved.schedule is not None:
            chosen = as_candidate(problem, solved.schedule.source["made_by"], solved.schedule, self.clock)
        if chosen is None:
            why = solved.infeasibility
            why = None if why is None else dataclasses.replace(why, time_objective=problem.objective)
            return dataclasses.replace(solved, objective=problem.result_objective, infeasibility=why)
        stopped_by, reason = solved.stopped_by, solved.reason
        assert stopped_by is not None and reason is not None  # every result of a solve says why it ended
        assert solved.bound is not None and solved.time_to_best is not None  # as every result with a schedule
        result = schedule_result(
            self.problem,
            self.clock,
            dataclasses.replace(chosen, found_at=solved.time_to_best),
            None,
            max(solved.bound, problem.lower_bound()),
            stopped_by,
            reason,
            searched=solved.searched,
            time_to_first=solved.time_to_first,
            resolution=solved.resolution,
        )
        return dataclasses.replace(result, starting_point=solved.starting_point, best_heuristic=solved.best_heuristic)

    def _search(self, best: Candidate | None, lead: Candidate | None, bound: float) -> SolveResult:
        """CP-SAT from `lead` (the best schedule so far; `best` is the best start, for the report)."""
        problem = self.problem
        if lead is not None and not self.options.deterministic and time.monotonic() >= self.options.deadline:
            late = "the time limit ran out before the search"
            return schedule_result(
                self.problem, self.clock, lead, best, bound, StopReason.TIME_LIMIT, late, searched=True
            )
        model = build_model(
            model_data(
                problem.instance,
                objective=problem.objective,
                split_backward=problem.split,
                symmetry_breaking=problem.symmetry_breaking,
                minimize_memory=problem.minimize_memory,
                time_cap=problem.time_cap,
                tuning=problem.tuning,
                offload=problem.offload,
            )
        )
        plan = transfer_plan_of(lead.schedule) if lead is not None and lead.schedule.transfers else None
        objective_range = warm_start(model, None if lead is None else lead.schedule.orders(), bound, plan)
        start_value = None if lead is None else lead.value
        LOG.info("CP-SAT searches from %s", "no schedule" if lead is None else f"{lead.name} = {lead.value:g}")
        outcome = search(model, self.options, self.clock, bound, start_value, self.progress, objective_range)
        found = None
        if outcome.orders is not None:
            timed = problem.timed(outcome.orders, name="cp-sat", transfers=outcome.transfers)
            found = problem.candidate("cp-sat", timed, outcome.found_at or 0.0)
        chosen = found if found is not None and (lead is None or found.value < lead.value) else lead
        if chosen is None:
            status = Status.INTERRUPTED if outcome.interrupted else Status.UNKNOWN
            why = None
            if not outcome.interrupted and outcome.infeasible:
                status, why = (
                    Status.INFEASIBLE,
                    Infeasibility(InfeasibleReason.PROVEN, problem.objective, problem.time_cap),
                )
            return self._empty(status, outcome.stopped_by, outcome.reason, why)
        LOG.info("kept: %s = %g", chosen.name, chosen.value)
        first = next((start.found_at for start in (best, lead) if start is not None), outcome.first_at)
        resolution = None
        # The tick value of an order leaves its transfers out: with offload, no resolution is claimed.
        optimum = None if problem.offload else outcome.tick_optimum
        if optimum is not None and tick_value(model, chosen.schedule.orders()) <= optimum:
            resolution = 1 / model.data.ticks_per_unit  # the order is optimal for the times in whole ticks
        ending = (outcome.stopped_by, outcome.reason)
        return schedule_result(
            self.problem,
            self.clock,
            chosen,
            best,
            outcome.bound,
            *ending,
            searched=True,
            time_to_first=first,
            resolution=resolution,
        )

    def _empty(
        self, status: Status, stopped_by: StopReason, reason: str, infeasibility: Infeasibility | None = None
    ) -> SolveResult:
        return no_schedule(self.problem, status, self.clock, stopped_by, reason, infeasibility)
