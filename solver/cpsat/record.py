"""The search as the parent sees it (`Record`): the best solution and bound so far, the progress
reports, and whether the search has stalled.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from pipesat.solver.cpsat.child import Bound, Finished, Message, Solution

# The longest the progress line goes without a report while CP-SAT searches.
REFRESH_SECONDS = 0.5

Progress = Callable[[float, float | None, float | None], None]
"""`progress(elapsed seconds, best value, best bound)`, called as the search finds them."""


class Record:
    """The search as the parent sees it: the best solution's values and objective (ticks), when it came,
    the best bound (instance units, never below the analytic `floor`), and the progress reports: one
    for each solution and bound, and one at least every REFRESH_SECONDS (so the elapsed time moves
    between solutions). `now` is the clock, `time.monotonic` but in tests."""

    def __init__(
        self,
        clock: float,
        per_unit: int,
        start_value: float | None,
        floor: float,
        proven_bound: Callable[[float], float],
        progress: Progress | None,
        now: Callable[[], float] = time.monotonic,
    ) -> None:
        self.clock = clock
        self.per_unit = per_unit
        self.proven_bound = proven_bound
        self.progress = progress
        self.now = now
        self.best_value = start_value  # instance units, for progress reports
        self.bound = floor
        self.values: list[int] | None = None
        self.objective: float | None = None
        self.found_at: float | None = None
        self.first_at: float | None = None
        self.reported_at = -math.inf
        self.changed_at = now()  # the last new solution or raised bound

    def to_bound(self, ticks: float) -> float:
        """A bound CP-SAT reported (ticks) in instance units, at least the analytic floor."""
        return max(self.bound, self.proven_bound(ticks))

    def on_message(self, message: Message) -> None:
        if isinstance(message, Solution):
            self.take(message.values, message.objective)
            self.improve(message.bound)
        elif isinstance(message, Bound):
            self.improve(message.bound)
        elif isinstance(message, Finished) and math.isfinite(message.bound):
            self.bound = self.to_bound(message.bound)

    def take(self, values: list[int], objective: float) -> None:
        """Keep a solution: the watched variables' `values` and its `objective` (ticks)."""
        self.changed_at = self.now()
        now = self.changed_at - self.clock
        self.values, self.objective, self.found_at = values, objective, now
        self.first_at = now if self.first_at is None else self.first_at
        self.best_value = objective / self.per_unit

    def improve(self, ticks: float) -> None:
        """Take a bound CP-SAT reported (ticks) and report the news."""
        raised = self.to_bound(ticks)
        if raised > self.bound:
            self.bound, self.changed_at = raised, self.now()
        self.report()

    def stalled_for(self, seconds: float, gap: float) -> Callable[[], bool]:
        """A test of whether `seconds` have passed with neither a new solution nor a raised bound, at
        a relative gap of at most `gap`."""

        def stalled() -> bool:
            if self.best_value is None or self.now() - self.changed_at < seconds:
                return False
            return self.best_value <= self.bound * (1 + gap)

        return stalled

    def refresh(self) -> None:
        """Report again if the last report is REFRESH_SECONDS old."""
        if self.now() - self.reported_at >= REFRESH_SECONDS:
            self.report()

    def report(self) -> None:
        if self.progress is not None:
            self.reported_at = self.now()
            self.progress(self.reported_at - self.clock, self.best_value, self.bound)
