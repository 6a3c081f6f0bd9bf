"""A runtime that post-validates its optimizer step (the zero-bubble fork's ZB schedules): the
iteration is the schedule's max span, and the plan's bound on it is the span's."""

from __future__ import annotations

import pytest

from pipesat.models import Objective
from pipesat.solver.evaluate.bounds import lower_bound, resolve_split
from pipesat.solver.evaluate.metrics import compute_metrics
from pipesat.solver.evaluate.validator import validate
from pipesat.solver.plan.predict import parse_configuration, predict
from pipesat.solver.plan.runtimes import RUNTIMES, bounds_on_span, iterates_on_span
from pipesat.solver.plan.spec import PlanSpec
from pipesat.solver.plan.tasks import AssessTask, assess
from tests.solver.plan.conftest import tiny

ZB = "t1 p4 d1 b1 m4 zb-h1"
HEAD = {"vocab": 32000}
"""A vocabulary whose head makes the last device the busiest: there the max span is below the makespan."""


def fork(**training: object) -> PlanSpec:
    return tiny(model=HEAD, training={"runtime": "megatron-zb", **training})


def test_only_the_forks_zero_bubble_schedules_iterate_on_span() -> None:
    assert iterates_on_span("megatron-zb", "zb-h1", 2) and iterates_on_span("megatron-zb", "zb-2p", 2)
    assert not iterates_on_span("megatron-zb", "zb-h1", 4)  # the fork post-validates in half precision only
    assert not iterates_on_span("megatron-zb", "1f1b", 2) and not iterates_on_span("megatron-zb", "interleaved", 2)
    assert not iterates_on_span("torchtitan", "zb-h1", 2) and not iterates_on_span("any", "zb-h1", 2)
    assert [name for name in RUNTIMES if bounds_on_span(name)] == ["megatron-zb"]


def test_a_post_validated_schedule_is_timed_by_its_max_span_and_its_breakdown_sums() -> None:
    held = predict(fork(), *parse_configuration(ZB))
    free = predict(tiny(model=HEAD), *parse_configuration(ZB))
    assert validate(held.schedule) == [] and held.on_span and not free.on_span
    metrics = compute_metrics(held.schedule)
    assert metrics.max_span < metrics.makespan
    fixed = held.measure.exchange_ms + held.measure.optimizer_ms
    assert held.measure.iteration_ms == pytest.approx(metrics.max_span + fixed)
    assert free.measure.iteration_ms == pytest.approx(metrics.makespan + fixed)
    assert held.measure.breakdown.total_ms == pytest.approx(held.measure.iteration_ms)


def test_a_1f1b_run_of_the_fork_keeps_the_makespan() -> None:
    held = predict(fork(), *parse_configuration("t1 p4 d1 b1 m4 1f1b"))
    assert validate(held.schedule) == [] and not held.on_span
    assert held.measure.iteration_ms == pytest.approx(
        compute_metrics(held.schedule).makespan + held.measure.exchange_ms + held.measure.optimizer_ms
    )


def test_the_plans_bound_under_the_fork_is_the_spans_and_holds_its_iteration() -> None:
    config = parse_configuration("t1 p4 d1 b1 m4")[0]
    held = assess(AssessTask(spec=fork(), config=config))
    free = assess(AssessTask(spec=tiny(model=HEAD), config=config))
    assert held.found is not None and free.found is not None and free.span_bound is None
    assert validate(held.found.schedule) == []
    derivation_instance = held.found.schedule.instance
    split = resolve_split(derivation_instance, None)
    assert held.span_bound == pytest.approx(lower_bound(derivation_instance, Objective.SPAN, split))
    assert held.span_bound is not None and held.span_bound <= held.makespan_bound
    assert held.iteration_bound == pytest.approx(held.span_bound + held.fixed_ms)
    assert held.iteration_bound <= held.found.measure.iteration_ms * (1 + 1e-9)
    assert free.iteration_bound == pytest.approx(free.makespan_bound + free.fixed_ms)
