"""CP-SAT in a child process, so that a search can always be stopped at once and for good.

CP-SAT can take seconds to stop when told to (up to 20 s measured on a 12,288-op model still loading
its LP), and a thread cannot be killed; a process can. The search runs in a child process that sends
each solution and bound to the parent as soon as it has it. To stop the search the parent sends the
child SIGINT, on which CP-SAT ends cleanly and reports its last bound; a child that has not ended
`STOP_GRACE` seconds later is killed, and the parent keeps the best solution it already has. So a
search never outlives its solve, two never overlap, and a stop (the deadline, Ctrl-C, SIGTERM) is
answered within a second whatever CP-SAT is doing.

The child is forked where the platform can fork, so it starts in milliseconds with the model it
inherits; elsewhere it is spawned and the model goes to it in CP-SAT's text format.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

from ortools.sat.python import cp_model

STOP_GRACE = 0.5
POLL_SECONDS = 0.05


@dataclass(frozen=True)
class Solution:
    """A solution: the objective, CP-SAT's bound when it was found, and the watched variables' values."""

    objective: float
    bound: float
    values: list[int]


@dataclass(frozen=True)
class Bound:
    """A better bound on the objective."""

    bound: float


@dataclass(frozen=True)
class Finished:
    """CP-SAT's last word: its status and final bound."""

    status: int
    bound: float


Message = Solution | Bound | Finished


def run_search(
    model: cp_model.CpModel,
    parameters: str,
    watched: Sequence[cp_model.IntVar],
    seconds: float,
    on_message: Callable[[Message], None],
    on_poll: Callable[[], None] | None = None,
) -> tuple[Finished | None, bool]:
    """Search `model` with `parameters` (SatParameters in text form) in a child process for at most
    `seconds` of wall time, calling `on_message` with each solution (the values of `watched`) and bound
    as it comes, and `on_poll` after every wait for one (at least every POLL_SECONDS), news or not.

    Returns CP-SAT's `Finished` (None when the child had to be killed, or died) and whether the search
    was interrupted: by Ctrl-C or SIGTERM in this process, or by either callback raising
    KeyboardInterrupt. Any other exception from them stops the search and is raised.
    """
    context = multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn")
    source: cp_model.CpModel | str = model if context.get_start_method() == "fork" else str(model.proto)
    receiver, sender = context.Pipe(duplex=False)
    child = context.Process(
        target=_child, args=(source, parameters, [var.index for var in watched], sender), name="cp-sat", daemon=True
    )
    child.start()
    sender.close()
    deadline = time.monotonic() + seconds
    stopping_since: float | None = None
    finished: Finished | None = None
    interrupted = False
    try:
        while finished is None:
            if stopping_since is None and time.monotonic() >= deadline:
                stopping_since = _ask_to_stop(child)
            if stopping_since is not None and time.monotonic() >= stopping_since + STOP_GRACE:
                break
            message = _receive(receiver)
            if message is _CLOSED:
                break
            if message is not None:
                finished = message if isinstance(message, Finished) else None
                on_message(message)
            if on_poll is not None:
                on_poll()
    except KeyboardInterrupt:
        interrupted = True
        if stopping_since is None:
            stopping_since = _ask_to_stop(child)
        finished = _last_word(receiver, on_message, stopping_since + STOP_GRACE)
    finally:
        _end(child, receiver, (stopping_since or time.monotonic()) + STOP_GRACE)
    return finished, interrupted


_CLOSED = object()


def _receive(receiver: Connection) -> Any:
    """The next message, None when none came within POLL_SECONDS, `_CLOSED` when the child is gone."""
    try:
        if not receiver.poll(POLL_SECONDS):
            return None
        return receiver.recv()
    except (EOFError, OSError):
        return _CLOSED


def _last_word(receiver: Connection, on_message: Callable[[Message], None], until: float) -> Finished | None:
    """After a stop: the messages still coming, until `until` (a second Ctrl-C ends the wait). Solutions
    and bounds are still recorded; nothing raised by `on_message` matters any more."""
    with contextlib.suppress(KeyboardInterrupt):
        while time.monotonic() < until:
            message = _receive(receiver)
            if message is _CLOSED:
                return None
            if message is not None:
                with contextlib.suppress(Exception, KeyboardInterrupt):
                    on_message(message)
                if isinstance(message, Finished):
                    return message
    return None


def _ask_to_stop(child: multiprocessing.process.BaseProcess) -> float:
    """Send the child SIGINT (CP-SAT's signal to end the search cleanly); returns when it was sent."""
    if child.pid is not None and child.is_alive():
        with contextlib.suppress(ProcessLookupError):
            os.kill(child.pid, signal.SIGINT)
    return time.monotonic()


def _end(child: multiprocessing.process.BaseProcess, receiver: Connection, until: float) -> None:
    """Make sure the child is gone: it may exit on its own until `until`, then it is killed."""
    child.join(max(0.0, until - time.monotonic()))
    if child.is_alive():
        child.kill()
        child.join()
    receiver.close()


def _child(source: cp_model.CpModel | str, parameters: str, indices: list[int], sender: Connection) -> None:
    """The child process: search, sending every solution and bound, then CP-SAT's status and bound.

    SIGINT is CP-SAT's to catch while it searches; outside the search it is ignored, so a stop that
    comes while the child starts or sends its last word cannot end it with a traceback. The child's
    standard error goes nowhere.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    # What CP-SAT's C++ prints while it is stopped or killed (a `std::bad_function_call` from a callback
    # torn down mid-stop was seen) is not the user's business: the parent keeps what was sent.
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)
    os.close(devnull)
    lock = threading.Lock()

    def send(message: Message) -> None:
        with lock, contextlib.suppress(OSError):
            sender.send(message)

    try:
        if isinstance(source, str):
            model = cp_model.CpModel()
            model.proto.parse_text_format(source)
        else:
            model = source
        watched = [model.get_int_var_from_proto_index(index) for index in indices]
        solver = cp_model.CpSolver()
        solver.parameters.parse_text_format(parameters)
        solver.parameters.catch_sigint_signal = True
        solver.best_bound_callback = lambda bound: send(Bound(bound))
        status = solver.solve(model, _Reporter(watched, send))
        send(Finished(status, solver.best_objective_bound))
    finally:
        sender.close()


class _Reporter(cp_model.CpSolverSolutionCallback):
    """Sends each solution found (CP-SAT calls it from its worker threads, one at a time)."""

    def __init__(self, watched: list[cp_model.IntVar], send: Callable[[Message], None]) -> None:
        super().__init__()
        self.watched = watched
        self.send = send

    def on_solution_callback(self) -> None:
        values = [self.value(var) for var in self.watched]
        self.send(Solution(self.objective_value, self.best_objective_bound, values))
