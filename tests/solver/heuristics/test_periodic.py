"""Periodic starting schedules: never deadlock, fit every feasible limit, and beat ZB-auto under tight ones."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipesat.models import Instance
from pipesat.solver.evaluate.metrics import compute_metrics
from pipesat.solver.evaluate.simulator import simulate
from pipesat.solver.heuristics import run_heuristic
from pipesat.solver.heuristics.periodic import grid_periods, order_peaks, periodic_orders, periodic_schedule
from tests.conftest import make_instance
from tests.strategies import PROPERTY_SETTINGS, assert_valid, instances, with_feasible_limit


@PROPERTY_SETTINGS
@given(instances(), st.floats(min_value=0.0, max_value=50.0))
def test_every_period_gives_orders_that_run(instance: Instance, period: float) -> None:
    schedule = simulate(
        dataclasses.replace(instance, memory_limit=None), periodic_orders(instance, instance.split_backward, period)
    )
    assert_valid(schedule)


@PROPERTY_SETTINGS
@given(instances(), st.sampled_from([0.0, 0.3, 1.0]))
def test_the_schedule_fits_every_feasible_limit(instance: Instance, fraction: float) -> None:
    limited = with_feasible_limit(instance, fraction)
    schedule = assert_valid(periodic_schedule(limited, limited.split_backward))
    assert limited.over_limit(compute_metrics(schedule).peak_memory) == []


def test_under_half_the_1f1b_peak_it_beats_zb_auto() -> None:
    # ZB-auto falls back to nearly one microbatch at a time; a periodic schedule keeps more in flight.
    instance = make_instance(4, 16, forward_times=5, backward_times=6, weight_times=4, p2p_time=1, memory_limit="0.5x")
    periodic = assert_valid(periodic_schedule(instance, split=True))
    zb_auto = assert_valid(run_heuristic("zb-auto", instance))
    assert compute_metrics(periodic).makespan < compute_metrics(zb_auto).makespan


@PROPERTY_SETTINGS
@given(instances(), st.floats(min_value=0.0, max_value=50.0))
def test_the_peaks_of_an_order_are_its_schedules(instance: Instance, period: float) -> None:
    split = instance.split_backward
    orders = periodic_orders(instance, split, period)
    schedule = assert_valid(simulate(dataclasses.replace(instance, memory_limit=None), orders))
    assert order_peaks(instance, split, orders) == pytest.approx(list(compute_metrics(schedule).peak_memory))


def test_the_schedule_is_no_worse_than_any_period_of_the_grid() -> None:
    # Every period is tried, whatever the time (then more between the best one's neighbours): the
    # start is a function of the instance.
    instance = make_instance(
        4, 8, chunks=3, placement="interleaved", forward_times=1, backward_times=2, weight_times=1, memory_limit="0.5x"
    )
    schedule = assert_valid(periodic_schedule(instance, True))
    assert not instance.over_limit(compute_metrics(schedule).peak_memory)
    fitting = []
    for period in grid_periods(instance, True):
        metrics = compute_metrics(simulate(instance, periodic_orders(instance, True, period)))
        if not instance.over_limit(metrics.peak_memory):
            fitting.append(metrics.makespan)
    assert compute_metrics(schedule).makespan <= min(fitting) + 1e-9
    assert schedule.orders() == periodic_schedule(instance, True).orders()
