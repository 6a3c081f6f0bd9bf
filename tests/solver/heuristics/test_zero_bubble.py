"""ZB-H1 and ZB-H2: the closed forms (bubbles, peaks, m <= p, comm) and W lag of docs/reference.md."""

from __future__ import annotations

import pytest

from pipesat.solver.heuristics import NotApplicable, run_heuristic
from tests.solver.heuristics.helpers import B, F, W, run_valid, uniform

M_B, M_W = 2.0, 1.0


@pytest.mark.parametrize("p", [2, 4, 8, 16])
@pytest.mark.parametrize("extra", [0, 1, 5])
def test_zb_h1_bubble_and_per_device_peak(p: int, extra: int) -> None:
    m = p + extra
    _, metrics = run_valid("zb-h1", uniform(p, m, activation_memory=M_B, weight_memory=M_W))
    assert metrics.makespan - m * (F + B + W) == (p - 1) * (F + B - W)
    # Device i (1-indexed) holds (p-i+1) whole activations and (i-1) pending W's share.
    assert metrics.peak_memory == tuple((p - i + 1) * M_B + (i - 1) * M_W for i in range(1, p + 1))
    assert metrics.max_peak_memory == p * M_B


@pytest.mark.parametrize("p", [2, 4, 8, 16])
@pytest.mark.parametrize("extra", [-1, 0, 4])
def test_zb_h2_bubble_and_peak(p: int, extra: int) -> None:
    m = 2 * p + extra  # ZB-H2's warm-up needs m >= 2p - 1
    _, metrics = run_valid("zb-h2", uniform(p, m, activation_memory=M_B, weight_memory=M_W))
    assert metrics.makespan - m * (F + B + W) == (p - 1) * (F + B - 2 * W)
    assert metrics.max_peak_memory == (2 * p - 1) * M_B


@pytest.mark.parametrize("p", [2, 4, 8])
@pytest.mark.parametrize("c", [0.25, 1.0])
def test_zb_h2_max_span_with_comm(p: int, c: float) -> None:
    m = 3 * p
    _, metrics = run_valid("zb-h2", uniform(p, m, p2p_time=c))
    assert metrics.max_span - m * (F + B + W) == (p - 1) * (F + B + 2 * c - 2 * W)


@pytest.mark.parametrize("name", ["zb-h1", "zb-h2"])
@pytest.mark.parametrize(("p", "m"), [(1, 1), (2, 1), (4, 2), (4, 4), (8, 3), (8, 8)])
def test_few_microbatches_take_m_plus_p_minus_one_f_b_plus_w(name: str, p: int, m: int) -> None:
    _, metrics = run_valid(name, uniform(p, m))
    assert metrics.makespan == (m + p - 1) * (F + B) + W


@pytest.mark.parametrize(("name", "factor"), [("zb-h1", 1), ("zb-h2", 2)])
def test_w_lags_b_by_factor_times_rank(name: str, factor: int) -> None:
    p, m = 4, 12
    schedule, _ = run_valid(name, uniform(p, m))
    for rank, order in enumerate(schedule.orders()):
        warmup = [kind for kind, _, _ in order].index("B") - 1
        assert warmup == factor * (p - 1 - rank)
        # Just before the k-th W (0-based) on this rank, k + factor*rank + 1 Bs have run, until Bs run out.
        done = 0
        for kind, _, microbatch in order:
            if kind == "B":
                done += 1
            elif kind == "W" and done < m:
                assert done == microbatch + factor * rank + 1


@pytest.mark.parametrize("name", ["zb-h1", "zb-h2"])
def test_refusals(name: str) -> None:
    with pytest.raises(NotApplicable, match="needs a split backward"):
        run_heuristic(name, uniform(4, 8, split=False))
    with pytest.raises(NotApplicable, match="needs one stage per device"):
        run_heuristic(name, uniform(4, 8, chunks=2, placement="interleaved"))
