from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from pipesat.models import InstanceError
from pipesat.models.plan_result import Configuration, Outcome
from pipesat.models.tolerance import same
from pipesat.solver.evaluate.validator import validate
from pipesat.solver.plan.executors import LocalExecutor
from pipesat.solver.plan.search import AssessTask, assess, brute_force, plan
from pipesat.solver.plan.spec import load_spec
from pipesat.solver.report.plan_text import no_best_text
from tests.conftest import ROOT
from tests.solver.plan.conftest import tiny


def ranking(result):
    return [(r.config, r.outcome, r.measure) for r in result.results]


def test_the_plan_agrees_with_brute_force_and_prunes(tiny_spec) -> None:
    executor = LocalExecutor(1)
    result = plan(tiny_spec, executor, time_budget=30, seed=0)
    everything = brute_force(tiny_spec, executor, time_limit=5)
    assert all(item.status == "optimal" for item in everything)  # the brute force is exact here
    best = result.best
    assert best is not None and best.measure is not None
    assert best.config == everything[0].config
    assert same(best.measure.iteration_ms, everything[0].measure.iteration_ms)
    assert result.count(Outcome.PRUNED) > 0
    assert result.best_gap == 0
    # Every pruned configuration is truly no better than the best, by the brute force.
    exact = {item.config: item.measure.iteration_ms for item in everything}
    for item in result.results:
        if item.outcome == Outcome.PRUNED:
            assert exact[item.config] >= best.measure.iteration_ms
            assert item.iteration_bound_ms <= exact[item.config] + 1e-9
    for item in everything:
        assert validate(item.schedule) == []
    assert result.best_schedule is not None and validate(result.best_schedule) == []
    assert result.best_schedule.source["plan"] == best.config.label


def test_the_ranking_is_ordered_and_every_schedule_fits(tiny_spec) -> None:
    result = plan(tiny_spec, LocalExecutor(2), time_budget=20, seed=0)
    feasible = result.feasible
    times = [item.measure.iteration_ms for item in feasible]
    assert times == sorted(times)
    assert len(result.results) == result.count(Outcome.SOLVED) + result.count(Outcome.PRUNED) + result.count(
        Outcome.REFUSED
    )
    for item in feasible:
        assert item.measure.memory_per_gpu <= item.usable_memory
        assert item.gap is not None and item.gap >= 0


def test_the_same_seed_gives_the_same_ranking(tiny_spec) -> None:
    # The waves (and so what is pruned) depend on how many solves run at once: keep it equal.
    first = plan(tiny_spec, LocalExecutor(2), time_budget=20, seed=3)
    second = plan(tiny_spec, LocalExecutor(2), time_budget=20, seed=3)
    assert ranking(first) == ranking(second)


def test_too_little_memory_is_refused_with_the_reason() -> None:
    spec = tiny(cluster={"gpu_memory": "480MiB"})
    result = plan(spec, LocalExecutor(1), time_budget=10)
    refused = [item for item in result.results if item.outcome == Outcome.REFUSED]
    assert refused and all(item.measure is None for item in refused)
    assert any("model state does not fit" in item.note for item in refused)
    assert result.results[-1].outcome == Outcome.REFUSED  # refused last
    one = assess(AssessTask(spec, Configuration(1, 1, 4, 1, "linear", 1, 1)))
    assert one.found is None and not one.shape


def test_activations_that_cannot_fit_are_refused_by_the_smallest_limit() -> None:
    spec = tiny(model={"seq_len": 8192, "hidden": 512}, cluster={"gpu_memory": "1GiB"})
    result = plan(spec, LocalExecutor(1), time_budget=10)
    notes = [item.note for item in result.results if item.outcome == Outcome.REFUSED]
    assert any("of activations (one microbatch through its stages)" in note for note in notes)


def test_no_configuration_at_all_is_one_line() -> None:
    spec = tiny(training={"global_batch": 1}, cluster={"gpus": 2})
    with pytest.raises(InstanceError, match="no configuration of 2 GPUs"):
        plan(spec, LocalExecutor(1), time_budget=5)


def test_nothing_that_fits_is_a_plan_without_a_best() -> None:
    result = plan(tiny(cluster={"gpu_memory": "1MiB"}), LocalExecutor(1), time_budget=10)
    assert result.best is None and result.best_schedule is None and not result.interrupted
    assert result.count(Outcome.REFUSED) == len(result.results) == 7
    assert no_best_text(result).startswith("no configuration fits the GPUs' memory")


def test_a_model_the_cost_model_refuses_is_its_reason() -> None:
    with pytest.raises(InstanceError, match=r"^hidden 500 is not divisible by heads 8"):
        plan(tiny(model={"hidden": 500}), LocalExecutor(1), time_budget=10)


def test_the_assessments_stop_at_the_end_of_the_budget() -> None:
    spec = load_spec(ROOT / "instances/plan/llama3-8b-32gpu.yaml")  # 230 assessments: far more than 3 s
    executor = LocalExecutor(2)
    try:
        result = plan(spec, executor, time_budget=3)
    finally:
        executor.close()
    assert result.wall_seconds <= 3 and not result.interrupted and result.timing_dependent
    unfinished = [item for item in result.results if item.outcome == Outcome.UNFINISHED]
    assert unfinished and {item.note for item in unfinished} == {"not assessed: the time budget ran out"}
    assert result.best_gap is None  # what was not assessed might be better


def test_a_signal_ends_the_plan_with_what_it_has() -> None:
    spec = load_spec(ROOT / "instances/plan/gpt-1.3b-16gpu.yaml")  # about 5 s of assessments, then solves
    executor = LocalExecutor(2)
    sent: list[float] = []

    def interrupt() -> None:
        sent.append(time.monotonic())
        os.kill(os.getpid(), signal.SIGINT)

    timer = threading.Timer(8, interrupt)
    timer.start()
    try:
        result = plan(spec, executor, time_budget=120)
    finally:
        timer.cancel()
        executor.close()
    assert sent and result.interrupted and time.monotonic() - sent[0] < 10
    assert result.best is not None and result.best_schedule is not None
    assert validate(result.best_schedule) == []
    assert all(item.note != "not searched: the time budget ran out" for item in result.results)
