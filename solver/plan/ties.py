"""Ties: which configurations the cost model cannot tell apart, and which of them the plan recommends.

The plan ranks by the cost model's iteration time, which is an estimate: held against 35 published
runs its median absolute throughput error is 2.8% (docs/cost-model.md, "Held against published runs";
`benchmarks/bench_cost_model.py`). Two configurations whose times differ by less than that are a tie,
not a win: among the configurations tied with the fastest, the plan recommends the simplest to run
(`simplicity`), and shows the fastest on paper beside it.

Within one configuration the schedules share every op's time, so their difference is the order's
alone; there the plan keeps, of schedules within `tasks.SCHEDULE_TIE` of the fastest, the one that
holds the least memory (`tasks.assess`, and a solve's result against its start in `search`).
"""

from __future__ import annotations

from pipesat.models.plan_result import ConfigResult, Configuration, PlanResult
from pipesat.solver.plan.predict import FRAMEWORK_SCHEDULES

TIE_TOLERANCE = 0.03
"""Configurations whose iteration times are within this fraction of the fastest's are tied with it:
the cost model's measured median error, 2.8% over 35 published runs (module notes), rounded up."""
STARTS = ("periodic", "memory-gated", "one-at-a-time")
"""pipesat's starting schedules: valid, but no framework's."""
SPLIT_OUT = " with W split out"
"""How a handwritten schedule run with its W ops apart is named (`portfolio.as_candidate`)."""


def schedule_rank(config: Configuration, made_by: str) -> int:
    """How far a schedule is from what a framework runs as it is: 0 the framework's own for the
    placement (1F1B, Megatron's interleaved 1F1B, ZB-V, DualPipe), 1 another handwritten one, 2 a
    handwritten one with its W ops split out, 3 one of pipesat's starts, 4 CP-SAT's order."""
    name = made_by.strip().lower()
    if name.startswith("cp-sat"):
        return 4
    if name in STARTS:
        return 3
    if made_by.endswith(SPLIT_OUT):
        return 2
    return 0 if name == FRAMEWORK_SCHEDULES[config.placement] else 1


def simplicity(result: ConfigResult) -> tuple[int, int, int, float, float, Configuration]:
    """The order in which tied configurations are recommended: fewer pipeline stages, then fewer
    chunks a device, then the schedule nearest a framework's own (`schedule_rank`), then less memory
    a GPU, then the faster, then the configuration's own order (a total order)."""
    config, measure = result.config, result.measure
    assert measure is not None, "only a configuration with a schedule is recommended"
    stages = config.pipeline * config.chunks
    rank = schedule_rank(config, result.made_by)
    return (stages, config.chunks, rank, measure.memory_per_gpu, measure.iteration_ms, config)


CRITERIA = ("stages", "chunks", "schedule", "memory")
"""The terms of `simplicity` before the time, as `PlanResult.recommended_because` names them."""


def deciding(best: ConfigResult, fastest: ConfigResult) -> str:
    """The first of CRITERIA on which `best` is simpler than `fastest` ('' when none: the same)."""
    for name, mine, theirs in zip(CRITERIA, simplicity(best), simplicity(fastest), strict=False):
        if mine != theirs:
            return name
    return ""


def recommend(plan: PlanResult) -> Configuration | None:
    """The simplest configuration of those tied with the fastest (`PlanResult.tied`; None when none
    has a schedule)."""
    ties = [result for result in plan.results if plan.tied(result)]
    return min(ties, key=simplicity).config if ties else None
