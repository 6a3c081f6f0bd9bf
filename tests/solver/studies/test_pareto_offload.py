"""Pareto's offload axis (solver/studies/pareto.py): where the instance has a host link, points solved
with offload allowed beside those without, never slower, and the offload schedules among the
handwritten positions."""

from __future__ import annotations

from pipesat.models import Instance, Status
from pipesat.models.solve_result import SolveResult
from pipesat.solver.evaluate.bounds import least_offload_limits
from pipesat.solver.studies.pareto import pareto_frontier, pareto_sweep
from tests.strategies import assert_valid

# A V of 2 devices, W apart, a transfer of a stage as long as a forward: 1 unit holds one
# microbatch of a device without offload (the least), 0.5 only with it.
V = {"num_devices": 2, "num_microbatches": 4, "chunks": 2, "placement": "vshape", "weight_times": 1}
LINKED = Instance.from_dict({**V, "host_link_bandwidth": 1})
SOLVE = {"workers": 1, "seed": 0}


def _validated(points: list[tuple[float, SolveResult]]) -> None:
    for _, result in points:
        if result.schedule is not None:
            assert_valid(result.schedule)


def test_a_sweep_with_a_host_link_solves_each_limit_with_offload_too() -> None:
    study = pareto_sweep(LINKED, [0.5, 1.0, 2.0], time_limit_per_point=2, **SOLVE)
    _validated(study.points)
    _validated(study.offloaded)
    assert [limit for limit, _ in study.offloaded] == [limit for limit, _ in study.points] == [0.5, 1.0, 2.0]
    without, offloaded = dict(study.points), dict(study.offloaded)
    assert without[0.5].status == Status.INFEASIBLE
    lean = offloaded[0.5].schedule
    assert lean is not None and lean.transfers, "only offloading meets half a microbatch"
    for limit in (1.0, 2.0):
        assert offloaded[limit].value is not None and without[limit].value is not None
        assert offloaded[limit].value <= without[limit].value + 1e-9
    names = {name for name, _, _ in study.heuristics}
    assert {"pipeoffload-full-v", "pipeoffload-selective-v", "v-half"} <= names


def test_a_frontier_gains_offload_points_below_its_leanest_breakpoint() -> None:
    study = pareto_frontier(LINKED, time_limit_per_solve=2, **SOLVE)
    _validated(study.points)
    _validated(study.offloaded)
    leanest = study.points[0][0]
    least = max(least_offload_limits(LINKED))
    assert least < leanest
    limits = [limit for limit, _ in study.offloaded]
    assert limits[0] == least and limits[2:] == [limit for limit, _ in study.points]
    assert all(result.schedule is not None for _, result in study.offloaded)
    for (_, without), (_, offloaded) in zip(study.points, study.offloaded[2:], strict=True):
        assert offloaded.value is not None and without.value is not None
        assert offloaded.value <= without.value + 1e-9


def test_without_a_link_or_for_the_span_there_is_no_offload_axis() -> None:
    plain = pareto_sweep(Instance.from_dict(V), [1.0], time_limit_per_point=1, **SOLVE)
    span = pareto_sweep(LINKED, [1.0], objective="span", time_limit_per_point=1, **SOLVE)
    for study in (plain, span):
        assert study.offloaded == []
        assert not any(name.startswith(("pipeoffload", "offload-")) for name, _, _ in study.heuristics)
