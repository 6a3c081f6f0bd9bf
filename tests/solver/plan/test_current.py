"""The user's current run against the plan: read and predicted before the search (refused in one
line naming `training.current`), where its iteration falls among the plan's rows, and the best's gain."""

from __future__ import annotations

import dataclasses

import pytest

from pipesat.models import InputError
from pipesat.models.plan_result import ConfigResult, Gain, Outcome, PlanResult
from pipesat.solver.evaluate.validator import validate
from pipesat.solver.plan.current import compare_current, predict_current
from pipesat.solver.plan.predict import parse_configuration
from tests.solver.plan.conftest import CURRENT, rows, tiny


def test_without_the_key_there_is_no_current_run() -> None:
    assert predict_current(tiny()) is None


def test_the_current_run_is_predicted_as_it_runs() -> None:
    prediction = predict_current(tiny(training={"current": CURRENT}))
    assert prediction is not None and prediction.made_by == "1f1b"
    assert prediction.config == parse_configuration(CURRENT)[0]
    assert validate(prediction.schedule) == []


@pytest.mark.parametrize(
    ("current", "message"),
    [
        ("t1 p2 d4 b1 m1", "t·cp·p·d = 8 GPUs, the cluster has 4 (cluster.gpus)"),
        ("t1 p2 d2 b1 m4", "b·m·d = 8 sequences an iteration, the global batch is 4"),
        ("t1 p2 d2 b1 m2 slow", "'slow' is not a word of a configuration"),
        ("t1 p2 d2 b1 m2 zb-v", "needs chunks 2 with vshape placement"),
    ],
)
def test_a_current_run_that_does_not_fit_is_refused_in_one_line(current: str, message: str) -> None:
    with pytest.raises(InputError) as raised:
        predict_current(tiny(training={"current": current}))
    assert str(raised.value).startswith(f"training.current {current!r}: ") and message in str(raised.value)
    assert "\n" not in str(raised.value)


@pytest.mark.parametrize(("ms", "rank"), [(5.0, 1), (25.0, 3), (35.0, 4)])
def test_its_rank_is_where_its_iteration_falls_among_the_rows_with_a_schedule(ms: float, rank: int) -> None:
    spec = tiny(training={"current": CURRENT})
    prediction = predict_current(spec)
    assert prediction is not None
    prediction = dataclasses.replace(prediction, measure=dataclasses.replace(prediction.measure, iteration_ms=ms))
    plan = rows(spec, {"t1 p4 d1 b1 m4": 10.0, "t2 p2 d1 b1 m4": 20.0, "t1 p2 d2 b2 m1": 30.0})
    current = compare_current(prediction, plan)
    assert (current.rank, current.ranked, current.row) == (rank, 3, None)
    assert current.best is plan.results[0]
    assert current.gain == Gain.between(prediction.measure, plan.results[0].measure)  # type: ignore[arg-type]


def test_its_own_row_when_the_plan_holds_its_configuration() -> None:
    spec = tiny(training={"current": CURRENT})
    prediction = predict_current(spec)
    assert prediction is not None
    plan = rows(spec, {"t1 p4 d1 b1 m4": 1.0, "t1 p2 d2 b1 m2": 2.0})
    current = compare_current(prediction, plan)
    assert current.row == 2 and current.row_result is plan.results[1]


def test_without_a_best_there_is_no_gain() -> None:
    prediction = predict_current(tiny(training={"current": CURRENT}))
    assert prediction is not None
    current = compare_current(prediction, PlanResult([], best_schedule=None))
    assert (current.rank, current.ranked, current.best, current.gain) == (1, 0, None, None)


def test_configurations_without_a_schedule_whose_bound_is_below_it_are_counted() -> None:
    spec = tiny(training={"current": CURRENT})
    prediction = predict_current(spec)
    assert prediction is not None
    prediction = dataclasses.replace(prediction, measure=dataclasses.replace(prediction.measure, iteration_ms=25.0))
    plan = rows(spec, {"t1 p4 d1 b1 m4": 10.0})
    pruned = [
        ConfigResult(parse_configuration(text)[0], Outcome.PRUNED, iteration_bound_ms=bound)
        for text, bound in (("t2 p2 d1 b1 m4", 20.0), ("t1 p2 d2 b2 m1", 30.0))
    ]
    current = compare_current(prediction, dataclasses.replace(plan, results=[*plan.results, *pruned]))
    assert (current.rank, current.ranked, current.unranked_below) == (2, 1, 1)
