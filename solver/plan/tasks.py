"""One configuration's work in a plan, as a worker runs it: *bound* it (refused by memory, or its
lower bounds), *assess* it (its best handwritten schedule, validated and measured), and *solve* it
(CP-SAT for the time the plan gives it); `Found` and `Assessment` are what each comes to.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass

from pipesat.models import InstanceError, Objective, PipesatError, Schedule, Status
from pipesat.models.plan_result import Configuration, Measure, MemoryFit, RuntimeBest
from pipesat.models.tolerance import fits
from pipesat.models.tuning import DEFAULT_TUNING, Tuning
from pipesat.solver.evaluate.bounds import lower_bound, resolve_split
from pipesat.solver.evaluate.validator import ensure_valid
from pipesat.solver.heuristics import handwritten_schedules, memory_gated, one_at_a_time, periodic
from pipesat.solver.instances.calibration import Calibration
from pipesat.solver.instances.from_model import Derivation
from pipesat.solver.plan.measure import fixed_ms, measure
from pipesat.solver.plan.memory_fit import Fitted, fit_layout
from pipesat.solver.plan.offload import family_schedules, host_link, offloading, offloads
from pipesat.solver.plan.runtime_bests import config_bests, fused_candidates, runtime_candidates
from pipesat.solver.plan.runtimes import RUNTIMES, bounds_on_span, iterates_on_span
from pipesat.solver.plan.schedules import allowed_handwritten, allows, unmet_text
from pipesat.solver.plan.space import description
from pipesat.solver.plan.spec import PlanSpec
from pipesat.solver.portfolio import (
    Problem,
    memory_gated_candidate,
    periodic_candidate,
    preferred,
    starting_candidates,
)
from pipesat.solver.solve import solve

LOG = logging.getLogger(__name__)
WALL_LIMITED = 0.95
"""A solve that ran this part of its wall-time share or more was (taken as) stopped by the wall clock."""
DETERMINISTIC_SHARE = 0.5
"""A solve's share of the budget is wall time; CP-SAT's deterministic time runs slower than the wall
clock when the solves share the cores (benchmarks/experiments/2026-11-24_plan-time-budget), so a
solve gets this part of its share in deterministic time and is stopped at its whole share of wall
time. Within it, runs are identical; stopped by the wall clock, the plan says its result may differ."""

SCHEDULE_TIE = 0.005
"""Schedules of one configuration whose makespans are within this fraction of the fastest's are taken
as equal, and the one holding the least memory is kept (`assess`; a solve's result against its start,
`search`): their ops take the same times, so the difference is the order's alone. A policy, trading
at most half a percent on paper for headroom the model does not count (allocator fragmentation,
workspaces), where the fastest order often fills the budget."""


@dataclass(frozen=True)
class Found:
    """A configuration with a schedule: the schedule (validated), who made it and its status, its
    makespan's lower bound, and the measure. `settled`: a schedule of it that meets its bound is known,
    and this one, within SCHEDULE_TIE of it, was kept for its memory; a search cannot do better."""

    config: Configuration
    schedule: Schedule
    made_by: str
    status: Status
    makespan_bound: float
    measure: Measure
    wall_limited: bool = False
    settled: bool = False
    memory_fit: MemoryFit = MemoryFit.FITS
    span_bound: float | None = None

    @property
    def fixed_ms(self) -> float:
        """What the iteration adds to the makespan, as `measure.fixed_ms` gives it before any schedule."""
        return self.measure.exchange_ms + self.measure.optimizer_ms

    @property
    def iteration_bound(self) -> float:
        """A lower bound on the iteration: the makespan's bound, or the span's (`span_bound`) where the
        runtime may time a schedule by its span (`measure`), plus the fixed terms."""
        return schedule_bound(self.makespan_bound, self.span_bound) + self.fixed_ms

    @property
    def optimal(self) -> bool:
        return fits(self.measure.makespan_ms, self.makespan_bound)


@dataclass(frozen=True)
class Assessment:
    """A configuration after step 1: `refused` why none fits (`shape`: the cost model refuses the
    shape itself, so it is not a configuration at all), or its proven lower bound on the makespan
    and the fixed terms, and once scheduled, `found` its best handwritten schedule and
    `runtime_bests` each runtime's best schedule of it."""

    config: Configuration
    found: Found | None = None
    refused: str = ""
    shape: bool = False
    makespan_bound: float = 0.0
    fixed_ms: float = 0.0
    runtime_bests: tuple[RuntimeBest, ...] = ()
    memory_fit: MemoryFit = MemoryFit.FITS
    span_bound: float | None = None

    @property
    def iteration_bound(self) -> float:
        """As `Found.iteration_bound`."""
        return schedule_bound(self.makespan_bound, self.span_bound) + self.fixed_ms


def schedule_bound(makespan_bound: float, span_bound: float | None) -> float:
    """The bound on a schedule's time in the iteration: the span's where one is given (a plan held to
    a runtime that times some schedules by their max span: a bound on the makespan does not bound
    the span, which is at most the makespan), else the makespan's. `optimal` stays the makespan's."""
    return makespan_bound if span_bound is None else span_bound


@dataclass(frozen=True, kw_only=True)
class AssessTask:
    """One configuration to bound or assess; `makespan_bound` its bound when proven already. It
    carries the plan's `tuning` to the worker that runs it."""

    spec: PlanSpec
    config: Configuration
    calibration: Calibration | None = None
    tuning: Tuning = DEFAULT_TUNING
    makespan_bound: float | None = None


@dataclass(frozen=True, kw_only=True)
class SolveTask:
    """One configuration to solve for `time_limit` seconds, with the plan's solve settings."""

    spec: PlanSpec
    config: Configuration
    time_limit: float
    seed: int
    workers: int
    cpsat_params: Mapping[str, str] = dataclasses.field(default_factory=dict)
    calibration: Calibration | None = None
    tuning: Tuning = DEFAULT_TUNING


def _fitted(spec: PlanSpec, config: Configuration, calibration: Calibration | None) -> Fitted:
    """The configuration's layout fitted to its GPUs' memory (`memory_fit`): the derivation it is
    searched with (a tight one's under the stretched budgets), or why it is refused."""
    return fit_layout(
        description(spec, config), config.label, calibration, host_link(config, spec.cluster.host_link_bandwidth)
    )


def _checked(task: AssessTask) -> Assessment | Fitted:
    """The configuration fitted to its GPUs' memory, or the assessment that refuses it: a shape the
    cost model refuses or none of the allowed schedules runs (`training.schedules`: left out as a
    shape), model state or activations beyond a device's budget by more than the memory estimate's
    error."""
    spec, config = task.spec, task.config
    try:
        fitted = _fitted(spec, config, task.calibration)
    except InstanceError as error:
        return Assessment(config, refused=str(error), shape=True)
    if fitted.derivation is None:
        return Assessment(config, refused=fitted.why, memory_fit=MemoryFit.REFUSED)
    if spec.schedules is not None:
        unmet = unmet_text(spec.schedules, fitted.derivation.instance)
        if unmet:
            return Assessment(config, refused=unmet, shape=True)
    return fitted


def _problem(derivation: Derivation, tuning: Tuning) -> Problem:
    """The configuration's problem; it may offload where the plan gave its instance a host link (a
    configuration that offloads: `offload.linked`)."""
    instance = derivation.instance
    offload = instance.host_link_bandwidth is not None
    return Problem(
        instance=instance,
        objective=Objective.MAKESPAN,
        minimize_memory=False,
        split=resolve_split(instance, None),
        time_cap=None,
        symmetry_breaking=not offload,
        tuning=tuning,
        offload=offload,
    )


def _span_bound(spec: PlanSpec, problem: Problem) -> float | None:
    """The proven lower bound on the max span where the spec's runtime times some schedules by it
    (`runtimes.bounds_on_span`), else None."""
    if not bounds_on_span(spec.runtime):
        return None
    return lower_bound(problem.instance, Objective.SPAN, problem.split, tuning=problem.tuning)


def bound(task: AssessTask) -> Assessment:
    """Step 1's bound for one configuration (runs in a worker): refused, or its lower bounds."""
    LOG.info("bound %s", task.config.label)
    checked = _checked(task)
    if isinstance(checked, Assessment):
        return checked
    derivation = checked.derivation
    assert derivation is not None  # a refused layout is an Assessment
    fixed = fixed_ms(task.spec, task.config, derivation)
    problem = _problem(derivation, task.tuning)
    return Assessment(
        task.config,
        makespan_bound=problem.lower_bound(),
        fixed_ms=fixed,
        memory_fit=checked.fit,
        span_bound=_span_bound(task.spec, problem),
    )


def assess(task: AssessTask) -> Assessment:
    """Step 1 for one configuration (runs in a worker): refused, or its bounds and best handwritten
    schedule; where none fits, the best of pipesat's periodic schedule, its memory-gated one (of a
    linear or interleaved pipeline) and the one-at-a-time one (offloading everything, for a
    configuration that offloads, when nothing else fits); with offload, PipeOffload's family in place of
    the handwritten schedules (`offload.family_schedules`); of those only what `training.schedules`
    allows (refused by memory when none of them fits), and held to a runtime that does not split
    weights, its schedules with B one op (`runtime_bests`). Besides, each runtime's best schedule of
    it, from every handwritten one (`runtime_bests.config_bests`)."""
    spec, config = task.spec, task.config
    LOG.info("assess %s", config.label)
    checked = _checked(task)
    if isinstance(checked, Assessment):
        return checked
    derivation = checked.derivation
    assert derivation is not None  # a refused layout is an Assessment
    problem = _problem(derivation, task.tuning)
    clock = time.monotonic()
    allowed = spec.schedules
    every = handwritten_schedules(derivation.instance)
    handwritten, others = allowed_handwritten(allowed, every)
    if offloads(config):  # PipeOffload's family of its offload and placement, not the orders without offload
        handwritten = family_schedules(config, derivation.instance, allowed)
    candidates = starting_candidates(problem, handwritten, [], clock)
    candidates = [item for item in candidates if item.name != one_at_a_time.NAME or allows(allowed, item.name)]
    fused = fused_candidates(problem, every)
    runtime = RUNTIMES.get(spec.runtime)
    if runtime is not None and not runtime.splits_weights:
        candidates = runtime_candidates(runtime, candidates, fused)
    if not any(candidate.handwritten for candidate in candidates):
        # Under a tight budget the one-at-a-time schedule is many times the bound; the periodic one
        # keeps several microbatches in flight within it (seconds for 10,000 ops).
        # Of a linear or interleaved pipeline, the memory-gated start keeps 1F1B's or Megatron's op sequences.
        starts = (
            periodic_candidate(problem, clock) if allows(allowed, periodic.NAME) else None,
            memory_gated_candidate(problem, clock) if allows(allowed, memory_gated.NAME) else None,
        )
        candidates += [start for start in starts if start is not None]
    if offloads(config):
        candidates = offloading(problem, candidates, clock)
    split = list(candidates)
    if others:  # the comparison's too (`runtime_bests`), not the start it adds where none of them fits
        split += [item for item in starting_candidates(problem, others, [], clock) if item.handwritten]
    bests = config_bests(spec, config, derivation, split, fused)
    best = preferred(candidates, within=SCHEDULE_TIE)
    if best is None:  # without a restriction, cannot happen: one-at-a-time fits every feasible limit
        refused = "no schedule of training.schedules fits the memory budgets"
        return Assessment(config, refused=refused, runtime_bests=bests)
    schedule = ensure_valid(best.schedule)
    makespan_bound = problem.lower_bound() if task.makespan_bound is None else task.makespan_bound
    fastest = min(candidate.value for candidate in candidates)
    found = Found(
        config,
        schedule,
        best.name,
        Status.FEASIBLE,
        makespan_bound,
        measure(
            spec,
            config,
            derivation,
            schedule,
            on_span=iterates_on_span(spec.runtime, best.name, spec.training.bytes_per_value),
        ),
        settled=fits(fastest, makespan_bound),
        memory_fit=checked.fit,
        span_bound=_span_bound(spec, problem),
    )
    found = dataclasses.replace(found, status=Status.OPTIMAL if found.optimal else Status.FEASIBLE)
    return Assessment(
        config,
        found=found,
        makespan_bound=makespan_bound,
        fixed_ms=found.fixed_ms,
        runtime_bests=bests,
        memory_fit=checked.fit,
        span_bound=found.span_bound,
    )


def solve_config(task: SolveTask) -> Found:
    """Step 3 for one configuration: CP-SAT for `time_limit` seconds (runs in a worker)."""
    spec, config = task.spec, task.config
    LOG.info("solve %s for %.3g s", config.label, task.time_limit)
    fitted = _fitted(spec, config, task.calibration)  # the budgets its assessment had
    derivation = fitted.derivation
    if derivation is None:
        raise PipesatError(f"{config.label}: {fitted.why}")
    result = solve(
        derivation.instance,
        objective="makespan",
        time_limit=task.time_limit * DETERMINISTIC_SHARE,
        workers=task.workers,
        seed=task.seed,
        deterministic=True,
        wall_factor=1 / DETERMINISTIC_SHARE,
        cpsat_params=task.cpsat_params,
        tuning=task.tuning,
        offload=offloads(config),
    )
    if result.schedule is None or result.bound is None:
        if result.status == Status.INTERRUPTED:
            raise KeyboardInterrupt  # stopped before it had a schedule: no result (`executors`)
        raise PipesatError(f"{config.label}: the solve found no schedule ({result.status.value}: {result.reason})")
    schedule = ensure_valid(result.schedule)
    made_by = str(schedule.source.get("made_by") or "cp-sat")
    return Found(
        config,
        schedule,
        made_by,
        result.status,
        result.bound,
        measure(spec, config, derivation, schedule),
        wall_limited=result.solve_time >= WALL_LIMITED * task.time_limit,
        memory_fit=fitted.fit,
        span_bound=_span_bound(spec, _problem(derivation, task.tuning)),
    )
