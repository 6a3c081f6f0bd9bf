"""The user's current run against the plan (`training.current`): the configuration they run now,
predicted as it runs (`predict`, its handwritten schedule as configured), the row its iteration would
take among the plan's, and what the plan's best costs and buys against it.

The configuration is read and predicted before the search, so that one that does not fit the
cluster or the batch, or that the cost model refuses, is refused in one line before any solve.
"""

from __future__ import annotations

from dataclasses import dataclass

from pipesat.models import InputError, PipesatError
from pipesat.models.plan_result import ConfigResult, Gain, PlanResult
from pipesat.solver.instances.calibration import Calibration
from pipesat.solver.plan.predict import Prediction, parse_configuration, predict
from pipesat.solver.plan.spec import PlanSpec


@dataclass(frozen=True)
class CurrentRun:
    """The current run as predicted, the row its iteration would take among the plan's `ranked` rows
    with a measure (1: faster than every one), its own row in the plan when the plan holds its
    configuration (None when not: its layout or schedule left out), the plan's best and what the best
    costs and buys against it (None without a best). `unranked_below` counts the configurations
    without a schedule (pruned, not assessed) whose proven bound is below the run's iteration: they
    may be faster too."""

    prediction: Prediction
    rank: int
    ranked: int
    unranked_below: int
    row: int | None
    row_result: ConfigResult | None
    best: ConfigResult | None
    gain: Gain | None


def predict_current(spec: PlanSpec, calibration: Calibration | None = None) -> Prediction | None:
    """`training.current` predicted as it runs (None when the spec gives none); one line naming the key
    when it is not a configuration, does not fit the cluster or the batch, or cannot run as written."""
    if spec.current is None:
        return None
    try:
        config, schedule = parse_configuration(spec.current)
        return predict(spec, config, schedule, calibration=calibration)
    except PipesatError as error:
        raise InputError(f"training.current {spec.current!r}: {error}") from None


def compare_current(prediction: Prediction, result: PlanResult) -> CurrentRun:
    """Where the current run falls among the plan's rows, and the best's gain against it."""
    measured = [item for item in result.results if item.measure is not None]
    iteration = prediction.measure.iteration_ms
    rank = 1 + sum(item.measure.iteration_ms < iteration for item in measured if item.measure is not None)
    unranked_below = sum(
        item.measure is None and item.iteration_bound_ms is not None and item.iteration_bound_ms < iteration
        for item in result.results
    )
    row = next((number for number, item in enumerate(result.results, 1) if item.config == prediction.config), None)
    best = result.best
    return CurrentRun(
        prediction=prediction,
        rank=rank,
        ranked=len(measured),
        unranked_below=unranked_below,
        row=row,
        row_result=None if row is None else result.results[row - 1],
        best=best,
        gain=None if best is None or best.measure is None else Gain.between(prediction.measure, best.measure),
    )
