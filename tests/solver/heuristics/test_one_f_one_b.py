"""1F1B: the closed forms (makespan, per-device memory) and the order of docs/reference.md."""

from __future__ import annotations

import pytest

from pipesat.solver.heuristics import NotApplicable, run_heuristic
from tests.solver.heuristics.helpers import B, F, W, run_valid, uniform

CASES = [(p, m) for p in (1, 2, 4, 8) for m in (1, max(p // 2, 1), p, 2 * p + 1)]


@pytest.mark.parametrize(("p", "m"), CASES)
def test_makespan_is_m_plus_p_minus_one_whole_passes(p: int, m: int) -> None:
    schedule, metrics = run_valid("1f1b", uniform(p, m))
    assert not schedule.split_backward  # W is fused into B
    assert metrics.makespan == (m + p - 1) * (F + B + W)


@pytest.mark.parametrize(("p", "m"), CASES)
def test_device_i_holds_at_most_min_p_minus_i_m_microbatches(p: int, m: int) -> None:
    _, metrics = run_valid("1f1b", uniform(p, m, activation_memory=2))
    assert metrics.peak_memory == tuple(2.0 * min(p - i, m) for i in range(p))
    assert metrics.max_peak_memory == 2.0 * min(p, m)


def test_fused_backward_is_slower_than_a_separate_w() -> None:
    # docs/reference.md, handwritten orders: with unit times, p=4, m=8 takes 33 fused (30 with W as its own op after B).
    _, metrics = run_valid("1f1b", uniform(4, 8, forward_times=1, backward_times=1, weight_times=1))
    assert metrics.makespan == 33


def test_warmup_then_pairs_then_cooldown() -> None:
    schedule, _ = run_valid("1f1b", uniform(4, 6))
    rank_1 = [kind for kind, _, _ in schedule.orders()[1]]
    assert "".join(rank_1) == "FF" + "FB" * 4 + "BB"


def test_refuses_chunked_placements() -> None:
    with pytest.raises(NotApplicable, match="needs one stage per device"):
        run_heuristic("1f1b", uniform(2, 4, chunks=2, placement="interleaved"))
