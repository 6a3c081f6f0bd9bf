"""The plan's exact search: every configuration's best handwritten schedule, its lower bound, and
CP-SAT only where a configuration may still beat the best found.

1. **Assess** every configuration (in parallel), in two steps. *Bound* each (cheap; the smallest
   pipelines first, for at most BOUND_SHARE of the budget, so that a short budget on a big space
   still schedules and ranks the most promising of what it bounded): derive its instance; refuse it
   by memory when its model state does not fit a GPU or its smallest feasible activation limit
   exceeds a device's budget (exact, `solver.evaluate.bounds`) by more than the memory estimate's
   error (`memory_fit`: within it, the configuration is tight, searched under the stretched budgets
   and ranked with a mark); else prove a lower
   bound on the makespan under the budgets. Iteration time = makespan + the fixed data-parallel and
   optimizer terms (`measure`), so the bound on the iteration is the makespan's bound plus those
   terms. Then *schedule* them, most promising (lowest bound) first, in waves: time every
   handwritten schedule that fits (when none does, pipesat's periodic schedule and the one-at-a-time
   schedule, which fits every feasible limit) and keep the best. Before each wave, a configuration
   whose bound is RANKED_MARGIN or more above the best iteration time found so far is pruned without
   a schedule: it cannot win, and is not among the first rows of the ranking either. So the
   handwritten schedules, the costly part of a big space (up to a minute for a V-shape pipeline of
   49,152 ops, where a bound takes milliseconds), are made for the few configurations that can
   matter.
2. **Prune**: the best iteration time found so far is an upper bound on the answer; a configuration
   whose lower bound is no better than it cannot win and is skipped. A configuration whose schedule
   meets its own bound is solved already.
3. **Solve** the rest with CP-SAT (where `training.schedules` allows `cp-sat`: a restriction without
   it leaves each configuration its best allowed schedule, not searched), most promising (lowest bound) first, in waves of as many solves as
   run at once; each wave gets an equal share of what is left of the budget for the waves left
   (so pruning gives later waves more), and after each wave the queue is pruned again.

The whole plan keeps to its budget: the assessments and the solves still running near its end are
stopped (`executors`), a solve keeping its best schedule, and what was not finished is marked so in
the ranking (not assessed, not searched) and leaves the best unproven unless every configuration
has its bound. Ctrl-C and SIGTERM end the
plan the same way, at once: the ranking of what it has, `interrupted`.

The ranking is by the cost model's iteration time; the configurations within its error of the
fastest are tied with it, and the best is the simplest of them (`ties`), the fastest on paper beside it.

Every schedule is validated before it is measured. Runs are deterministic for a seed: solves use
CP-SAT's deterministic time, the shares are computed from the budget and the counts (not from the
clock) unless the budget runs out, and every order is a total order on the configurations.

What a worker does for one configuration (bound, assess, solve) is `tasks`; the progress reports
are `progress`.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol, TypeVar

from pipesat.models import InstanceError, Status
from pipesat.models.plan_result import ConfigResult, Configuration, MemoryFit, Outcome, PlanResult, RuntimeBest
from pipesat.models.tolerance import fits
from pipesat.models.tuning import DEFAULT_TUNING, Tuning
from pipesat.solver.evaluate.metrics import relative_gap
from pipesat.solver.instances.calibration import Calibration
from pipesat.solver.plan.executors import STOP_WAIT, Executor, Interrupted, run_locally
from pipesat.solver.plan.measure import usable_memory
from pipesat.solver.plan.progress import PlanProgress, Tracker
from pipesat.solver.plan.runtime_bests import plan_bests, runs_on
from pipesat.solver.plan.schedules import SEARCH, allows
from pipesat.solver.plan.space import Space, enumerate_space, op_count
from pipesat.solver.plan.spec import PlanSpec
from pipesat.solver.plan.tasks import (
    SCHEDULE_TIE,
    Assessment,
    AssessTask,
    Found,
    SolveTask,
    assess,
    bound,
    solve_config,
)
from pipesat.solver.plan.ties import TIE_TOLERANCE, deciding, recommend

LOG = logging.getLogger(__name__)
PHASE1_SHARE = 0.2
"""The share of the budget kept for the assessments; the solves share the rest."""
RANKED_MARGIN = 0.05
"""An assessment is pruned, without a schedule, when its bound is this fraction or more above the
best iteration time found; those within it may win or rank near the top, and get their schedules'
numbers."""
WAVE_PER_TASK = 2
"""Schedules made in a wave of assessments, per task that runs at once: small waves prune sooner,
and each wave waits for its slowest."""
MIN_SOLVE_SECONDS = 0.5
"""A solve given less than this is not started: its configuration keeps its handwritten schedule."""
WALL_MARGIN = 1.5
"""Seconds before the end of the budget by which the last wave of solves is planned to end."""
END_MARGIN = STOP_WAIT + 0.5
"""Tasks still running this long before the end of the budget are stopped: they answer within
STOP_WAIT (or their workers are killed), and half a second is left to kill late workers and rank
what the plan has. A tenth, and then a quarter, were too little on a loaded machine and in a fresh
CI environment (benchmarks/experiments/2026-11-24_plan-time-budget)."""
BOUND_SHARE = 0.5
"""The most of the budget (to the time tasks are stopped) the bounds may take: a short budget on a
big space still leaves the rest to schedule the most promising of what was bounded, and ranks them,
where the bounds alone would have taken it all and left nothing ranked."""
INTERRUPTED = "interrupted"
OUT_OF_TIME = "the time budget ran out"
NO_SEARCH = "training.schedules does not allow cp-sat"


@dataclass(frozen=True, kw_only=True)
class PlanOptions:
    """How a plan searches: its time budget (seconds), the seed and CP-SAT workers of every solve,
    CP-SAT's own parameters for them (`solve`'s `cpsat_params`), the calibration whose measured layers
    cost what was measured, and the tuning of every solve and bound (`models.tuning`)."""

    time_budget: float = 120.0  # `pipesat plan`'s default budget
    seed: int = 0
    cpsat_workers: int = 1
    cpsat_params: Mapping[str, str] = dataclasses.field(default_factory=dict)
    calibration: Calibration | None = None
    tuning: Tuning = DEFAULT_TUNING


def plan(
    spec: PlanSpec,
    executor: Executor | None = None,
    options: PlanOptions | None = None,
    *,
    space: Space | None = None,
    started: float | None = None,
    progress: Callable[[PlanProgress], None] | None = None,
) -> PlanResult:
    """The best configuration of `spec`, all ranked (module notes); Ctrl-C ends it with what it has;
    `InstanceError` when no configuration of the cluster fits the model and batch.

    Parameters
    ----------
    spec, executor, options
        The model and cluster (`load_spec`); where and how the solves run (None: as `pipesat plan`).
    space, started, progress
        What to search (None: all of `spec`), when the budget began (None: now), a progress callback.

    Returns
    -------
    PlanResult
        Every configuration ranked and the best one's schedule (validated); in ms and bytes.
    """
    if executor is None:
        return run_locally(lambda own: plan(spec, own, options, space=space, started=started, progress=progress))
    run = _Run(spec, executor, options or PlanOptions(), started, progress)
    LOG.info("tuning: %s", run.options.tuning.describe())
    configs, skipped, merged = space or enumerate_space(spec)
    if not configs:
        why = f": {'; '.join(skipped)}" if skipped else ""
        raise InstanceError(f"no configuration of {spec.cluster.gpus} GPUs fits this model and batch{why}")
    try:
        run.assess(configs)
        run.solve()
    except KeyboardInterrupt:
        run.interrupted = True
    return run.result(configs, skipped, merged)


class _Run:
    """A plan as it goes: what each configuration has come to so far, from which the result is made
    whenever the plan ends (done, out of time, or interrupted between any two steps)."""

    def __init__(
        self,
        spec: PlanSpec,
        executor: Executor,
        options: PlanOptions,
        started: float | None,
        progress: Callable[[PlanProgress], None] | None,
    ) -> None:
        self.spec, self.executor, self.options = spec, executor, options
        self.budget = budget = options.time_budget
        self.clock = time.monotonic() if started is None else started
        self.end = self.clock + budget - executor.closing  # the executor closes within the budget too
        self.stop_at = self.end - END_MARGIN
        self.bounds_stop_at = self.clock + BOUND_SHARE * (self.stop_at - self.clock)
        self.tracker = Tracker(self.clock, budget, executor.parallel, progress)
        self.found: dict[Configuration, Found] = {}
        self.refused: dict[Configuration, str] = {}
        self.shapes: dict[Configuration, str] = {}
        self.unfinished: dict[Configuration, str] = {}  # not assessed, and why
        self.unsearched: dict[Configuration, str] = {}  # not searched (or its solve gave no result), and why
        self.pruned: dict[Configuration, str] = {}
        self.bounded: dict[Configuration, Assessment] = {}  # bounded, without a schedule (yet)
        self.searched: dict[Configuration, float] = {}
        self.runtime_bests: dict[Configuration, tuple[RuntimeBest, ...]] = {}
        self.best: Found | None = None
        self.timing_dependent = False
        self.interrupted = False

    def assess(self, configs: list[Configuration]) -> None:
        """Step 1, until the budget's end: every configuration's bound (the smallest pipelines first,
        for at most BOUND_SHARE of the budget), then the handwritten schedules of those that may
        matter, lowest bound first, in waves (module notes)."""
        self.tracker.phase("bound", len(configs), None)
        order = sorted(configs, key=lambda config: (op_count(config), config))  # the cheapest bounds first
        tasks = [self._assess_task(config) for config in order]
        try:
            bounds = self.executor.run(bound, tasks, self.tracker.poll, self.bounds_stop_at)
        except Interrupted as stop:
            self._assessed(order, stop.results, INTERRUPTED)
            raise
        self._assessed(order, bounds, OUT_OF_TIME)
        queue = sorted(self.bounded.values(), key=lambda item: (item.iteration_bound, item.config))
        self.tracker.phase("assess", len(queue), self.best)
        done, wave_size = 0, WAVE_PER_TASK * self.executor.parallel
        while queue and time.monotonic() < self.stop_at:
            queue = self._prune(queue, RANKED_MARGIN)
            self.tracker.total = done + len(queue)
            wave, queue = queue[:wave_size], queue[wave_size:]
            tasks = [self._assess_task(item.config, item.makespan_bound) for item in wave]
            try:
                assessed = self.executor.run(assess, tasks, self.tracker.poll_after(done), self.stop_at)
            except Interrupted as stop:
                self._assessed([item.config for item in wave], stop.results, INTERRUPTED)
                raise
            self._assessed([item.config for item in wave], assessed, OUT_OF_TIME)
            self.tracker.best = self.best
            done += len(wave)
            if any(result is None for result in assessed):
                break  # out of time: the rest keep their bounds, not assessed
        for item in queue:
            self.unfinished[item.config] = OUT_OF_TIME

    def _assess_task(self, config: Configuration, makespan_bound: float | None = None) -> AssessTask:
        options = self.options
        return AssessTask(
            spec=self.spec,
            config=config,
            calibration=options.calibration,
            tuning=options.tuning,
            makespan_bound=makespan_bound,
        )

    def _assessed(self, configs: list[Configuration], assessments: list[Assessment | None], why: str) -> None:
        """Record each configuration's assessment: its schedule, its bound alone, its refusal, or why
        it has none (not finished)."""
        for config, assessment in zip(configs, assessments, strict=True):
            if assessment is not None and assessment.runtime_bests and _fits(assessment):
                self.runtime_bests[config] = assessment.runtime_bests
            if assessment is None:
                self.unfinished[config] = why
            elif assessment.shape:
                self.shapes[config] = assessment.refused
            elif assessment.refused:
                self.refused[config] = assessment.refused
            elif assessment.found is None:
                self.bounded[config] = assessment
            else:
                self.found[config] = assessment.found
                self.bounded.pop(config, None)
        self.best = _best(self.found.values())

    def solve(self) -> None:
        """Steps 2 and 3: prune, and solve the rest in waves, each with its share of the budget left."""
        options = self.options
        queue = sorted(
            (item for item in self.found.values() if not (item.optimal or item.settled)),
            key=lambda item: (item.iteration_bound, item.config),
        )
        spent = time.monotonic() - self.clock
        solve_budget = self.budget * (1 - PHASE1_SHARE)
        overran = spent > self.budget * PHASE1_SHARE
        if overran:
            solve_budget = max(0.0, self.budget - spent - WALL_MARGIN)
        queue = self._prune(queue)
        if not allows(self.spec.schedules, SEARCH):
            for item in queue:  # the restriction leaves the search out: they keep their handwritten schedules
                self.unsearched[item.config] = NO_SEARCH
            queue = []
        self.timing_dependent |= overran and bool(queue)  # the solves' shares then come from the clock
        self.tracker.phase("solve", len(queue), self.best)
        done = 0
        parallel = self.executor.parallel
        while queue:
            queue = self._prune(queue)
            self.tracker.total = done + len(queue)
            if not queue:
                break
            share = math.floor(solve_budget / math.ceil(len(queue) / parallel) * 10) / 10
            wall_left = self.end - WALL_MARGIN - time.monotonic()
            capped = share > wall_left
            if capped:
                share = math.floor(wall_left * 10) / 10
            if share < MIN_SOLVE_SECONDS:
                break
            wave, queue = queue[:parallel], queue[parallel:]
            self.tracker.wave(share, solve_budget - share)
            tasks = [
                SolveTask(
                    spec=self.spec,
                    config=item.config,
                    time_limit=share,
                    seed=options.seed,
                    workers=options.cpsat_workers,
                    cpsat_params=options.cpsat_params,
                    calibration=options.calibration,
                    tuning=options.tuning,
                )
                for item in wave
            ]
            try:
                solved = self.executor.run(solve_config, tasks, self.tracker.poll_after(done), self.stop_at)
            except Interrupted as stop:
                self._solved(wave, stop.results, share, INTERRUPTED)
                raise
            self._solved(wave, solved, share, OUT_OF_TIME)
            # A share cut to the wall time left matters only to a solve that did not finish in it.
            self.timing_dependent |= capped and not all(after is not None and after.optimal for after in solved)
            done += len(wave)
            solve_budget -= share
        for item in queue:  # no time left for them: they keep their handwritten schedules
            self.unsearched[item.config] = OUT_OF_TIME

    def _prune(self, queue: list[B], margin: float = 0.0) -> list[B]:
        queue, pruned = _prune(queue, self.best, margin)
        self.pruned.update(pruned)
        return queue

    def _solved(self, wave: list[Found], solved: list[Found | None], share: float, why: str) -> None:
        for before, after in zip(wave, solved, strict=True):
            if after is None:
                self.unsearched[before.config] = why
                continue
            self.searched[after.config] = share
            self.timing_dependent |= after.wall_limited
            self.found[after.config] = kept(before, after)
        self.best = self.tracker.best = _best(self.found.values())

    def result(self, configs: list[Configuration], skipped: list[str], merged: list[str]) -> PlanResult:
        """The ranking of what the plan has now, its best the simplest of the configurations tied with
        the fastest (`ties`); refused (one line) when the cost model refused every configuration."""
        usable = usable_memory(self.spec)
        results = []
        for config in configs:
            if config in self.shapes:
                continue
            item, bounded = self.found.get(config), self.bounded.get(config)
            if config in self.refused:
                results.append(ConfigResult(config, Outcome.REFUSED, usable_memory=usable, note=self.refused[config]))
            elif item is not None:
                results.append(self._ranked(item, usable))
            elif bounded is not None and config in self.pruned:
                results.append(self._bound_only(bounded, Outcome.PRUNED, self.pruned[config], usable))
            else:
                note = f"not assessed: {self.unfinished.get(config, INTERRUPTED)}"
                if bounded is None:
                    results.append(ConfigResult(config, Outcome.UNFINISHED, usable_memory=usable, note=note))
                else:
                    results.append(self._bound_only(bounded, Outcome.UNFINISHED, note, usable))
        if not results:
            why = next(iter(self.shapes.values()))
            raise InstanceError(f"no configuration of {self.spec.cluster.gpus} GPUs fits this model: {why}")
        out_of_time = OUT_OF_TIME in (*self.unfinished.values(), *self.unsearched.values())
        unbounded = [config for config in self.unfinished if config not in self.bounded]
        ranked = PlanResult(
            results=sorted(results, key=lambda result: result.rank_key),
            best_schedule=None,
            skipped_shapes=[*skipped, *(f"{config.label}: {why}" for config, why in self.shapes.items())],
            merged_shapes=merged,
            tie_tolerance=TIE_TOLERANCE,
            wall_seconds=time.monotonic() - self.clock,
            time_budget=self.budget,
            parallel=self.executor.parallel,
            cpsat_workers=self.options.cpsat_workers,
            seed=self.options.seed,
            executor=self.executor.name,
            timing_dependent=self.timing_dependent or out_of_time,
            interrupted=self.interrupted,
            tuning=self.options.tuning,
            runtime=self.spec.runtime,
            runtime_bests=plan_bests(  # of those that fit, as the plan's best
                self.runtime_bests,
                ((item.config, item.made_by, item.measure) for item in self.found.values() if _fits(item)),
                (item.iteration_bound for config, item in self.bounded.items() if config not in self.found),
                bool(unbounded),
            ),
        )
        recommended = recommend(ranked)
        if recommended is None:
            return ranked
        best, best_gap = self.found[recommended], None
        if not unbounded:
            bounds = [item.iteration_bound for item in self.found.values()]
            least = min(bounds + [item.iteration_bound for item in self.bounded.values()])
            best_gap = relative_gap(best.measure.iteration_ms, min(least, best.measure.iteration_ms))
        schedule = best.schedule.with_source(plan=best.config.label, iteration_ms=best.measure.iteration_ms)
        chosen = next(result for result in ranked.results if result.config == recommended)
        fastest = ranked.fastest
        because = deciding(chosen, fastest) if fastest is not None and chosen is not fastest else ""
        return dataclasses.replace(
            ranked,
            best_schedule=schedule,
            best_gap=best_gap,
            recommended=recommended,
            recommended_because=because,
            best_runs_on=runs_on(
                best.config, best.made_by, best.measure.iteration_ms, self.runtime_bests.get(best.config, ())
            ),
        )

    @staticmethod
    def _bound_only(item: Assessment, outcome: Outcome, note: str, usable: float) -> ConfigResult:
        """The result of a configuration with its bounds and no schedule: pruned, or not assessed."""
        return ConfigResult(
            item.config,
            outcome,
            makespan_bound=item.makespan_bound,
            iteration_bound_ms=item.iteration_bound,
            usable_memory=usable,
            note=note,
            tight=item.memory_fit is MemoryFit.TIGHT,
        )

    def _ranked(self, item: Found, usable: float) -> ConfigResult:
        """The result of a configuration with a schedule: solved, pruned, or not searched (and why)."""
        config = item.config
        outcome, note = Outcome.SOLVED, ""
        if config in self.pruned:
            outcome, note = Outcome.PRUNED, self.pruned[config]
        elif config not in self.searched and item.optimal:
            note = "met its lower bound"
        elif config not in self.searched and item.settled:
            note = f"within {SCHEDULE_TIE:.1%} of a schedule that meets its lower bound, and holding less memory"
        elif config not in self.searched:
            outcome, note = Outcome.UNSEARCHED, f"not searched: {self.unsearched.get(config, INTERRUPTED)}"
        return ConfigResult(
            config,
            outcome,
            measure=item.measure,
            made_by=item.made_by,
            status=Status.OPTIMAL if item.optimal else item.status,
            makespan_bound=item.makespan_bound,
            iteration_bound_ms=item.iteration_bound,
            gap=relative_gap(item.measure.makespan_ms, item.makespan_bound),
            search_seconds=self.searched.get(config, 0.0),
            usable_memory=usable,
            note=note,
            tight=item.memory_fit is MemoryFit.TIGHT,
        )


def kept(before: Found, after: Found) -> Found:
    """A configuration's result after its solve: never worse than what it started from (CP-SAT
    starts from every handwritten schedule, but a short solve may end on no better one), and of two
    within SCHEDULE_TIE of each other the one holding less memory (`tasks`); with the better of the
    two proven bounds."""
    faster, slower = (after, before) if after.measure.makespan_ms <= before.measure.makespan_ms else (before, after)
    close = fits(slower.measure.makespan_ms, faster.measure.makespan_ms * (1 + SCHEDULE_TIE))
    kept = slower if close and slower.measure.memory_per_gpu < faster.measure.memory_per_gpu else faster
    if kept is after:
        return after
    bound = max(before.makespan_bound, after.makespan_bound)
    status = Status.OPTIMAL if fits(kept.measure.makespan_ms, bound) else Status.FEASIBLE
    settled = kept.settled or fits(faster.measure.makespan_ms, bound)
    return dataclasses.replace(kept, makespan_bound=bound, status=status, settled=settled)


def _fits(item: Found | Assessment) -> bool:
    return item.memory_fit is MemoryFit.FITS


def _best(found: Iterable[Found]) -> Found | None:
    """The incumbent: the fastest that fits (else the fastest tight one), so a tight row never prunes one that fits."""
    items = list(found)
    return min([i for i in items if _fits(i)] or items, key=lambda i: (i.measure.iteration_ms, i.config), default=None)


class Bounded(Protocol):
    """A configuration with a lower bound on its iteration time (ms)."""

    @property
    def config(self) -> Configuration: ...

    @property
    def iteration_bound(self) -> float: ...


B = TypeVar("B", bound=Bounded)


def _prune(queue: list[B], best: Found | None, margin: float = 0.0) -> tuple[list[B], dict[Configuration, str]]:
    """The queue without the configurations whose iteration bound is no better than the best's time
    (`margin` more: the bound that fraction or more above it)."""
    if best is None:
        return queue, {}
    kept, pruned = [], {}
    for item in queue:
        if fits(best.measure.iteration_ms * (1 + margin), item.iteration_bound):
            pruned[item.config] = (
                f"bound {item.iteration_bound:.6g} ms >= best {best.measure.iteration_ms:.6g} ms ({best.config.label})"
            )
        else:
            kept.append(item)
    return kept, pruned
