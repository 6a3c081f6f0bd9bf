"""What a plan returns: the best's gain against another run."""

from __future__ import annotations

import pytest

from pipesat.models.plan_result import Breakdown, Gain, Measure


def measure(iteration_ms: float, tokens_per_s: float, mfu: float, memory: float) -> Measure:
    parts = Breakdown(iteration_ms, 0, 0, 0, 0, 0, 0, 0, 0)
    return Measure(iteration_ms, 0.0, 0.0, iteration_ms, tokens_per_s, mfu, memory, 0.0, parts)


def test_the_gain_of_a_faster_best_that_holds_more() -> None:
    gain = Gain.between(measure(500.0, 1000.0, 0.30, 8e9), measure(400.0, 1250.0, 0.375, 10e9))
    assert gain.iteration_ms == -100.0 and gain.iteration_pct == pytest.approx(-20.0)
    assert gain.tokens_per_s_pct == pytest.approx(25.0) and gain.mfu_points == pytest.approx(7.5)
    assert gain.memory_per_gpu == 2e9


def test_a_slower_best_costs_time() -> None:
    gain = Gain.between(measure(400.0, 1250.0, 0.375, 10e9), measure(500.0, 1000.0, 0.30, 8e9))
    assert gain.iteration_ms == 100.0 and gain.iteration_pct == pytest.approx(25.0) and gain.memory_per_gpu == -2e9
