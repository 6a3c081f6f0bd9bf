"""What each runtime runs best, from the schedules the plan has timed already (no search of its own).

For one configuration (in its assessment) the plan times every handwritten schedule that serves it
twice: on the instance's split backward (B and W apart: a fused schedule with its W split out after
each B, and the schedules that split W themselves) and on the fused backward (B one op, input and
weight gradients together, as Megatron and torchtitan run 1F1B). A runtime's candidates are those
it runs (`Runtime.runs_schedule`): Megatron's fused 1F1B and interleaved orders; the fork's also
its zero-bubble ones; torch's CSV every one. Its best on the configuration is the fastest of them
that fits (`portfolio.preferred`). Over the plan, a runtime's best is the fastest of its
configurations' bests and of the plan's own schedules it runs (CP-SAT's, for torch), of the
configurations the plan assessed: one left unassessed (pruned by its bound, or out of time) is not
counted, and the best says whether any such could have beaten it (`RuntimeBest.complete`).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterable, Mapping, Sequence

from pipesat.models import Schedule
from pipesat.models.plan_result import Configuration, Measure, RuntimeBest
from pipesat.models.tolerance import fits
from pipesat.solver.evaluate.validator import ensure_valid
from pipesat.solver.instances.from_model import Derivation
from pipesat.solver.plan.measure import measure
from pipesat.solver.plan.runtimes import RUNTIMES, Runtime
from pipesat.solver.plan.spec import PlanSpec
from pipesat.solver.portfolio import Candidate, Problem, as_candidate, preferred


def fused_candidates(problem: Problem, handwritten: Sequence[tuple[str, Schedule]]) -> list[Candidate]:
    """The fused-backward schedules of `handwritten` (name, schedule) that fit, timed with B one op."""
    fused = dataclasses.replace(problem, split=False)
    clock = time.monotonic()
    found = (
        as_candidate(fused, name, schedule, clock) for name, schedule in handwritten if not schedule.split_backward
    )
    return [candidate for candidate in found if candidate is not None]


def runtime_candidates(runtime: Runtime, split: Iterable[Candidate], fused: Iterable[Candidate]) -> list[Candidate]:
    """The candidates `runtime` runs: of the split-backward ones those it runs as timed (a fused
    schedule with W split out only where it splits weights), and the fused ones it runs; the split
    first, so that of two equal ones (a schedule without a W to split) it keeps that."""
    return [candidate for candidate in (*split, *fused) if runtime.runs_schedule(candidate.name)]


def config_bests(
    spec: PlanSpec,
    config: Configuration,
    derivation: Derivation,
    split: Sequence[Candidate],
    fused: Sequence[Candidate],
) -> tuple[RuntimeBest, ...]:
    """Each runtime's best schedule of `config`, validated and measured, for the runtimes that run it."""
    bests = []
    measured: dict[
        tuple[int, bool], Measure
    ] = {}  # one schedule is timed by its span where a runtime post-validates it
    for runtime in RUNTIMES.values():
        if not runtime.runs(config):
            continue
        best = preferred(runtime_candidates(runtime, split, fused))
        if best is None:
            continue
        on_span = runtime.iterates_on_span(best.name, spec.training.bytes_per_value)
        key = (id(best), on_span)
        if key not in measured:
            measured[key] = measure(spec, config, derivation, ensure_valid(best.schedule), on_span=on_span)
        bests.append(RuntimeBest(runtime.name, config, best.name, measured[key]))
    return tuple(bests)


def plan_bests(
    assessed: Mapping[Configuration, tuple[RuntimeBest, ...]],
    found: Iterable[tuple[Configuration, str, Measure]],
    unassessed_bounds: Iterable[float],
    unbounded: bool,
) -> tuple[RuntimeBest, ...]:
    """Each runtime's best of the plan: the fastest of its configurations' bests (`assessed`) and of
    the plan's schedules (`found`: configuration, maker, measure) it runs; complete when no bound of
    an unassessed configuration is below it and every configuration has a bound (not `unbounded`)."""
    pool: dict[str, list[RuntimeBest]] = {name: [] for name in RUNTIMES}
    for bests in assessed.values():
        for item in bests:
            pool[item.runtime].append(item)
    for config, made_by, measured in found:
        for runtime in RUNTIMES.values():
            if runtime.runs(config, made_by):
                pool[runtime.name].append(RuntimeBest(runtime.name, config, made_by, measured))
    least = min(unassessed_bounds, default=float("inf"))
    chosen = []
    for items in pool.values():
        if items:
            best = min(items, key=lambda item: (item.measure.iteration_ms, item.config))
            complete = not unbounded and best.measure.iteration_ms <= least
            chosen.append(dataclasses.replace(best, complete=complete))
    return tuple(chosen)


def runs_on(config: Configuration, made_by: str, iteration_ms: float, bests: Iterable[RuntimeBest]) -> tuple[str, ...]:
    """The runtimes that run `config` as fast as its schedule `made_by` does (`iteration_ms`): those
    that run that schedule, and those whose own best of it (`bests`, its `config_bests`) is as fast
    (on one device, or with one microbatch, the orders coincide)."""
    fast = {item.runtime for item in bests if fits(item.measure.iteration_ms, iteration_ms)}
    return tuple(name for name, runtime in RUNTIMES.items() if runtime.runs(config, made_by) or name in fast)
