"""GPipe (fill-drain): the closed forms of docs/reference.md, and any placement."""

from __future__ import annotations

import pytest

from tests.solver.heuristics.helpers import B, F, W, run_valid, uniform


@pytest.mark.parametrize(("p", "m"), [(1, 3), (2, 1), (4, 4), (4, 9), (8, 16)])
def test_bubble_and_peak_closed_forms(p: int, m: int) -> None:
    schedule, metrics = run_valid("gpipe", uniform(p, m, activation_memory=2))
    assert not schedule.split_backward
    assert metrics.makespan - m * (F + B + W) == (p - 1) * (F + B + W)
    # Every device holds all m microbatches before its first backward.
    assert metrics.peak_memory == (2.0 * m,) * p


@pytest.mark.parametrize(("placement", "chunks"), [("interleaved", 2), ("interleaved", 3), ("vshape", 2)])
def test_any_placement_fills_then_drains(placement: str, chunks: int) -> None:
    p, m = 3, 4
    schedule, metrics = run_valid("gpipe", uniform(p, m, chunks=chunks, placement=placement, p2p_time=0.5))
    for order in schedule.orders():
        kinds = "".join(kind for kind, _, _ in order)
        assert kinds == "F" * (m * chunks) + "B" * (m * chunks)
    # All of a device's activations (1/chunks per stage by default) are held at once.
    assert metrics.peak_memory == pytest.approx([float(m)] * p)
