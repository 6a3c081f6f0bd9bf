"""The user's current run against the plan, in lines and in the plan's JSON document (`current`):
the run as predicted, the row its iteration would take, and what the best costs and buys against it
(`solver.plan.current`, read through `CurrentView`)."""

from __future__ import annotations

from typing import Any, Protocol

from pipesat.models.plan_result import ConfigResult, Gain
from pipesat.models.units import GIB
from pipesat.solver.report.plan_text import iteration_text, schedule_title
from pipesat.solver.report.predict_text import PredictedRun, predict_document
from pipesat.solver.report.tables import format_percent


class CurrentView(Protocol):
    """What the report of the current run reads (`solver.plan.current.CurrentRun` is one)."""

    @property
    def prediction(self) -> PredictedRun: ...
    @property
    def rank(self) -> int: ...
    @property
    def ranked(self) -> int: ...
    @property
    def unranked_below(self) -> int: ...
    @property
    def row(self) -> int | None: ...
    @property
    def row_result(self) -> ConfigResult | None: ...
    @property
    def best(self) -> ConfigResult | None: ...
    @property
    def gain(self) -> Gain | None: ...


def _ordinal(number: int) -> str:
    suffix = "th" if 10 <= number % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(number % 10, "th")
    return f"{number}{suffix}"


def _signed(value: float, digits: int = 1) -> str:
    return f"{value:+.{digits}f}"


def current_lines(current: CurrentView) -> list[str]:
    """`current: ...` (the run as predicted), where it ranks, and the best against it."""
    prediction = current.prediction
    lines = [
        f"current: {prediction.config.label}, {schedule_title(prediction.made_by)} as configured: "
        f"{iteration_text(prediction.measure, prediction.usable_memory)}"
    ]
    if prediction.refusal or prediction.over_budget:
        lines.append(f"current: does not fit the plan's memory model: {prediction.refusal or prediction.over_budget}")
    shown = f"the plan's {current.ranked} rows with a schedule"
    if current.rank == 1:
        where = f"current would rank 1st of {shown}: faster than every one"
    elif current.rank > current.ranked:
        where = f"current would rank {_ordinal(current.rank)}, after all {shown}"
    else:
        where = f"current would rank {_ordinal(current.rank)} of {shown}: between rows {current.rank - 1} and {current.rank}"
    if current.unranked_below:
        where += f"; {current.unranked_below} without a schedule may be faster too (their bounds are below it)"
    row = current.row_result
    if current.row is not None and row is not None and row.measure is not None:
        where += (
            f"; the plan's row {current.row} is its configuration with "
            f"{schedule_title(row.made_by)}, {row.measure.iteration_ms:.1f} ms"
        )
    lines.append(where)
    if current.best is not None and current.gain is not None and current.best.measure is not None:
        gain, measure = current.gain, current.best.measure
        faster = "faster" if gain.iteration_ms < 0 else "slower"
        lines.append(
            f"the best, {current.best.config.label}, against it: {abs(gain.iteration_ms):.1f} ms {faster} an "
            f"iteration ({measure.iteration_ms:.1f} ms, {_signed(gain.iteration_pct)}%), "
            f"tokens/s {_signed(gain.tokens_per_s_pct)}%, MFU {format_percent(measure.mfu)} "
            f"({_signed(gain.mfu_points, 2)} points), {measure.memory_per_gpu / GIB:.1f} GiB per GPU "
            f"({_signed(gain.memory_per_gpu / GIB)} GiB)"
        )
    return lines


def current_document(current: CurrentView) -> dict[str, Any]:
    """The current run for programs: its prediction's fields, its rank and the best's gain."""
    gain = current.gain
    return {
        **{key: value for key, value in predict_document(current.prediction).items() if key not in ("format", "units")},
        "rank": current.rank,
        "ranked": current.ranked,
        "unranked_below": current.unranked_below,
        "plan_row": current.row,
        "best": None if current.best is None else current.best.config.label,
        "best_gain": None
        if gain is None
        else {
            "iteration_ms": gain.iteration_ms,
            "iteration_pct": gain.iteration_pct,
            "tokens_per_s_pct": gain.tokens_per_s_pct,
            "mfu_points": gain.mfu_points,
            "memory_per_gpu": gain.memory_per_gpu,
        },
    }
