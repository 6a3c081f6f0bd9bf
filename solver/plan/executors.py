"""Where the plan's independent tasks run: a local process pool, or a Ray cluster.

Both run a top-level function over a list of picklable tasks and return the results in the tasks'
order, never in the order they finished, so the plan that uses them is the same whichever runs it.
`on_poll` is called after every task that finishes and at least every POLL_SECONDS while they run
(the progress line). Ray is imported only by `RayExecutor`, and only when it is asked for.

A run stops at its `deadline`, or on Ctrl-C or SIGTERM (a KeyboardInterrupt in this process): the
tasks not begun are dropped, and each one running is told to stop by a watcher thread beside it,
which raises KeyboardInterrupt in it once (`_stoppable`). A solve answers that as `pipesat solve`
answers Ctrl-C, with its best schedule so far, and that is the task's result; a task that ends
without one gives None. On a signal the run then raises `Interrupted` with the results in hand. A
task that has not answered within STOP_WAIT seconds is killed with its worker (the CP-SAT child of a
solve is gone by then: it gets STOP_GRACE), and `close` leaves no worker behind.
"""

from __future__ import annotations

import _thread
import abc
import asyncio
import concurrent.futures
import contextlib
import logging
import math
import multiprocessing
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures.process import BrokenProcessPool
from typing import Any, TypeVar

from pipesat.models import InputError
from pipesat.solver.cpsat.processes import STOP_GRACE, available_cores, end_with_parent
from pipesat.solver.plan.held_signals import signals_between_waits

T = TypeVar("T")
R = TypeVar("R")
POLL_SECONDS = 0.5
SIGNAL_SECONDS = 0.1
"""How often a run looks whether a signal came (`signals_between_waits`)."""
WATCH_SECONDS = 0.05
"""How often a task's watcher looks for the stop."""
STOP_WAIT = STOP_GRACE + 0.25
"""Seconds a stopped task has to hand in its result before its worker is killed."""
JOBS_PER_CORE = 4
"""The most tasks at once a core of this machine takes in a `LocalExecutor`: each is a process (a
solve's with its CP-SAT child) with its memory, and more than a few a core only share the core."""
RAY_HINT = "the ray executor needs Ray: pip install -e '.[ray]' (or pip install 'ray==2.60.0')"
RAY_TIMEOUT = 10.0
"""Seconds to reach a Ray cluster's head (`make_executor`'s `timeout`)."""
RAY_PORT = 6379
RAY_CLOSING = {"started": 1.0, "connected": 0.6, "given": 0.0}
"""Seconds to stop a Ray started here (its processes end one after another, its monitor killed first:
`_end_ray_monitor`; 0.3 s measured on the 2-core machine), to leave a cluster
reached at an address (and for the command to end after it), and to leave the Ray this process was
already connected to (nothing: it stays)."""
RAY_TRIES = "RAY_gcs_server_port_wait_time_s"
"""How many times, about a second apart, Ray tries to connect to a head that answers but refuses it."""
SETTINGS = 4
"""The type of an HTTP/2 SETTINGS frame: a gRPC server, as Ray's head is, answers a client's preface with one."""
HTTP2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, SETTINGS, 0, 0, 0, 0, 0])


class Interrupted(KeyboardInterrupt):
    """Ctrl-C or SIGTERM stopped a run: `results` holds each task's result, None where it has none."""

    def __init__(self, results: list[Any]) -> None:
        super().__init__("interrupted")
        self.results = results


class Executor(abc.ABC):
    """Runs tasks `parallel` at a time; `close` takes about `closing` seconds (the plan keeps them
    back from its budget). Each kind submits the tasks, stops them and collects their results its own
    way; when it stops them and what a stop raises is the same for all (`run`)."""

    name: str
    parallel: int
    closing: float

    def run(
        self,
        function: Callable[[T], R],
        tasks: Sequence[T],
        on_poll: Callable[[int], None] | None = None,
        deadline: float | None = None,
    ) -> list[R | None]:
        """`function` of every task, in the tasks' order; `on_poll(tasks finished)` now and then. A task
        still running at `deadline` (a `time.monotonic()`) is stopped (module notes): its result is
        what it answers, else None. Ctrl-C or SIGTERM stops the tasks the same way and raises
        `Interrupted` with the results."""
        self._clear()
        try:
            with signals_between_waits() as signalled:
                _wait(len(tasks), self._submit(function, tasks), on_poll, deadline, signalled)
        except KeyboardInterrupt:
            self._stop()
            raise Interrupted(self._results(len(tasks))) from None
        self._stop()
        return self._results(len(tasks))

    @abc.abstractmethod
    def _clear(self) -> None:
        """Forget the tasks of the last run."""

    @abc.abstractmethod
    def _submit(self, function: Callable[[T], R], tasks: Sequence[T]) -> Callable[[float], int]:
        """Start running `function` over `tasks`; a `wait(seconds)` for `_wait`, which returns how many
        of them are left."""

    @abc.abstractmethod
    def _stop(self) -> None:
        """Stop the tasks not finished (module notes)."""

    @abc.abstractmethod
    def _results(self, total: int) -> list[Any]:
        """The results of the `total` tasks, in their order; None for one without a result."""

    @abc.abstractmethod
    def close(self) -> None:
        """Stop what still runs; no worker outlives the executor."""


def _interrupt_once(signum: int, frame: object) -> None:
    """The stop, in a task: KeyboardInterrupt, once; later ones are ignored while the task winds down."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    raise KeyboardInterrupt


def _stoppable(function: Callable[[T], R], task: T, stopped: Callable[[float], bool]) -> R | None:
    """One task in a worker, with a watcher that raises KeyboardInterrupt in it once `stopped(seconds)`
    (which waits up to that long for the run's stop) says so; the task sees it at its next Python
    line, which the solves and assessments reach many times a second. Its result; None when it ended
    without one or the run was stopped before it began."""
    if stopped(0):
        return None
    done, lock = threading.Event(), threading.Lock()

    def watch() -> None:
        while not done.is_set():
            if stopped(WATCH_SECONDS):
                with lock:
                    if not done.is_set():
                        _thread.interrupt_main()  # a signal would not do in a Ray worker, whose C++ takes SIGINT
                return

    previous = signal.signal(signal.SIGINT, _interrupt_once)
    result: R | None = None
    try:
        try:
            threading.Thread(target=watch, name="pipesat-stop", daemon=True).start()
            result = function(task)
        finally:
            with lock:
                done.set()
    except KeyboardInterrupt:
        result = None
    signal.signal(signal.SIGINT, previous)
    return result


def _wait(
    total: int,
    wait: Callable[[float], int],
    on_poll: Callable[[int], None] | None,
    deadline: float | None,
    signalled: Callable[[], bool],
) -> None:
    """Call `wait(seconds)`, which returns how many of `total` tasks are left, until none is, `deadline`
    or `signalled()` (looked at every SIGNAL_SECONDS); `on_poll` when a task finished or POLL_SECONDS passed."""
    left, polled = total, time.monotonic()
    while left and not signalled():
        seconds = SIGNAL_SECONDS if deadline is None else min(SIGNAL_SECONDS, deadline - time.monotonic())
        if seconds <= 0:
            return
        now_left = wait(seconds)
        if on_poll is not None and (now_left < left or time.monotonic() - polled >= POLL_SECONDS):
            on_poll(total - now_left)
            polled = time.monotonic()
        left = now_left


_STOP: Any = None
"""The pool's stop, a flag in shared memory (`multiprocessing.RawValue`, 1 when set), in a worker of
a `LocalExecutor` (given as it starts). Not a `multiprocessing.Event`: setting one waits for every
process waiting on it to wake, forever when one of them was killed meanwhile."""


def _start_worker(stop: Any) -> None:
    """A pool worker's start: the stop reaches its tasks through their watchers only, so Ctrl-C at the
    terminal is theirs to answer (`_stoppable`), not the idle worker's; a signal the command handles
    (SIGTERM, SIGHUP: they stop it as Ctrl-C does) ends the worker, and so does its parent's end (a plan
    killed, or whose terminal closed, leaves no worker behind)."""
    global _STOP
    _STOP = stop
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for number in signal.valid_signals():
        if number != signal.SIGINT and callable(signal.getsignal(number)):
            signal.signal(number, signal.SIG_DFL)
    end_with_parent()


def _pool_stopped(seconds: float) -> bool:
    """Whether the pool's stop is set, after waiting `seconds` for it."""
    if not _STOP.value and seconds > 0:
        time.sleep(seconds)
    return bool(_STOP.value)


class LocalExecutor(Executor):
    """A pool of `parallel` processes on this machine (forked where the platform can, so they start
    at once)."""

    name = "local"
    closing = 0.0

    def __init__(self, parallel: int) -> None:
        self.parallel = parallel
        self._pool: concurrent.futures.ProcessPoolExecutor | None = None
        self._stop_flag: Any = None
        self._futures: list[concurrent.futures.Future[Any]] = []

    def _clear(self) -> None:
        self._futures = []

    def _submit(self, function: Callable[[T], R], tasks: Sequence[T]) -> Callable[[float], int]:
        pool = self._start()
        for task in tasks:
            self._futures.append(pool.submit(_stoppable, function, task, _pool_stopped))
        pending = set(self._futures)

        def wait(seconds: float) -> int:
            nonlocal pending
            pending = concurrent.futures.wait(pending, seconds, concurrent.futures.FIRST_COMPLETED).not_done
            return len(pending)

        return wait

    def _results(self, total: int) -> list[Any]:
        """The tasks' results; None for one not submitted, dropped, stopped without a result, or killed."""
        return [_result(future) for future in self._futures] + [None] * (total - len(self._futures))

    def _start(self) -> concurrent.futures.ProcessPoolExecutor:
        if self._pool is None:
            methods = multiprocessing.get_all_start_methods()
            context = multiprocessing.get_context("fork" if "fork" in methods else "spawn")
            self._stop_flag = context.RawValue("b", 0)
            self._pool = concurrent.futures.ProcessPoolExecutor(
                self.parallel, mp_context=context, initializer=_start_worker, initargs=(self._stop_flag,)
            )
        return self._pool

    def _stop(self) -> None:
        """Stop the tasks not finished (module notes); kill the workers when one does not answer.

        The tasks not begun are not cancelled: each returns None as it begins, seeing the stop. (A
        cancelled future makes Python 3.11's pool fail, InvalidStateError in its own thread, when a
        worker dies, as the workers do when SIGTERM reaches the whole process group.)"""
        running = [future for future in self._futures if not future.done()]
        if not running:
            return
        self._stop_flag.value = 1
        _, late = concurrent.futures.wait(running, STOP_WAIT)
        if late:
            self._kill()
        else:
            self._stop_flag.value = 0

    def _kill(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            for worker in list((pool._processes or {}).values()):  # no public way before Python 3.14
                worker.kill()
            pool.shutdown(wait=True, cancel_futures=True)

    def close(self) -> None:
        if self._pool is not None:
            self._stop()
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None


def _result(future: concurrent.futures.Future[R | None]) -> R | None:
    """A task's result, or None (`LocalExecutor._results`)."""
    if future.cancelled() or not future.done() or isinstance(future.exception(), BrokenProcessPool):
        return None
    return future.result()


class _StopFlag:
    """A Ray run's stop, shared by its tasks (a Ray actor): `wait` returns once `set` is called. Every
    method is a coroutine, so that all run in the actor's event loop."""

    def __init__(self) -> None:
        self._event = asyncio.Event()

    async def reset(self) -> None:
        self._event = asyncio.Event()

    async def set(self) -> None:
        self._event.set()

    async def wait(self) -> None:
        await self._event.wait()


class _RayStopped:
    """A Ray task's `stopped(seconds)`: whether the run's `_StopFlag` was set, waiting up to `seconds`."""

    def __init__(self, flag: Any) -> None:
        self.flag = flag
        self._call: Any = None

    def __call__(self, seconds: float) -> bool:
        ray = require_ray()
        if self._call is None:
            self._call = self.flag.wait.remote()
        ready, _ = ray.wait([self._call], timeout=seconds)
        return bool(ready)


class RayExecutor(Executor):
    """Tasks on a Ray cluster: the one this process is already connected to, the one at `address`
    (`HEAD:6379`, reached within `timeout` seconds or refused), or else a local Ray started here (and
    stopped by `close`). Each task asks Ray for `cpus_per_task` CPUs (its CP-SAT workers); at most
    `parallel` run at once."""

    name = "ray"

    def __init__(
        self, parallel: int, cpus_per_task: int, address: str | None = None, timeout: float = RAY_TIMEOUT
    ) -> None:
        ray = require_ray()
        self.parallel = parallel
        self._ray = ray
        self._started = False
        self._running: list[Any] = []
        self._refs: list[Any] = []
        self.closing = RAY_CLOSING["given"]
        if not ray.is_initialized():
            if address not in (None, "auto"):
                check_reachable(address, timeout)
                os.environ.setdefault(RAY_TRIES, str(math.ceil(timeout)))
            handlers = {number: signal.getsignal(number) for number in (signal.SIGINT, signal.SIGTERM)}
            try:
                # Ray's errors only: its warnings are not the command's (each start of a local Ray
                # says its token authentication is on), nor are its workers' lines (log_to_driver)
                ray.init(address=address, include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR)
            except Exception as error:  # Ray raises ConnectionError, RuntimeError, ValueError...
                where = f"the Ray cluster at {address}" if address else "a local Ray"
                first_line = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
                raise InputError(f"cannot start or reach {where}: {first_line}") from None
            if threading.current_thread() is threading.main_thread():
                for number, handler in handlers.items():  # Ray's C++ takes them over to report crashes
                    if handler is not None:
                        signal.signal(number, handler)
            self._started = True
            self.closing = RAY_CLOSING["connected" if address else "started"]
        self._remote = ray.remote(num_cpus=cpus_per_task, max_retries=0)(_stoppable)
        self._flag = ray.remote(num_cpus=0)(_StopFlag).remote()

    def _clear(self) -> None:
        self._refs = []

    def _submit(self, function: Callable[[T], R], tasks: Sequence[T]) -> Callable[[float], int]:
        ray, refs = self._ray, self._refs
        ray.get(self._flag.reset.remote())
        stopped = _RayStopped(self._flag)

        def wait(seconds: float) -> int:  # at most `parallel` submitted at once: Ray queues no more
            while len(refs) < len(tasks) and len(self._running) < self.parallel:
                refs.append(self._remote.remote(function, tasks[len(refs)], stopped))
                self._running.append(refs[-1])
            _, self._running = ray.wait(self._running, num_returns=1, timeout=seconds)
            return len(tasks) - len(refs) + len(self._running)

        return wait

    def _stop(self) -> None:
        """Stop the tasks running (module notes); cancel, killing its worker, one that does not answer."""
        running, self._running = self._running, []
        if running:
            self._flag.set.remote()
            _, late = self._ray.wait(running, num_returns=len(running), timeout=STOP_WAIT)
            for ref in late:
                self._ray.cancel(ref, force=True)

    def _results(self, total: int) -> list[Any]:
        """The tasks' results; None for one not submitted, stopped without a result, or cancelled."""
        ray, refs = self._ray, self._refs
        ready = set(ray.wait(refs, num_returns=len(refs), timeout=0)[0]) if refs else set()
        results: list[Any] = [None] * total
        for index, ref in enumerate(refs):
            if ref in ready:
                with contextlib.suppress(ray.exceptions.TaskCancelledError, ray.exceptions.WorkerCrashedError):
                    results[index] = ray.get(ref)
        return results

    def close(self) -> None:
        self._stop()
        self._ray.kill(self._flag)
        if self._started:
            _end_ray_monitor(self._ray)
            self._ray.shutdown()
            self._started = False


def _end_ray_monitor(ray: Any) -> None:
    """Kill the autoscaler monitor of a Ray started here, before `ray.shutdown`: it ignores the SIGTERM
    that shutdown sends it, and shutdown waits a second before it kills it (of the 1.3 s Ray 2.60's
    shutdown takes, measured on the 2-core machine). Through Ray's own record of the processes it started,
    which is not public: where that is missing, shutdown takes its second."""
    node = getattr(getattr(getattr(ray, "_private", None), "worker", None), "_global_node", None)
    for info in getattr(node, "all_processes", {}).get("monitor", []):
        with contextlib.suppress(OSError, subprocess.TimeoutExpired):
            info.process.kill()
            info.process.wait(timeout=1)


def require_ray() -> Any:
    """The `ray` module, or one line saying how to install it."""
    try:
        import ray
    except ImportError:
        raise InputError(RAY_HINT) from None
    return ray


def check_reachable(address: str, timeout: float) -> None:
    """Refuse, with one line naming it, a Ray address where no Ray head answers within `timeout`
    seconds: nothing listening, no route to it, or a server that does not speak gRPC as Ray's head
    does (a head with TLS, `RAY_USE_TLS`, is only connected to)."""
    host, port = _host_and_port(address)
    deadline = time.monotonic() + timeout
    try:
        with socket.create_connection((host, port), timeout=timeout) as connection:
            connection.settimeout(max(0.001, deadline - time.monotonic()))
            if os.environ.get("RAY_USE_TLS", "0") in ("", "0", "false"):
                connection.sendall(HTTP2_PREFACE)
                answer = connection.recv(64)
                if len(answer) < 4 or answer[3] != SETTINGS:
                    raise ConnectionError("it answers, but not as a Ray head (gRPC)")
    except OSError as error:
        why = error.strerror or str(error) or type(error).__name__
        raise InputError(
            f"cannot reach the Ray cluster at {address} within {timeout:g} s: {why}; start it with "
            f"Ray's `ray start` on the head node, or check `address` (HEAD:{RAY_PORT}) and `timeout`"
        ) from None


def _host_and_port(address: str) -> tuple[str, int]:
    """`HEAD:6379`, `ray://HEAD:10001`, `[::1]:6379` or `HEAD` (port 6379) as (host, port)."""
    where = address.split("://", 1)[-1].rstrip("/")
    host, colon, port = where.rpartition(":")
    if not colon or "]" in port:
        host, port = where, str(RAY_PORT)
    host = host.strip("[]")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise InputError(f"`address` {address!r} is not HEAD:PORT; give the head's address, such as 10.0.0.1:6379")
    return host, int(port)


def run_locally(work: Callable[[Executor], R]) -> R:
    """`work` on a local pool of one process a core, as `pipesat plan` runs by default, closed after."""
    pool = LocalExecutor(available_cores())
    try:
        return work(pool)
    finally:
        pool.close()


def make_executor(
    name: str, parallel: int, cpus_per_task: int, address: str | None = None, timeout: float = RAY_TIMEOUT
) -> Executor:
    """`local` or `ray` (an address, reached within `timeout` seconds, only with ray)."""
    if name == "local":
        if address is not None:
            raise InputError("`address` goes with the ray executor, not the local one")
        cores = available_cores()
        if parallel > JOBS_PER_CORE * cores:
            raise InputError(
                f"`parallel` {parallel} is more than the local executor's limit of {JOBS_PER_CORE * cores} "
                f"({JOBS_PER_CORE} a core, {cores} cores here): each is a process with its memory; give fewer, "
                "or run on a cluster with the ray executor"
            )
        return LocalExecutor(parallel)
    if name == "ray":
        return RayExecutor(parallel, cpus_per_task, address, timeout)
    raise InputError(f"unknown executor {name!r}; use local or ray")
