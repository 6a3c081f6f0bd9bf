"""Interleaved 1F1B (Megatron): bubble, peak and order as in docs/reference.md, and its requirements."""

from __future__ import annotations

import pytest

from pipesat.models import step_keys
from pipesat.solver.heuristics import NotApplicable, run_heuristic
from tests.solver.heuristics.helpers import B, F, W, run_valid, uniform


def chunked(p: int, m: int, v: int, **extra):
    """The uniform model cut into v chunks per device: per-chunk times F/v, B/v, W/v (the instance
    splits each number over a device's chunks), so a device's work per microbatch stays F + B + W."""
    return uniform(p, m, chunks=v, placement="interleaved", **extra)


@pytest.mark.parametrize("p", [2, 4, 8])
@pytest.mark.parametrize("v", [2, 3, 4])
@pytest.mark.parametrize("groups", [1, 2, 3])
def test_bubble_is_a_vth_of_1f1b(p: int, v: int, groups: int) -> None:
    m = groups * p
    schedule, metrics = run_valid("interleaved", chunked(p, m, v))
    assert not schedule.split_backward
    assert metrics.makespan - m * (F + B + W) == pytest.approx((p - 1) * (F + B + W) / v)


@pytest.mark.parametrize(("p", "v"), [(2, 2), (4, 2), (4, 3), (8, 2), (8, 4)])
def test_peak_on_device_0(p: int, v: int) -> None:
    # Each chunk holds 1/v of a device's activation (the default), so device 0 holds ((v+1)p-1)/v M_B.
    _, metrics = run_valid("interleaved", chunked(p, 2 * p, v))
    assert metrics.peak_memory[0] == pytest.approx(((v + 1) * p - 1) / v)
    assert metrics.max_peak_memory == pytest.approx(metrics.peak_memory[0])


def test_megatron_order_on_each_rank() -> None:
    p, v, m = 2, 2, 4
    schedule, _ = run_valid("interleaved", chunked(p, m, v, p2p_time=0.25))
    orders = schedule.orders()
    # Rank 1 (stages 1 and 3): warm-up 2(p-r-1) + (v-1)p = 2 forwards, then F/B pairs, then the rest of B.
    assert orders[1] == [
        ("F", 1, 0), ("F", 1, 1),
        ("F", 3, 0), ("B", 3, 0),
        ("F", 3, 1), ("B", 3, 1),
        ("F", 1, 2), ("B", 1, 0),
        ("F", 1, 3), ("B", 1, 1),
        ("F", 3, 2), ("B", 3, 2),
        ("F", 3, 3), ("B", 3, 3),
        ("B", 1, 2), ("B", 1, 3),
    ]  # fmt: skip
    # Rank 0's warm-up 2 + 2 = 4 forwards, then one F before its first B.
    assert [kind for kind, _, _ in orders[0][:6]] == ["F"] * 5 + ["B"]


def test_warmup_is_capped_at_all_forwards() -> None:
    # p=4, v=2, m=4: rank 0 wants 2*3 + 4 = 10 warm-up forwards but has only 8: fill-drain on that rank.
    schedule, _ = run_valid("interleaved", chunked(4, 4, 2))
    assert "".join(kind for kind, _, _ in schedule.orders()[0]) == "F" * 8 + "B" * 8


@pytest.mark.parametrize(
    ("extra", "reason"),
    [
        ({}, "needs chunks >= 2 with interleaved placement"),
        ({"chunks": 2, "placement": "vshape"}, "needs chunks >= 2 with interleaved placement"),
        ({"chunks": 2, "placement": "interleaved", "num_microbatches": 6}, "divisible by the number of devices"),
    ],
)
def test_refusals(extra: dict, reason: str) -> None:
    with pytest.raises(NotApplicable, match=reason):
        run_heuristic("interleaved", uniform(4, 8, **extra))


@pytest.mark.parametrize(("p", "v"), [(2, 2), (4, 2), (4, 3)])
def test_the_overlapped_variant_pairs_the_steady_state_and_hides_the_all_to_all(p: int, v: int) -> None:
    moe = {"forward_comm_times": 0.3 * F, "backward_comm_times": 0.3 * B}
    plain, plain_metrics = run_valid("interleaved", chunked(p, 2 * p, v, **moe))
    paired, metrics = run_valid("interleaved-overlap", chunked(p, 2 * p, v, **moe))
    assert paired.has_pairs and not plain.has_pairs
    # The same order: each pair's ops where the plain order has them, one after the other.
    flat = [[key for step in order for key in step_keys(step)] for order in paired.orders()]
    assert flat == plain.orders()
    assert metrics.makespan < plain_metrics.makespan
    assert metrics.max_peak_memory == plain_metrics.max_peak_memory
