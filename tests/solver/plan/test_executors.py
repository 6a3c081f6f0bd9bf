from __future__ import annotations

import builtins
import importlib.util
from typing import Any

import pytest

from pipesat.models import InputError
from pipesat.solver.plan.executors import RAY_HINT, LocalExecutor, make_executor, require_ray
from pipesat.solver.plan.search import plan
from tests.solver.plan.conftest import tiny

HAS_RAY = importlib.util.find_spec("ray") is not None


def square(x: int) -> int:
    return x * x


@pytest.mark.parametrize("parallel", [1, 2])
def test_local_results_come_in_the_tasks_order(parallel: int) -> None:
    polls: list[int] = []
    executor = LocalExecutor(parallel)
    try:
        assert executor.run(square, list(range(7)), polls.append) == [x * x for x in range(7)]
    finally:
        executor.close()
    assert polls[-1] == 7


def test_bad_executor_choices_are_one_line() -> None:
    with pytest.raises(InputError, match="unknown executor"):
        make_executor("dask", 1, 1)
    with pytest.raises(InputError, match="--ray-address goes with --executor ray"):
        make_executor("local", 1, 1, "head:6379")


def test_without_ray_the_hint_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    real_import = builtins.__import__

    def no_ray(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "ray":
            raise ImportError("No module named 'ray'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_ray)
    with pytest.raises(InputError, match=r"pip install -e '\.\[ray\]'") as error:
        require_ray()
    assert str(error.value) == RAY_HINT


@pytest.mark.skipif(not HAS_RAY, reason=RAY_HINT)
def test_ray_gives_the_local_ranking() -> None:
    import ray

    spec = tiny()
    local = LocalExecutor(2)
    try:
        expected = plan(spec, local, time_budget=20, seed=1)
    finally:
        local.close()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        executor = make_executor("ray", 2, 1)
        found = plan(spec, executor, time_budget=20, seed=1)
        executor.close()  # connected to the test's Ray: leaves it running
        assert ray.is_initialized()
    finally:
        ray.shutdown()
    assert found.executor == "ray"
    assert [(r.config, r.outcome, r.measure, r.status) for r in found.results] == [
        (r.config, r.outcome, r.measure, r.status) for r in expected.results
    ]
    assert found.best_schedule is not None and found.best_schedule.ops == expected.best_schedule.ops
