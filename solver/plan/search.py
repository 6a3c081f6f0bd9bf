"""The plan's exact search: every configuration's best handwritten schedule, its lower bound, and
CP-SAT only where a configuration may still beat the best found.

1. **Assess** every configuration (in parallel, cheap): derive its instance; refuse it by memory when
   its model state does not fit a GPU or its smallest feasible activation limit exceeds a device's
   budget (exact, `solver.evaluate.bounds`); else time every handwritten schedule that fits (the
   one-at-a-time schedule when none does: it fits every feasible limit), keep the best, and prove a
   lower bound on the makespan under the budgets. Iteration time = makespan + the fixed
   gradient-reduction and optimizer terms (`measure`), so the bound on the iteration is the
   makespan's bound plus those terms.
2. **Prune**: the best iteration time found so far is an upper bound on the answer; a configuration
   whose lower bound is no better than it cannot win and is skipped. A configuration whose schedule
   meets its own bound is solved already.
3. **Solve** the rest with CP-SAT, most promising (lowest bound) first, in waves of as many solves as
   run at once; each wave gets an equal share of what is left of the budget for the waves left
   (so pruning gives later waves more), and after each wave the queue is pruned again.

Every schedule is validated before it is measured. Runs are deterministic for a seed: solves use
CP-SAT's deterministic time, the shares are computed from the budget and the counts (not from the
clock) unless the budget runs out, and every order is a total order on the configurations.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from pipesat.models import InstanceError, Objective, PipesatError, Schedule
from pipesat.models.plan_result import ConfigResult, Configuration, Measure, Outcome, PlanResult
from pipesat.models.tolerance import fits
from pipesat.models.units import memory_text
from pipesat.solver.evaluate.bounds import minimum_memory_limits, resolve_split
from pipesat.solver.evaluate.metrics import relative_gap
from pipesat.solver.evaluate.validator import ensure_valid
from pipesat.solver.heuristics import handwritten_schedules
from pipesat.solver.instances.from_model import Derivation, derive
from pipesat.solver.plan.executors import Executor
from pipesat.solver.plan.measure import fixed_ms, measure, usable_memory
from pipesat.solver.plan.space import description, enumerate_space
from pipesat.solver.plan.spec import PlanSpec
from pipesat.solver.portfolio import Problem, preferred, starting_candidates
from pipesat.solver.solve import solve

PHASE1_SHARE = 0.2
"""The share of the budget kept for the assessments; the solves share the rest."""
MIN_SOLVE_SECONDS = 0.5
"""A solve given less than this is not started: its configuration keeps its handwritten schedule."""
WALL_MARGIN = 1.0
"""Seconds kept back from the budget for measuring, ranking and saving after the last wave."""
WALL_LIMITED = 0.95
"""A solve that ran this part of its wall-time share or more was (taken as) stopped by the wall clock."""
DETERMINISTIC_SHARE = 0.5
"""A solve's share of the budget is wall time; CP-SAT's deterministic time runs slower than the wall
clock when the solves share the cores (about 1.75x with two on two cores), so a solve gets this part
of its share in deterministic time and is stopped at its whole share of wall time. Within it, runs
are identical; stopped by the wall clock, the plan says its result may differ."""


@dataclass(frozen=True)
class Found:
    """A configuration with a schedule: the schedule (validated), who made it and its status, its
    makespan's lower bound and the fixed terms, and the measure."""

    config: Configuration
    schedule: Schedule
    made_by: str
    status: str
    makespan_bound: float
    fixed_ms: float
    measure: Measure
    wall_limited: bool = False

    @property
    def iteration_bound(self) -> float:
        return self.makespan_bound + self.fixed_ms

    @property
    def optimal(self) -> bool:
        return fits(self.measure.makespan_ms, self.makespan_bound)


@dataclass(frozen=True)
class Assessment:
    """A configuration after step 1: `found` its best handwritten schedule, or `refused` why none fits
    (`shape`: the cost model refuses the shape itself, so it is not a configuration at all)."""

    config: Configuration
    found: Found | None = None
    refused: str = ""
    shape: bool = False


@dataclass(frozen=True)
class AssessTask:
    spec: PlanSpec
    config: Configuration


@dataclass(frozen=True)
class SolveTask:
    spec: PlanSpec
    config: Configuration
    time_limit: float
    seed: int
    workers: int


@dataclass(frozen=True)
class PlanProgress:
    """Where the plan is: the phase (`assess`, `solve`), tasks done of the phase's total, the best
    iteration time so far (ms), seconds since the start and an estimate of the seconds left."""

    phase: str
    done: int
    total: int
    best_ms: float | None
    elapsed: float
    left: float


def _derive(spec: PlanSpec, config: Configuration) -> Derivation:
    return derive(description(spec, config), name=config.label)


def assess(task: AssessTask) -> Assessment:
    """Step 1 for one configuration (runs in a worker)."""
    spec, config = task.spec, task.config
    try:
        derivation = _derive(spec, config)
    except InstanceError as error:
        without_memory = dataclasses.replace(spec, cluster=dataclasses.replace(spec.cluster, gpu_memory=0.0))
        try:
            _derive(without_memory, config)
        except InstanceError:
            return Assessment(config, refused=str(error), shape=True)
        return Assessment(config, refused=f"model state does not fit: {error}")
    instance = derivation.instance
    limits = instance.memory_limit or []
    for device, (least, limit) in enumerate(zip(minimum_memory_limits(instance), limits, strict=True)):
        if not fits(least, limit):
            return Assessment(
                config,
                refused=f"device {device} needs at least {memory_text(least, 'MiB')} of activations (one microbatch "
                f"through its stages), its budget is {memory_text(limit, 'MiB')}",
            )
    problem = Problem(instance, Objective.MAKESPAN, False, resolve_split(instance, None), None, True)
    best = preferred(starting_candidates(problem, handwritten_schedules(instance), [], time.monotonic()))
    if best is None:  # cannot happen: one-at-a-time fits every feasible limit
        return Assessment(config, refused="no schedule fits the memory budgets")
    schedule = ensure_valid(best.schedule)
    fixed = fixed_ms(spec, config, derivation.states)
    bound = problem.lower_bound()
    found = Found(config, schedule, best.name, "", bound, fixed, measure(spec, config, derivation, schedule))
    return Assessment(config, found=dataclasses.replace(found, status="optimal" if found.optimal else "feasible"))


def solve_config(task: SolveTask) -> Found:
    """Step 3 for one configuration: CP-SAT for `time_limit` seconds (runs in a worker)."""
    spec, config = task.spec, task.config
    derivation = _derive(spec, config)
    result = solve(
        derivation.instance,
        objective="makespan",
        time_limit=task.time_limit * DETERMINISTIC_SHARE,
        workers=task.workers,
        seed=task.seed,
        deterministic=True,
        wall_factor=1 / DETERMINISTIC_SHARE,
    )
    if result.schedule is None or result.bound is None:
        raise PipesatError(f"{config.label}: the solve found no schedule ({result.status.value})")
    schedule = ensure_valid(result.schedule)
    fixed = fixed_ms(spec, config, derivation.states)
    made_by = str(schedule.source.get("made_by") or "cp-sat")
    return Found(
        config,
        schedule,
        made_by,
        result.status.value,
        result.bound,
        fixed,
        measure(spec, config, derivation, schedule),
        wall_limited=result.solve_time >= WALL_LIMITED * task.time_limit,
    )


def plan(
    spec: PlanSpec,
    executor: Executor,
    time_budget: float,
    seed: int = 0,
    cpsat_workers: int = 1,
    progress: Callable[[PlanProgress], None] | None = None,
) -> PlanResult:
    """The best configuration of `spec` and its schedule, every configuration ranked (module notes)."""
    clock = time.monotonic()
    configs, skipped = enumerate_space(spec)
    if not configs:
        why = f": {skipped[0]}" if skipped else ""
        raise InstanceError(f"no configuration of {spec.cluster.gpus} GPUs fits this model and batch{why}")
    tracker = _Tracker(clock, time_budget, executor.parallel, progress)

    tracker.phase("assess", len(configs), None)
    assessments = executor.run(assess, [AssessTask(spec, config) for config in configs], tracker.poll)
    results: dict[Configuration, ConfigResult] = {}
    found: dict[Configuration, Found] = {}
    for assessment in assessments:
        if assessment.shape:
            skipped.append(f"{assessment.config.label}: {assessment.refused}")
        elif assessment.found is None:
            results[assessment.config] = ConfigResult(
                assessment.config, Outcome.REFUSED, usable_memory=usable_memory(spec), note=assessment.refused
            )
        else:
            found[assessment.config] = assessment.found
    best = _best(found.values())
    queue = sorted(
        (item for item in found.values() if not item.optimal), key=lambda item: (item.iteration_bound, item.config)
    )
    searched: dict[Configuration, float] = {}

    spent = time.monotonic() - clock
    solve_budget = time_budget * (1 - PHASE1_SHARE)
    timing_dependent = False
    if spent > time_budget * PHASE1_SHARE:
        solve_budget = max(0.0, time_budget - spent - WALL_MARGIN)
        timing_dependent = True
    workers = cpsat_workers
    queue, pruned = _prune(queue, best)
    tracker.phase("solve", len(queue), best)
    done = 0
    while queue:
        queue, newly = _prune(queue, best)
        pruned.update(newly)
        tracker.total = done + len(queue)
        if not queue:
            break
        waves = math.ceil(len(queue) / executor.parallel)
        share = math.floor(solve_budget / waves * 10) / 10
        wall_left = time_budget - (time.monotonic() - clock) - WALL_MARGIN
        if share > wall_left:
            share, timing_dependent = math.floor(wall_left * 10) / 10, True
        if share < MIN_SOLVE_SECONDS:
            break
        wave, queue = queue[: executor.parallel], queue[executor.parallel :]
        tracker.wave(share, solve_budget - share)
        tasks = [SolveTask(spec, item.config, share, seed, workers) for item in wave]
        solved = executor.run(solve_config, tasks, lambda n, done=done: tracker.poll(done + n))
        done += len(wave)
        solve_budget -= share
        for before, after in zip(wave, solved, strict=True):
            searched[after.config] = share
            timing_dependent |= after.wall_limited
            found[after.config] = _kept(before, after)
        best = _best(found.values())
        tracker.best = best
    for item in queue:
        pruned.setdefault(item.config, "")  # out of time: keeps its handwritten schedule, unsearched

    for config, item in found.items():
        if pruned.get(config):
            outcome, note = Outcome.PRUNED, pruned[config]
        elif config in pruned:
            outcome, note = Outcome.SOLVED, "not searched: the time budget ran out"
            timing_dependent = True
        else:
            outcome, note = Outcome.SOLVED, "" if config in searched else "met its lower bound"
        results[config] = ConfigResult(
            config,
            outcome,
            measure=item.measure,
            made_by=item.made_by,
            status="optimal" if item.optimal else item.status or "feasible",
            makespan_bound=item.makespan_bound,
            iteration_bound_ms=item.iteration_bound,
            gap=relative_gap(item.measure.makespan_ms, item.makespan_bound),
            search_seconds=searched.get(config, 0.0),
            usable_memory=usable_memory(spec),
            note=note,
        )
    ranked = sorted(results.values(), key=lambda result: result.rank_key)
    best_gap = None
    if best is not None:
        least = min(item.iteration_bound for item in found.values())
        best_gap = relative_gap(best.measure.iteration_ms, min(least, best.measure.iteration_ms))
    best_schedule = None
    if best is not None:
        best_schedule = best.schedule.with_source(plan=best.config.label, iteration_ms=best.measure.iteration_ms)
    return PlanResult(
        results=ranked,
        best_schedule=best_schedule,
        skipped_shapes=skipped,
        best_gap=best_gap,
        wall_seconds=time.monotonic() - clock,
        time_budget=time_budget,
        parallel=executor.parallel,
        cpsat_workers=workers,
        seed=seed,
        executor=executor.name,
        timing_dependent=timing_dependent,
    )


def _kept(before: Found, after: Found) -> Found:
    """A configuration's result after its solve: never worse than what it started from (CP-SAT
    starts from every handwritten schedule, but a short solve may end on no better one)."""
    return after if after.measure.makespan_ms <= before.measure.makespan_ms else before


def _best(found: Iterable[Found]) -> Found | None:
    items = list(found)
    if not items:
        return None
    return min(items, key=lambda item: (item.measure.iteration_ms, item.config))


def _prune(queue: list[Found], best: Found | None) -> tuple[list[Found], dict[Configuration, str]]:
    """The queue without the configurations whose iteration bound is no better than the best's time."""
    if best is None:
        return queue, {}
    kept, pruned = [], {}
    for item in queue:
        if fits(best.measure.iteration_ms, item.iteration_bound):
            pruned[item.config] = (
                f"bound {item.iteration_bound:.6g} ms >= best {best.measure.iteration_ms:.6g} ms ({best.config.label})"
            )
        else:
            kept.append(item)
    return kept, pruned


class _Tracker:
    """Reports progress: per phase, tasks done, the best so far and an estimate of what is left."""

    def __init__(
        self, clock: float, budget: float, parallel: int, progress: Callable[[PlanProgress], None] | None
    ) -> None:
        self.clock, self.budget, self.parallel, self.progress = clock, budget, parallel, progress
        self.name, self.total, self.best = "assess", 0, None
        self.phase_start = clock
        self.wave_end: float | None = None
        self.planned_after = 0.0

    def phase(self, name: str, total: int, best: Found | None) -> None:
        self.name, self.total, self.best, self.phase_start = name, total, best, time.monotonic()
        self.poll(0)

    def wave(self, share: float, planned_after: float) -> None:
        """A wave of `share` seconds starts; at most `planned_after` seconds of waves follow it."""
        self.wave_end = time.monotonic() + share
        self.planned_after = planned_after

    def poll(self, done: int) -> None:
        if self.progress is None:
            return
        now = time.monotonic()
        elapsed = now - self.clock
        budget_left = max(0.0, self.budget - elapsed)
        if self.name == "assess":
            left = (now - self.phase_start) / done * (self.total - done) if done else budget_left
        elif self.wave_end is None or done >= self.total:
            left = 0.0
        else:
            left = max(0.0, self.wave_end - now) + self.planned_after
        best_ms = None if self.best is None else self.best.measure.iteration_ms
        self.progress(PlanProgress(self.name, done, self.total, best_ms, elapsed, min(left, budget_left)))


def brute_force(
    spec: PlanSpec, executor: Executor, time_limit: float, seed: int = 0, cpsat_workers: int = 1
) -> list[Found]:
    """Every configuration that fits solved with CP-SAT for `time_limit` seconds, no pruning, ranked
    as the plan ranks: what the plan's pruning must agree with (the tests and benchmarks/bench_plan.py)."""
    configs, _ = enumerate_space(spec)
    assessments = executor.run(assess, [AssessTask(spec, config) for config in configs])
    fitting = [a.found for a in assessments if a.found is not None]
    tasks = [SolveTask(spec, item.config, time_limit, seed, cpsat_workers) for item in fitting]
    solved = executor.run(solve_config, tasks)
    best = [_kept(before, after) for before, after in zip(fitting, solved, strict=True)]
    return sorted(best, key=lambda item: (item.measure.iteration_ms, item.config))
