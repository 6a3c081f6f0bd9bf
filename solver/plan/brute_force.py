"""Every configuration of a plan solved with CP-SAT, no pruning: what the plan's pruning must agree
with (the tests and benchmarks/bench_plan.py)."""

from __future__ import annotations

from pipesat.models.tuning import DEFAULT_TUNING, Tuning
from pipesat.solver.plan.executors import Executor
from pipesat.solver.plan.search import kept
from pipesat.solver.plan.space import enumerate_space
from pipesat.solver.plan.spec import PlanSpec
from pipesat.solver.plan.tasks import AssessTask, Found, SolveTask, assess, solve_config


def brute_force(
    spec: PlanSpec,
    executor: Executor,
    time_limit: float,
    seed: int = 0,
    cpsat_workers: int = 1,
    tuning: Tuning = DEFAULT_TUNING,
) -> list[Found]:
    """Every configuration that fits solved with CP-SAT for `time_limit` seconds, no pruning, ranked
    as the plan ranks: what the plan's pruning must agree with (the tests and benchmarks/bench_plan.py)."""
    configs, _, _ = enumerate_space(spec)
    assessments = executor.run(assess, [AssessTask(spec=spec, config=config, tuning=tuning) for config in configs])
    fitting = [a.found for a in assessments if a is not None and a.found is not None]
    tasks = [
        SolveTask(spec=spec, config=item.config, time_limit=time_limit, seed=seed, workers=cpsat_workers, tuning=tuning)
        for item in fitting
    ]
    solved = executor.run(solve_config, tasks)
    best = [before if after is None else kept(before, after) for before, after in zip(fitting, solved, strict=True)]
    return sorted(best, key=lambda item: (item.measure.iteration_ms, item.config))
