"""The current run against the plan in lines and in the plan's JSON document."""

from __future__ import annotations

import dataclasses
import json

import pytest

from pipesat.solver.plan.current import CurrentRun, compare_current, predict_current
from pipesat.solver.report.current_text import current_document, current_lines
from tests.solver.plan.conftest import CURRENT, rows, tiny

ROWS = {"t1 p4 d1 b1 m4": 10.0, "t2 p2 d1 b1 m4": 20.0}


def current_at(ms: float, plan_rows: dict[str, float] = ROWS) -> CurrentRun:
    spec = tiny(training={"current": CURRENT})
    prediction = predict_current(spec)
    assert prediction is not None
    prediction = dataclasses.replace(prediction, measure=dataclasses.replace(prediction.measure, iteration_ms=ms))
    return compare_current(prediction, rows(spec, plan_rows))


@pytest.mark.parametrize(
    ("ms", "where"),
    [
        (5.0, "current would rank 1st of the plan's 2 rows with a schedule: faster than every one"),
        (15.0, "current would rank 2nd of the plan's 2 rows with a schedule: between rows 1 and 2"),
        (25.0, "current would rank 3rd, after all the plan's 2 rows with a schedule"),
    ],
)
def test_the_lines_say_the_run_where_it_falls_and_the_best_against_it(ms: float, where: str) -> None:
    lines = current_lines(current_at(ms))
    assert lines[0].startswith("current: t1 p2 d2 linear b1 m2, 1F1B as configured: ")
    assert f"{ms:.1f} ms an iteration" in lines[0]
    assert lines[1] == where
    faster = f"{ms - 10.0:.1f} ms faster" if ms > 10 else f"{10.0 - ms:.1f} ms slower"
    assert lines[2].startswith(f"the best, t1 p4 d1 linear b1 m4, against it: {faster} an iteration (10.0 ms, ")


def test_its_own_row_is_named_when_the_plan_holds_it() -> None:
    lines = current_lines(current_at(12.0, {**ROWS, "t1 p2 d2 b1 m2": 11.0}))
    assert lines[1].endswith("; the plan's row 2 is its configuration with 1F1B, 11.0 ms")


def test_the_document_carries_the_prediction_its_rank_and_the_gain() -> None:
    document = current_document(current_at(25.0))
    assert document["configuration"] == "t1 p2 d2 linear b1 m2" and document["schedule"] == "1f1b"
    assert (document["iteration_ms"], document["rank"], document["ranked"], document["plan_row"]) == (25.0, 3, 2, None)
    assert document["best"] == "t1 p4 d1 linear b1 m4"
    assert document["best_gain"]["iteration_ms"] == -15.0
    assert document["best_gain"]["iteration_pct"] == pytest.approx(-60.0)
    json.dumps(document)
