"""JSON documents: every amount in the instance's units, named under `units`, and the instance summarised."""

from __future__ import annotations

import json

import pytest

from pipesat.models import Objective
from pipesat.solver.evaluate.metrics import compute_metrics
from pipesat.solver.heuristics import run_heuristic
from pipesat.solver.report.documents import schedule_document, solve_document
from pipesat.solver.solve import solve
from tests.conftest import make_instance
from tests.strategies import assert_valid

INSTANCE = make_instance(
    3,
    6,
    forward_times=2,
    backward_times=2,
    weight_times=1,
    activation_memory=512,
    time_unit="ms",
    memory_unit="MiB",
    memory_limit="1536MiB,2GiB,1536MiB",
)


def test_a_schedule_document_names_its_units_and_each_devices_limit_and_peak() -> None:
    schedule = assert_valid(run_heuristic("zb-h1", INSTANCE))
    document = json.loads(json.dumps(schedule_document(schedule, Objective.MAKESPAN)))
    metrics = compute_metrics(schedule)
    assert document["units"] == {"time": "ms", "memory": "MiB"}
    assert document["instance"]["memory_limit"] == [1536.0, 2048.0, 1536.0]
    assert document["makespan"] == metrics.makespan and document["peak_memory_per_device"] == list(metrics.peak_memory)
    assert document["fits"] is True and document["schedule"] == "zb-h1"


def test_a_solve_document_carries_the_proof_and_the_schedule() -> None:
    result = solve(INSTANCE, time_limit=5.0, workers=1, seed=0)
    assert_valid(result.schedule)
    document = solve_document(result, INSTANCE, Objective.MAKESPAN)
    assert document["status"] == result.status.value and document["value"] == result.value
    assert document["bound"] == result.bound and document["makespan"] == pytest.approx(result.value)
    assert document["best_heuristic"]["value"] >= result.value
    assert result.stopped_by is not None and result.reason
    assert document["stopped_by"] == result.stopped_by.value and document["reason"] == result.reason
