"""How a configuration predicted as it runs reads (`plan`'s predict option): in lines and as a document,
in the plan's own words and cells (`plan_text`).

Words and numbers only; `solver.plan.predict` computed every one of them.
"""

from __future__ import annotations

from typing import Any, Protocol

from pipesat.models.plan_result import Configuration, Measure, MemoryFit
from pipesat.solver.report.plan_text import (
    breakdown_text,
    configuration_cells,
    iteration_text,
    measure_cells,
    schedule_title,
    tight_text,
)

PREDICT_FORMAT = "pipesat-predict/1"


class PredictedRun(Protocol):
    """What a report of one configuration as it runs reads (`solver.plan.predict.Prediction` is one):
    the configuration, its handwritten schedule's name, the measure, the memory a GPU may use, and why
    the plan would refuse it by memory, its activations exceed a budget, the search leaves it out."""

    @property
    def config(self) -> Configuration: ...
    @property
    def made_by(self) -> str: ...
    @property
    def measure(self) -> Measure: ...
    @property
    def usable_memory(self) -> float: ...
    @property
    def memory_fit(self) -> MemoryFit: ...
    @property
    def refusal(self) -> str: ...
    @property
    def over_budget(self) -> str: ...
    @property
    def outside_search(self) -> str: ...


def predict_lines(prediction: PredictedRun) -> list[str]:
    """A configuration predicted as it runs (`plan`'s predict option): what it is and runs, its iteration, where
    the time goes, and why the plan would refuse it or its search leaves it out."""
    measure = prediction.measure
    lines = [
        f"predicted: {prediction.config.label}, {schedule_title(prediction.made_by)} as configured (no search)",
        f"iteration: {iteration_text(measure, prediction.usable_memory)}",
        f"where the time goes: {breakdown_text(measure)}",
    ]
    if prediction.memory_fit is MemoryFit.TIGHT:
        lines.append(tight_text(measure.memory_per_gpu, prediction.usable_memory))
    lines += [f"{what}: {why}" for what, why in _prediction_notes(prediction) if why]
    return lines


def _prediction_notes(prediction: PredictedRun) -> list[tuple[str, str]]:
    return [
        ("refused by the plan's memory model", prediction.refusal),
        ("over its activation budget", prediction.over_budget),
        ("left out of the plan's search", prediction.outside_search),
    ]


def predict_document(prediction: PredictedRun) -> dict[str, Any]:
    """A configuration predicted as it runs, for programs (`plan`'s predict option, JSON)."""
    return {
        "format": PREDICT_FORMAT,
        "units": {"time": "ms", "memory": "B", "throughput": "tokens/s"},
        "configuration": prediction.config.label,
        **configuration_cells(prediction.config),
        "schedule": prediction.made_by,
        "schedule_title": schedule_title(prediction.made_by),
        **measure_cells(prediction.measure),
        "usable_memory": prediction.usable_memory,
        "headroom": prediction.usable_memory - prediction.measure.memory_per_gpu,
        "memory_fit": prediction.memory_fit.value,
        "fits": not (prediction.refusal or prediction.over_budget),
        "refusal": prediction.refusal,
        "over_budget": prediction.over_budget,
        "outside_search": prediction.outside_search,
    }
