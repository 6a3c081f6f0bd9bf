"""Small builders shared by the heuristic tests."""

from __future__ import annotations

from typing import Any

from pipesat.models import Instance, Schedule
from pipesat.solver.evaluate.metrics import Metrics, compute_metrics
from pipesat.solver.heuristics import run_heuristic
from tests.conftest import make_instance
from tests.strategies import assert_valid

# Times in quarters keep sums exact, so closed forms can be compared with ==. T_W < T_F < T_B as in the ZB paper.
F, B, W = 3.0, 4.0, 2.0


def uniform(p: int, m: int, split: bool = True, **extra: Any) -> Instance:
    """p devices, m microbatches, the same F, B (and W when split) on every stage; extra keys pass through."""
    times: dict[str, Any] = {"forward_times": F, "backward_times": B} | ({"weight_times": W} if split else {})
    return make_instance(p, m, **(times | extra))


def run_valid(name: str, instance: Instance) -> tuple[Schedule, Metrics]:
    """The named heuristic's schedule (validated) and its metrics."""
    schedule = assert_valid(run_heuristic(name, instance))
    return schedule, compute_metrics(schedule)
