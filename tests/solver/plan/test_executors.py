from __future__ import annotations

import builtins
import importlib.util
import os
import signal
import socket
import socketserver
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from pipesat.models import InputError, Tuning
from pipesat.solver.plan.executors import (
    RAY_CLOSING,
    RAY_HINT,
    STOP_WAIT,
    Executor,
    Interrupted,
    LocalExecutor,
    make_executor,
    require_ray,
)
from pipesat.solver.plan.search import PlanOptions, plan
from pipesat.solver.plan.space import enumerate_space
from pipesat.solver.plan.tasks import AssessTask, bound
from tests.solver.plan.conftest import tiny

HAS_RAY = importlib.util.find_spec("ray") is not None


def square(x: int) -> int:
    return x * x


def busy(seconds: float) -> str:
    """Works for `seconds`, answering a stop as a solve does: with what it has."""
    end = time.monotonic() + seconds
    try:
        while time.monotonic() < end:
            sum(range(1000))
    except KeyboardInterrupt:
        return "stopped"
    return "done"


def deaf(seconds: float) -> str:
    """Sleeps in C for `seconds`: it cannot hear a stop, so its worker is killed."""
    time.sleep(seconds)
    return "done"


def children() -> list[str]:
    """The processes this one has started and not reaped."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if stat.rsplit(")", 1)[1].split()[1] == str(os.getpid()):
                found.append(entry)
    return found


def stops_tasks(executor: Executor) -> None:
    """A deadline stops the running tasks (a task that answers keeps its answer, one that cannot hear
    is killed) and drops the rest; a signal does the same and raises `Interrupted`."""
    assert executor.run(square, [1, 2]) == [1, 4]  # the workers are up
    start = time.monotonic()
    results = executor.run(busy, [0.0, 30.0, 30.0], deadline=time.monotonic() + 3)
    assert results[:2] == ["done", "stopped"] and results[2] in ("stopped", None)  # None: it had not begun
    assert time.monotonic() - start < 3 + STOP_WAIT + 1.5
    assert executor.run(deaf, [0.0, 30.0], deadline=time.monotonic() + 1) == ["done", None]
    timer = threading.Timer(2, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    with pytest.raises(Interrupted) as stop:
        executor.run(busy, [0.0, 30.0, 30.0, 30.0])
    assert stop.value.results[0] == "done" and "stopped" in stop.value.results
    assert executor.run(square, [3]) == [9]  # it still works


@pytest.mark.parametrize("parallel", [1, 2])
def test_local_results_come_in_the_tasks_order(parallel: int) -> None:
    polls: list[int] = []
    executor = LocalExecutor(parallel)
    try:
        assert executor.run(square, list(range(7)), polls.append) == [x * x for x in range(7)]
    finally:
        executor.close()
    assert polls[-1] == 7


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="counts processes in /proc")
def test_local_tasks_stop_at_the_deadline_and_on_a_signal_and_no_worker_is_left() -> None:
    executor = LocalExecutor(2)
    try:
        stops_tasks(executor)
    finally:
        executor.close()
    assert children() == []


def test_bad_executor_choices_are_one_line() -> None:
    with pytest.raises(InputError, match="unknown executor"):
        make_executor("dask", 1, 1)
    with pytest.raises(InputError, match="`address` goes with the ray executor"):
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
        expected = plan(spec, local, PlanOptions(time_budget=20, seed=1))
    finally:
        local.close()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        executor = make_executor("ray", 2, 1)
        found = plan(spec, executor, PlanOptions(time_budget=20, seed=1))
        executor.close()  # connected to the test's Ray: leaves it running
        assert ray.is_initialized()
    finally:
        ray.shutdown()
    assert found.executor == "ray"
    assert [(r.config, r.outcome, r.measure, r.status) for r in found.results] == [
        (r.config, r.outcome, r.measure, r.status) for r in expected.results
    ]
    assert found.best_schedule is not None and found.best_schedule.ops == expected.best_schedule.ops


def _tuned_bounds() -> tuple[list[AssessTask], list[float], list[float]]:
    """Bound tasks carrying a tuning whose knapsacks do not search (`knapsack_nodes` 0: their
    fractional bounds), and the bounds they give here, and with the default tuning: lower on some
    configurations of this memory-tight spec, so that a worker that read the default would differ."""
    spec = tiny(cluster={"gpu_memory": "256MiB"}, training={"global_batch": 8})
    configs, _, _ = enumerate_space(spec)
    tuned = Tuning(knapsack_nodes=0)
    tasks = [AssessTask(spec=spec, config=config, tuning=tuned) for config in configs]
    here = [bound(task).makespan_bound for task in tasks]
    default = [bound(AssessTask(spec=spec, config=config)).makespan_bound for config in configs]
    assert here != default
    return tasks, here, default


def test_a_tuning_reaches_the_pool_workers() -> None:
    tasks, here, _ = _tuned_bounds()
    executor = LocalExecutor(2)
    try:
        found = executor.run(bound, tasks)
    finally:
        executor.close()
    assert [assessment.makespan_bound for assessment in found if assessment is not None] == here


@pytest.mark.skipif(not HAS_RAY, reason=RAY_HINT)
def test_a_tuning_reaches_the_ray_workers() -> None:
    # Ray's workers are processes of their own that import pipesat afresh: module state set here
    # would not reach them, the tasks' tuning does.
    import ray

    tasks, here, _ = _tuned_bounds()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        executor = make_executor("ray", 2, 1)
        try:
            found = executor.run(bound, tasks)
        finally:
            executor.close()
    finally:
        ray.shutdown()
    assert [assessment.makespan_bound for assessment in found if assessment is not None] == here


@pytest.mark.skipif(not HAS_RAY, reason=RAY_HINT)
def test_ray_tasks_stop_at_the_deadline_and_on_a_signal() -> None:
    import ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    ray.cloudpickle.register_pickle_by_value(sys.modules[busy.__module__])  # Ray's workers cannot import tests
    try:
        executor = make_executor("ray", 2, 1)
        try:
            stops_tasks(executor)
        finally:
            executor.close()
    finally:
        ray.shutdown()


class _NotRay(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        self.request.recv(64)
        self.request.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n")


@pytest.mark.skipif(not HAS_RAY, reason=RAY_HINT)
def test_an_address_without_a_ray_head_is_one_line_within_the_timeout() -> None:
    start = time.monotonic()
    with pytest.raises(InputError, match=r"^cannot reach the Ray cluster at 127\.0\.0\.1:1 within 2 s: "):
        make_executor("ray", 1, 1, "127.0.0.1:1", timeout=2)
    with socketserver.TCPServer(("127.0.0.1", 0), _NotRay) as server:
        threading.Thread(target=server.handle_request, daemon=True).start()
        address = f"127.0.0.1:{server.server_address[1]}"
        with pytest.raises(InputError, match="it answers, but not as a Ray head"):
            make_executor("ray", 1, 1, address, timeout=2)
    with pytest.raises(InputError, match="is not HEAD:PORT"):
        make_executor("ray", 1, 1, "head:port", timeout=2)
    with socket.create_server(("127.0.0.1", 0)) as silent:  # takes the connection, never answers
        address = f"127.0.0.1:{silent.getsockname()[1]}"
        with pytest.raises(InputError, match=r"^cannot reach the Ray cluster at .* within 1 s: timed out; "):
            make_executor("ray", 1, 1, address, timeout=1)
    assert time.monotonic() - start < 10


@pytest.mark.skipif(not HAS_RAY, reason=RAY_HINT)
def test_a_ray_started_here_says_nothing_and_stops_within_its_closing(capfd: pytest.CaptureFixture[str]) -> None:
    import ray

    assert not ray.is_initialized()
    executor = make_executor("ray", 1, 1)  # a local Ray, started here
    try:
        assert executor.run(square, [3]) == [9]
    finally:
        start = time.monotonic()
        executor.close()
        closed_in = time.monotonic() - start
    assert not ray.is_initialized()
    assert capfd.readouterr().err == ""  # no Ray warning (its token authentication line), no worker line
    assert closed_in <= RAY_CLOSING["started"], closed_in
