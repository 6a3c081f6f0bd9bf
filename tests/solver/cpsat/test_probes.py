"""Bisection probes: the order of the probes and what they prove, against an oracle that knows the optimum,
and the probes in a CP-SAT search (validated, proven against brute force), the opening probe included."""

from __future__ import annotations

import logging
import time

import pytest

from pipesat.models import Tuning
from pipesat.models.solve_result import StopReason
from pipesat.solver.cpsat.data import model_data
from pipesat.solver.cpsat.model import PipelineModel, build_model
from pipesat.solver.cpsat.probes import Bisection, Outcome, Probe, bisect
from pipesat.solver.cpsat.record import Record
from pipesat.solver.cpsat.search import SearchOutcome, _bisect, _outcome, search
from pipesat.solver.cpsat.search_parameters import SearchOptions
from pipesat.solver.cpsat.warm_start import ObjectiveRange, warm_start
from pipesat.solver.evaluate.bounds import lower_bound
from pipesat.solver.evaluate.metrics import compute_metrics
from pipesat.solver.evaluate.retime import timed_for
from pipesat.solver.heuristics import run_heuristic
from pipesat.solver.heuristics.one_at_a_time import one_at_a_time_orders
from tests.conftest import make_instance
from tests.solver.brute_force import brute_force_optimum, two_chunk_instance
from tests.strategies import assert_valid


class Oracle:
    """Probes of a problem whose optimum is `optimum`: refuted below `open_from`, open from there to the
    optimum, found above it (a schedule of value `found(T)`); each probe takes `cost` seconds of a fake clock."""

    def __init__(self, optimum: int, open_from: int | None = None, cost: float = 1.0, found_slack: int = 0) -> None:
        self.optimum, self.open_from, self.cost, self.found_slack = optimum, open_from, cost, found_slack
        self.now = 0.0
        self.asked: list[int] = []

    def probe(self, limit: int, seconds: float) -> Probe:
        self.asked.append(limit)
        self.now += min(self.cost, seconds)
        if limit >= self.optimum:
            value = max(self.optimum, limit - self.found_slack)
            return Probe(Outcome.FOUND, value, [value])
        if self.open_from is not None and limit >= self.open_from:
            return Probe(Outcome.OPEN)
        return Probe(Outcome.REFUTED)

    def clock(self) -> float:
        return self.now


def test_probes_refuting_and_finding_close_on_the_optimum() -> None:
    oracle = Oracle(optimum=37, found_slack=2)
    result = bisect(10, 60, oracle.probe, seconds=100, gap=0.0, clock=oracle.clock)
    assert result == Bisection(37, 37, [37], len(oracle.asked), interrupted=False)
    assert result.proven_optimal(60) and oracle.asked[0] == 10


def test_a_refuted_probe_raises_the_bound_to_the_next_value_an_optimum_can_take() -> None:
    oracle = Oracle(optimum=40)
    result = bisect(10, 60, oracle.probe, 100, 0.0, oracle.clock, least_value_from=lambda t: -(-t // 10) * 10)
    assert result.lower == 40 and result.proven_optimal(60)
    # 10 refuted proves 20, so the next probe is at the middle of 20 and 59 (of 11 and 59 without).
    assert oracle.asked[:2] == [10, 39]
    assert len(oracle.asked) < bisect(10, 60, Oracle(optimum=40).probe, 100, 0.0, oracle.clock).probes


def test_a_schedule_at_the_bound_is_optimal_at_once() -> None:
    oracle = Oracle(optimum=10)
    result = bisect(10, 60, oracle.probe, seconds=100, gap=0.0, clock=oracle.clock)
    assert oracle.asked == [10] and result.value == 10 and result.proven_optimal(60)


def test_open_probes_send_the_next_towards_the_bound_and_stop_there() -> None:
    oracle = Oracle(optimum=50, open_from=30)
    result = bisect(10, 60, oracle.probe, seconds=100, gap=0.0, clock=oracle.clock)
    assert result.lower == 30 and result.value is None and not result.proven_optimal(60)
    assert oracle.asked[-1] == 30  # the last probe was at the bound, which stayed open
    assert all(limit < 50 for limit in oracle.asked)  # nothing above an open probe was asked


def test_refuting_up_to_the_start_proves_the_start_optimal() -> None:
    oracle = Oracle(optimum=60)
    result = bisect(10, 60, oracle.probe, seconds=100, gap=0.0, clock=oracle.clock)
    assert result.lower == 60 and result.value is None and result.proven_optimal(60)


def test_the_probes_stop_when_their_time_is_spent() -> None:
    oracle = Oracle(optimum=50, cost=10)
    result = bisect(10, 60, oracle.probe, seconds=25, gap=0.0, clock=oracle.clock)
    # Each probe takes what it needs of what is left: 10, 10, then the last 5.
    assert len(oracle.asked) == result.probes == 3 and oracle.now == pytest.approx(25)
    assert result.lower < 50 and not result.proven_optimal(60)


def test_the_probes_stop_at_the_gap_asked_for() -> None:
    oracle = Oracle(optimum=100)
    result = bisect(100, 200, oracle.probe, seconds=100, gap=0.1, clock=oracle.clock)
    assert result.lower == 100 and oracle.asked == [100]
    assert bisect(100, 109, Oracle(optimum=105).probe, seconds=100, gap=0.1, clock=oracle.clock).probes == 0


def test_an_interrupted_probe_ends_the_bisection() -> None:
    result = bisect(10, 60, lambda limit, seconds: Probe(Outcome.INTERRUPTED), 100, 0.0, time.monotonic)
    assert result.interrupted and result.probes == 1


CHUNKED = two_chunk_instance("vshape")


@pytest.mark.parametrize("objective", ["makespan", "span"])
def test_cpsat_probes_alone_prove_the_brute_force_optimum(objective: str) -> None:
    model = build_model(model_data(CHUNKED, objective=objective))
    objective_range = warm_start(model, one_at_a_time_orders(CHUNKED, False))
    assert objective_range.upper is not None
    options = SearchOptions(
        workers=1, seed=0, deterministic=False, gap=0.0, deadline=time.monotonic() + 20, time_limit=20
    )
    bound = lower_bound(CHUNKED, objective, False)
    record = Record(time.monotonic(), model.data.ticks_per_unit, None, bound, model.data.proven_bound, None)
    bisection = _bisect(model, options, objective_range.lower, objective_range.upper, record)
    assert bisection.proven_optimal(objective_range.upper) and bisection.values == record.values
    outcome = _outcome(model, record, StopReason.PROOF, "proven by the bisection probes")
    assert outcome.orders is not None
    value = compute_metrics(assert_valid(timed_for(objective, CHUNKED, outcome.orders))).objective(objective)
    assert value == pytest.approx(brute_force_optimum(CHUNKED, False, objective)) == pytest.approx(outcome.bound)


def test_a_deterministic_search_does_not_probe(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="pipesat")
    model = build_model(model_data(CHUNKED, objective="makespan"))
    objective_range = warm_start(model, one_at_a_time_orders(CHUNKED, False))
    options = SearchOptions(
        workers=1, seed=0, deterministic=True, gap=0.0, deadline=time.monotonic() + 20, time_limit=20
    )
    outcome = search(model, options, time.monotonic(), 0.0, None, None, objective_range)
    assert outcome.stopped_by == StopReason.PROOF and outcome.orders is not None
    assert not any("probe" in message for message in caplog.messages)


def _zero_bubble_start(p: int, m: int, limit: str, name: str) -> tuple[PipelineModel, ObjectiveRange]:
    """The makespan model of p devices, m microbatches, F/B/W 2/3/1, p2p 1 under `limit`, hinted with
    the handwritten schedule `name`."""
    instance = make_instance(p, m, forward_times=2, backward_times=3, weight_times=1, p2p_time=1, memory_limit=limit)
    model = build_model(model_data(instance, objective="makespan", split_backward=True))
    return model, warm_start(model, run_heuristic(name, instance).orders())


def _search_logged(model: PipelineModel, objective_range: ObjectiveRange) -> SearchOutcome:
    options = SearchOptions(
        workers=1, seed=0, deterministic=False, gap=0.0, deadline=time.monotonic() + 20, time_limit=20
    )
    bound = lower_bound(model.data.instance, "makespan", True)
    outcome = search(model, options, time.monotonic(), bound, None, None, objective_range)
    assert outcome.orders is not None
    assert_valid(timed_for("makespan", model.data.instance, outcome.orders))
    return outcome


def test_an_opening_probe_finds_a_schedule_at_the_bound_near_the_start(caplog: pytest.LogCaptureFixture) -> None:
    # p3 m12 at 2x: ZB-H2 takes 82, the analytic bound is 78, and a schedule there proves it optimal.
    caplog.set_level(logging.INFO, logger="pipesat")
    model, objective_range = _zero_bubble_start(3, 12, "2x", "zb-h2")
    assert (objective_range.lower, objective_range.upper) == (78, 82)
    outcome = _search_logged(model, objective_range)
    assert outcome.stopped_by == StopReason.PROOF and outcome.reason == "proven by the opening probe"
    assert outcome.bound == 78 and outcome.tick_optimum == 78
    assert "probe: a value of at most 78? found" in caplog.text


def test_an_opening_probe_refuted_raises_the_bound_for_the_search(caplog: pytest.LogCaptureFixture) -> None:
    # p3 m8 at 2x: ZB-auto takes 55 over a bound of 54; the probe refutes 54, the search proves 55.
    caplog.set_level(logging.INFO, logger="pipesat")
    model, objective_range = _zero_bubble_start(3, 8, "2x", "zb-auto")
    assert (objective_range.lower, objective_range.upper) == (54, 55)
    outcome = _search_logged(model, objective_range)
    assert "probe: a value of at most 54? refuted" in caplog.text
    assert outcome.stopped_by == StopReason.PROOF and outcome.bound == 55


def test_no_opening_probe_for_a_start_far_from_the_bound(caplog: pytest.LogCaptureFixture) -> None:
    # p4 m6 at 2x: ZB-auto's 52 is more than Tuning.opening_gap over the bound of 47.
    caplog.set_level(logging.INFO, logger="pipesat")
    model, objective_range = _zero_bubble_start(4, 6, "2x", "zb-auto")
    assert objective_range.upper is not None
    assert objective_range.upper > objective_range.lower * (1 + Tuning().opening_gap)
    outcome = _search_logged(model, objective_range)
    assert outcome.stopped_by == StopReason.PROOF
    assert "probe:" not in caplog.text
