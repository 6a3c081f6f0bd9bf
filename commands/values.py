"""The types of option values that click has none for: a finite number within a range, a time window
START:END, and the words of `--format`."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from pipesat.solver.report.schedule_plot import Window


class FiniteFloat(click.FloatRange):
    """A float option that refuses `nan` and `inf` (click's float takes both), within an optional range."""

    name = "number"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        try:
            number = float(value)  # as click's FloatParamType, before the range check
        except ValueError:
            self.fail(f"{value!r} is not a valid {self.name}.", param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return super().convert(number, param, ctx)

    def _describe_range(self) -> str:
        # click describes an unbounded range as "x<=None"; say nothing instead.
        return "" if self.min is None and self.max is None else super()._describe_range()


class FormatChoice(click.Choice):
    """`--format`'s words; `table`, the rows commands' earlier word for text, still means text."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        return super().convert("text" if value == "table" else value, param, ctx)


class TimeWindow(click.ParamType):
    """`START:END`, a time range from the schedule's first start; an end left out is the schedule's;
    `all`, the whole schedule."""

    name = "START:END"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Window:
        if isinstance(value, tuple):
            return value
        if str(value).strip().lower() == "all":
            return (0.0, math.inf)
        first, colon, second = str(value).partition(":")
        start, end = _time(first, 0.0), _time(second, math.inf)
        if not colon or start is None or end is None:
            self.fail(f"{value!r} is not START:END; give two times from the schedule's start, like 100:250", param, ctx)
        if start < 0:
            self.fail(f"{value} starts before the schedule does; times count from its start, 0", param, ctx)
        if end <= start:
            self.fail(f"{value} ends before it starts; give START:END with START < END", param, ctx)
        return (start, end)


def _time(text: str, default: float) -> float | None:
    """A finite number, `default` for an empty text, None when it is neither."""
    if not text.strip():
        return default
    try:
        number = float(text)
    except ValueError:
        return None
    return number if math.isfinite(number) else None
