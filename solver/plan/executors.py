"""Where the plan's independent tasks run: a local process pool, or an existing Ray cluster.

Both run a top-level function over a list of picklable tasks and return the results in the tasks'
order, never in the order they finished, so the plan that uses them is the same whichever runs it.
`on_poll` is called after every task that finishes and at least every POLL_SECONDS while they run
(the progress line). Ray is imported only by `RayExecutor`, and only when it is asked for.
"""

from __future__ import annotations

import concurrent.futures
import multiprocessing
from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar

from pipesat.models import InputError

T = TypeVar("T")
R = TypeVar("R")
POLL_SECONDS = 0.5
RAY_HINT = "--executor ray needs Ray: pip install -e '.[ray]' (or pip install 'ray==2.60.0')"


class Executor(Protocol):
    """Runs tasks `parallel` at a time."""

    name: str
    parallel: int

    def run(
        self, function: Callable[[T], R], tasks: Sequence[T], on_poll: Callable[[int], None] | None = None
    ) -> list[R]:
        """`function` of every task, in the tasks' order; `on_poll(tasks finished)` now and then."""
        ...

    def close(self) -> None: ...


class LocalExecutor:
    """A pool of `parallel` processes on this machine (forked where the platform can, so they start
    at once); with `parallel` 1 the tasks run in this process."""

    name = "local"

    def __init__(self, parallel: int) -> None:
        self.parallel = parallel
        self._pool: concurrent.futures.ProcessPoolExecutor | None = None

    def run(
        self, function: Callable[[T], R], tasks: Sequence[T], on_poll: Callable[[int], None] | None = None
    ) -> list[R]:
        if self.parallel == 1:
            results = []
            for task in tasks:
                results.append(function(task))
                if on_poll is not None:
                    on_poll(len(results))
            return results
        if self._pool is None:
            methods = multiprocessing.get_all_start_methods()
            context = multiprocessing.get_context("fork" if "fork" in methods else "spawn")
            self._pool = concurrent.futures.ProcessPoolExecutor(self.parallel, mp_context=context)
        futures = [self._pool.submit(function, task) for task in tasks]
        pending = set(futures)
        try:
            while pending:
                _, pending = concurrent.futures.wait(
                    pending, timeout=POLL_SECONDS, return_when=concurrent.futures.FIRST_COMPLETED
                )
                if on_poll is not None:
                    on_poll(len(futures) - len(pending))
        except BaseException:
            for future in futures:
                future.cancel()
            raise
        return [future.result() for future in futures]

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(cancel_futures=True)
            self._pool = None


def _call(function: Callable[[Any], Any], task: Any) -> Any:
    return function(task)


class RayExecutor:
    """Tasks on a Ray cluster: the one this process is already connected to, the one at `address`
    (`HEAD:6379`), or else a local Ray started here (and stopped by `close`). Each task asks Ray for
    `cpus_per_task` CPUs (its CP-SAT workers); at most `parallel` run at once."""

    name = "ray"

    def __init__(self, parallel: int, cpus_per_task: int, address: str | None = None) -> None:
        ray = require_ray()
        self.parallel = parallel
        self._ray = ray
        self._started = False
        if not ray.is_initialized():
            try:
                ray.init(address=address, include_dashboard=False, log_to_driver=False, configure_logging=False)
            except Exception as error:  # Ray raises ConnectionError, RuntimeError, ValueError...
                where = f"the Ray cluster at {address}" if address else "a local Ray"
                first_line = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
                raise InputError(f"cannot start or reach {where}: {first_line}") from None
            self._started = True
        self._remote = ray.remote(num_cpus=cpus_per_task, max_retries=0)(_call)

    def run(
        self, function: Callable[[T], R], tasks: Sequence[T], on_poll: Callable[[int], None] | None = None
    ) -> list[R]:
        ray = self._ray
        refs = [self._remote.remote(function, task) for task in tasks]
        pending = list(refs)
        while pending:
            _, pending = ray.wait(pending, num_returns=len(pending), timeout=POLL_SECONDS)
            if on_poll is not None:
                on_poll(len(refs) - len(pending))
        return ray.get(refs)

    def close(self) -> None:
        if self._started:
            self._ray.shutdown()
            self._started = False


def require_ray() -> Any:
    """The `ray` module, or one line saying how to install it."""
    try:
        import ray
    except ImportError:
        raise InputError(RAY_HINT) from None
    return ray


def make_executor(name: str, parallel: int, cpus_per_task: int, address: str | None = None) -> Executor:
    """`local` or `ray` (an address only with ray)."""
    if name == "local":
        if address is not None:
            raise InputError("--ray-address goes with --executor ray")
        return LocalExecutor(parallel)
    if name == "ray":
        return RayExecutor(parallel, cpus_per_task, address)
    raise InputError(f"unknown executor {name!r}; use local or ray")
