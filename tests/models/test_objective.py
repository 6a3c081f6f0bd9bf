"""Objective and Status: string enums that compare equal to, print as and are read from their values."""

from __future__ import annotations

import pytest

from pipesat.models import TIME_OBJECTIVES, Objective, Status


@pytest.mark.parametrize(
    ("objective", "value", "title"),
    [
        (Objective.MAKESPAN, "makespan", "makespan"),
        (Objective.SPAN, "span", "max span"),
        (Objective.MEMORY, "memory", "peak memory"),
    ],
)
def test_objective_is_its_value_and_has_a_label(objective: Objective, value: str, title: str) -> None:
    assert objective == value and Objective(value) is objective
    assert str(objective) == f"{objective}" == value
    assert objective.label == title


def test_time_objectives_are_the_times() -> None:
    assert TIME_OBJECTIVES == (Objective.MAKESPAN, Objective.SPAN)
    assert Objective.MEMORY not in TIME_OBJECTIVES


def test_an_unknown_objective_is_refused() -> None:
    with pytest.raises(ValueError, match="latency"):
        Objective("latency")


@pytest.mark.parametrize("status", list(Status))
def test_status_is_its_value(status: Status) -> None:
    assert status == status.value and Status(status.value) is status
    assert str(status) == f"{status}" == status.value


def test_the_statuses() -> None:
    assert [status.value for status in Status] == ["optimal", "feasible", "infeasible", "unknown", "interrupted"]
