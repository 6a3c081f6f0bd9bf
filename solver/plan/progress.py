"""A plan's progress reports (`PlanProgress`): per phase, the tasks done, the best so far and an
estimate of the time left (`Tracker`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from pipesat.solver.plan.tasks import Found


@dataclass(frozen=True)
class PlanProgress:
    """Where the plan is: the phase (`bound`, `assess`, `solve`), tasks done of the phase's total,
    the best iteration time so far (ms), seconds since the start and an estimate of the seconds left."""

    phase: str
    done: int
    total: int
    best_ms: float | None
    elapsed: float
    left: float


class Tracker:
    """Reports progress: per phase, tasks done, the best so far and an estimate of what is left."""

    def __init__(
        self, clock: float, budget: float, parallel: int, progress: Callable[[PlanProgress], None] | None
    ) -> None:
        self.clock, self.budget, self.parallel, self.progress = clock, budget, parallel, progress
        self.name, self.total = "assess", 0
        self.best: Found | None = None
        self.phase_start = clock
        self.wave_end: float | None = None
        self.planned_after = 0.0

    def phase(self, name: str, total: int, best: Found | None) -> None:
        self.name, self.total, self.best, self.phase_start = name, total, best, time.monotonic()
        self.poll(0)

    def wave(self, share: float, planned_after: float) -> None:
        """A wave of `share` seconds starts; at most `planned_after` seconds of waves follow it."""
        self.wave_end = time.monotonic() + share
        self.planned_after = planned_after

    def poll_after(self, before: int) -> Callable[[int], None]:
        """`poll` for tasks counted from `before` done."""
        return lambda done: self.poll(before + done)

    def poll(self, done: int) -> None:
        if self.progress is None:
            return
        now = time.monotonic()
        elapsed = now - self.clock
        budget_left = max(0.0, self.budget - elapsed)
        if self.name in ("bound", "assess"):
            left = (now - self.phase_start) / done * (self.total - done) if done else budget_left
        elif self.wave_end is None or done >= self.total:
            left = 0.0
        else:
            left = max(0.0, self.wave_end - now) + self.planned_after
        best_ms = None if self.best is None else self.best.measure.iteration_ms
        self.progress(PlanProgress(self.name, done, self.total, best_ms, elapsed, min(left, budget_left)))
