"""The search as the parent sees it: progress reports between news, and when a search has stalled."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from pipesat.solver.cpsat.child import Bound, Solution
from pipesat.solver.cpsat.record import Record


class _FakeClock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.time = 100.0

    def __call__(self) -> float:
        return self.time


def test_progress_refreshes_every_half_second_between_news() -> None:
    clock = _FakeClock()
    reports: list[tuple[float, float | None, float | None]] = []
    record = Record(100.0, 2, 30.0, 20.0, lambda ticks: ticks / 2, lambda *args: reports.append(args), clock)
    record.refresh()  # the first poll shows the line at once, with the analytic bound
    assert reports == [(0.0, 30.0, 20.0)]
    for elapsed in (0.1, 0.2, 0.4):
        clock.time = 100.0 + elapsed
        record.refresh()
    assert len(reports) == 1
    clock.time = 100.5
    record.refresh()
    assert reports[-1] == (0.5, 30.0, 20.0)
    clock.time = 100.7
    record.on_message(Bound(44.0))  # a better bound is news at once: 22 in instance units
    record.on_message(Bound(30.0))  # a worse one does not lower it
    assert reports[-2:] == [(pytest.approx(0.7), 30.0, 22.0)] * 2
    clock.time = 101.1
    record.refresh()
    assert len(reports) == 4
    clock.time = 101.2
    record.refresh()
    assert reports[-1] == (pytest.approx(1.2), 30.0, 22.0)
    clock.time = 103.0
    record.on_message(Solution(50.0, 46.0, [0]))
    assert reports[-1] == (3.0, 25.0, 23.0) and record.found_at == 3.0


def test_a_record_stalls_when_neither_its_value_nor_its_bound_moves_near_the_bound() -> None:
    clock = SimpleNamespace(time=100.0)
    record = Record(100.0, 1, 21.0, 20.0, lambda ticks: ticks, None, lambda: clock.time)
    stalled = record.stalled_for(5.0, 0.05)
    clock.time = 104.0
    assert not stalled()
    record.on_message(Bound(19.0))  # no higher than the bound it has: no news
    clock.time = 105.0
    assert stalled()
    record.on_message(Bound(20.5))
    assert not stalled()
    clock.time = 109.0
    record.on_message(Solution(21.0, 20.5, [0]))
    clock.time = 113.0
    assert not stalled()
    clock.time = 114.0
    assert stalled()
    far = Record(100.0, 1, 30.0, 20.0, lambda ticks: ticks, None, lambda: clock.time)
    clock.time = 200.0
    assert not far.stalled_for(5.0, 0.05)() and far.stalled_for(5.0, 0.5)()  # 50% from its bound
