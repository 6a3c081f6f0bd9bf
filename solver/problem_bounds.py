"""What the analytic bounds (`solver.evaluate.bounds`) say about a solve's problem before it searches:
that no schedule fits (`bounds_infeasibility`), and where its lower bound comes from, in words for the
log (`bound_origin`).
"""

from __future__ import annotations

from pipesat.models import Objective
from pipesat.models.solve_result import Infeasibility, InfeasibleReason
from pipesat.models.tolerance import fits, same
from pipesat.solver.evaluate.bounds import (
    critical_path_bound,
    least_offload_limits,
    lower_bound,
    minimum_memory_limits,
    without_communication,
)
from pipesat.solver.evaluate.device_bounds import zero_bubble_bound
from pipesat.solver.portfolio import Problem


def bounds_infeasibility(problem: Problem) -> Infeasibility | None:
    """Why no schedule exists, when the analytic bounds show it: the memory limit below the smallest
    feasible one (with offload, `least_offload_limits`), or the time cap below the time objective's lower bound."""
    instance = problem.instance
    limits = instance.memory_limit
    if limits is not None:
        uniform = len(set(limits)) == 1
        smallest = least_offload_limits(instance) if problem.offload else minimum_memory_limits(instance)
        if uniform and not fits(max(smallest), limits[0]):
            return Infeasibility(InfeasibleReason.MEMORY_LIMIT, problem.objective, limits[0], max(smallest))
        for device, (least, limit) in enumerate(zip(smallest, limits, strict=True)):
            if not fits(least, limit):
                return Infeasibility(InfeasibleReason.MEMORY_LIMIT, problem.objective, limit, least, device)
    if problem.time_cap is not None:
        time_bound = lower_bound(instance, problem.objective, problem.split, tuning=problem.tuning)
        if not fits(time_bound, problem.time_cap):
            return Infeasibility(InfeasibleReason.TIME_CAP, problem.objective, problem.time_cap, time_bound)
    return None


def bound_origin(problem: Problem, bound: float) -> str:
    """Where the lower bound comes from, in words for the log (`solver.evaluate.bounds`)."""
    instance, split = without_communication(problem.instance), problem.split
    if problem.known_bound is not None and same(bound, problem.known_bound):
        return "proven by an earlier solve (a larger memory limit's optimum)"
    if problem.minimize_memory:
        if problem.time_cap is None:
            return "the smallest feasible memory limit"
        return f"the least memory whose {problem.objective.label} bound is within the cap"
    if problem.objective == Objective.SPAN:
        if same(bound, zero_bubble_bound(instance, split)):
            return "the busiest device's work"
        return "a device's span under its memory limit"
    if same(bound, critical_path_bound(instance, split)):
        return "the critical path (one microbatch through every stage)"
    work = "a device's work" if instance.memory_limit is None else "a device's work or span under its memory limit"
    return f"{work}, with the pipeline's fill and drain"
