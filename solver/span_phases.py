"""Where a max-span solve's phases apply (`solver.solve` runs them).

Phase 0 proves a bound from stage 0's device first (`Tuning.first_device_phase`): the optimum
makespan of the instance whose makespan is at most that device's span (`first_device_instance`), a
model CP-SAT settles far sooner than the span's. Phase 1 spends a share of the time on the makespan
(`Tuning.makespan_phase`), whose model CP-SAT searches far better, and the span's search may start
from that order re-timed. Each pays only where it was measured to: elsewhere its time is taken from
the span's own search for nothing.
"""

from __future__ import annotations

from pipesat.models import Objective, expected_op_keys
from pipesat.models.tolerance import fits
from pipesat.solver.cpsat.data import model_data
from pipesat.solver.evaluate.bounds import first_device_instance, first_device_span_bound
from pipesat.solver.portfolio import Candidate, Problem
from pipesat.solver.result import meets


def first_device_phase_applies(problem: Problem, best: Candidate | None, bound: float, gap: float) -> bool:
    """Whether a max-span solve proves a bound from stage 0's device first: on one route with W
    apart (fused, the span solve is the makespan solve), on a model of more than
    `Tuning.proof_small_ops` ops under a memory limit below the 1F1B peak, where that device's
    analytic bound is the analytic bound and the times are coarse (`Tuning.first_device_most_ticks`),
    unless the best start meets the bound (within `gap`). Elsewhere (a small model, another device
    holding the max span back, memory forcing little idle, fine-grained times) the phase's time was
    measured lost (benchmarks/experiments/2026-11-28_phase-0, 2026-11-29_phase-0-coarse-times)."""
    if problem.tuning.first_device_phase <= 0 or problem.objective != Objective.SPAN or problem.minimize_memory:
        return False
    instance = problem.instance
    if not problem.split or instance.bidirectional or instance.memory_limit is None:
        return False
    if all(fits(instance.one_f_one_b_peak(), limit) for limit in instance.memory_limit):
        return False
    if proves_itself(problem):
        return False
    if best is not None and meets(best.value, bound, gap):
        return False
    if not fits(bound, first_device_span_bound(instance, problem.split, tuning=problem.tuning)):
        return False
    relaxed = model_data(first_device_instance(instance), objective=Objective.MAKESPAN, split_backward=problem.split)
    return relaxed.horizon <= problem.tuning.first_device_most_ticks


def makespan_phase_applies(problem: Problem) -> bool:
    """Whether a max-span solve first spends `Tuning.makespan_phase` of its time on the makespan: not
    on a model of at most `Tuning.proof_small_ops` ops, where the span's own search runs the proof
    portfolio and proves the span itself (there the phase's time was measured lost:
    benchmarks/experiments/2026-11-29_no-makespan-phase-small), nor on a V placement (unless
    `Tuning.makespan_phase_on_v`), where its schedule led the span's search to worse values more often
    than to better ones (the makespan is stage 0's device's span; on a V the devices at the turn hold
    the max span back: benchmarks/experiments/2026-11-29_no-makespan-phase-on-v)."""
    if problem.objective != Objective.SPAN or problem.minimize_memory:
        return False
    on_v = problem.instance.placement_name() == "vshape"
    return not proves_itself(problem) and (problem.tuning.makespan_phase_on_v or not on_v)


def proves_itself(problem: Problem) -> bool:
    """Whether the model has at most `Tuning.proof_small_ops` ops, where the search runs the proof
    portfolio, whose bound search proves it as a full search (`solver.cpsat.search_parameters`)."""
    return len(expected_op_keys(problem.instance, problem.split)) <= problem.tuning.proof_small_ops
