"""CP-SAT in a child process, so that a search can always be stopped at once and for good.

CP-SAT can take seconds to stop when told to (measured on models of thousands of ops still loading
their LP: benchmarks/experiments/2026-11-22_cpsat-stop-and-readback), and a thread cannot be killed;
a process can. The search runs in a child process that sends each solution and bound to the parent
as soon as it has it. To stop the search the parent sends the
child SIGINT, on which CP-SAT ends cleanly and reports its last bound; a child that has not ended
`STOP_GRACE` seconds later is killed, and the parent keeps the best solution it already has. So a
search never outlives its solve, two never overlap, and a stop (the deadline, Ctrl-C, SIGTERM) is
answered within a second whatever CP-SAT is doing.

The child is forked where the platform can fork, so it starts in milliseconds with the model it
inherits; elsewhere it is spawned and the model goes to it in CP-SAT's text format.

CP-SAT's search log, when the parameters ask for it (`log_search_progress`, set by the search when
DEBUG is enabled for this module's logger), comes back through the same pipe, line by line, and is
logged here; CP-SAT never writes it to the child's standard output. The child's standard error goes to
a temporary file that is read only when the child ends without its last word (it crashed, or had to be
killed), to say how it ended. A child whose parent is gone ends too (`end_with_parent`, which a plan's
pool workers run too).
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import IO, Any

from ortools.sat.python import cp_model

from pipesat.solver.cpsat.processes import STOP_GRACE, end_with_parent

POLL_SECONDS = 0.05
# How much of a dead child's standard error says how it ended: its last lines, of the last bytes.
LAST_LINES = 3
LAST_BYTES = 4096
LOG = logging.getLogger(__name__)


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
    """CP-SAT's last word: its status, final bound and `solution_info` (for MODEL_INVALID, what is invalid)."""

    status: cp_model.CpSolverStatus
    bound: float
    info: str = ""


@dataclass(frozen=True)
class LogLine:
    """A message of CP-SAT's search log (logged by the parent, never passed on)."""

    text: str


Message = Solution | Bound | Finished


@dataclass(frozen=True)
class Ended:
    """How a search ended: CP-SAT's last word (None when it gave none); whether it was interrupted (by
    Ctrl-C or SIGTERM in this process, or a callback raising KeyboardInterrupt); whether it was told to
    stop at its wall-clock deadline; whether it was told to stop because `stop_when` said so; and, when
    it gave no last word, how the child ended (`was killed by signal SIGSEGV; it last wrote: ...`)."""

    finished: Finished | None
    interrupted: bool = False
    deadline: bool = False
    how_ended: str | None = None
    stopped_early: bool = False


def cpsat_log_wanted() -> bool:
    """Whether CP-SAT's search log is wanted: DEBUG is enabled for this module's logger."""
    return LOG.isEnabledFor(logging.DEBUG)


def run_search(
    model: cp_model.CpModel,
    parameters: str,
    watched: Sequence[cp_model.IntVar],
    seconds: float,
    on_message: Callable[[Message], None],
    on_poll: Callable[[], None] | None = None,
    stop_when: Callable[[], bool] | None = None,
) -> Ended:
    """Search `model` with `parameters` (SatParameters in text form) in a child process for at most
    `seconds` of wall time, calling `on_message` with each solution (the values of `watched`) and bound
    as it comes, and `on_poll` after every wait for one (at least every POLL_SECONDS), news or not. When
    `stop_when()` (asked as often) says so, the search is stopped as at its deadline.

    Returns how the search `Ended`. Ctrl-C or SIGTERM in this process, or either callback raising
    KeyboardInterrupt, interrupts it; any other exception from them stops the search and is raised.
    """
    fork = "fork" in multiprocessing.get_all_start_methods()
    context = multiprocessing.get_context("fork") if fork else multiprocessing.get_context("spawn")
    source: cp_model.CpModel | str = model if context.get_start_method() == "fork" else str(model.proto)
    receiver, sender = context.Pipe(duplex=False)
    with tempfile.NamedTemporaryFile(prefix="pipesat-cp-sat-", suffix=".stderr") as stderr:
        child = context.Process(
            target=_child,
            args=(source, parameters, [var.index for var in watched], sender, stderr.name),
            name="cp-sat",
            daemon=True,
        )
        child.start()
        sender.close()
        deadline = time.monotonic() + seconds
        stopping_since: float | None = None
        finished: Finished | None = None
        interrupted = at_deadline = stopped_early = killed = False
        try:
            while finished is None:
                if stopping_since is None and time.monotonic() >= deadline:
                    stopping_since, at_deadline = _ask_to_stop(child), True
                if stopping_since is None and stop_when is not None and stop_when():
                    stopping_since, stopped_early = _ask_to_stop(child), True
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
            killed = _end(child, receiver, (stopping_since or time.monotonic()) + STOP_GRACE)
        how_ended = None if finished is not None else _how_it_ended(child.exitcode, killed, stderr)
    return Ended(finished, interrupted, at_deadline, how_ended, stopped_early)


_CLOSED = object()


def _receive(receiver: Connection) -> Any:
    """The next message, None when none came within POLL_SECONDS (or it was a line of CP-SAT's log,
    which is logged), `_CLOSED` when the child is gone."""
    try:
        if not receiver.poll(POLL_SECONDS):
            return None
        message = receiver.recv()
    except (EOFError, OSError):
        return _CLOSED
    if isinstance(message, LogLine):
        for line in message.text.splitlines():
            LOG.debug("%s", line)
        return None
    return message


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


def _end(child: multiprocessing.process.BaseProcess, receiver: Connection, until: float) -> bool:
    """Make sure the child is gone: it may exit on its own until `until`, then it is killed. Returns
    whether it had to be killed."""
    child.join(max(0.0, until - time.monotonic()))
    killed = child.is_alive()
    if killed:
        child.kill()
        child.join()
    receiver.close()
    return killed


def _how_it_ended(exitcode: int | None, killed: bool, stderr: IO[bytes]) -> str:
    """How a child that gave no last word ended, with the last lines it wrote to standard error."""
    if killed:
        how = f"did not stop within {STOP_GRACE:g} s of being asked and was killed"
    elif exitcode is not None and exitcode < 0:
        how = f"was killed by signal {signal.Signals(-exitcode).name}"
    else:
        how = f"exited with code {exitcode} before its result"
    stderr.seek(max(0, os.fstat(stderr.fileno()).st_size - LAST_BYTES))
    lines = [line.strip() for line in stderr.read().decode(errors="replace").splitlines() if line.strip()]
    return how + (f"; it last wrote: {' | '.join(lines[-LAST_LINES:])}" if lines else "")


def _child(
    source: cp_model.CpModel | str, parameters: str, indices: list[int], sender: Connection, stderr: str
) -> None:
    """The child process: search, sending every solution and bound (and CP-SAT's log when the
    parameters ask for it), then CP-SAT's status, bound and solution info.

    SIGINT is CP-SAT's to catch while it searches; outside the search it is ignored, so a stop that
    comes while the child starts or sends its last word cannot end it with a traceback. The child's
    standard error goes to the file `stderr`.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    end_with_parent()
    # What CP-SAT's C++ prints while it is stopped or killed (a `std::bad_function_call` from a callback
    # torn down mid-stop was seen) is not the user's business unless the child dies without its result.
    file = os.open(stderr, os.O_WRONLY | os.O_APPEND)
    os.dup2(file, 2)
    os.close(file)
    sys.stderr = open(2, "w", buffering=1, closefd=False)  # noqa: SIM115 (for the child's life; also when it was not fd 2)
    lock = threading.Lock()

    def send(message: Message | LogLine) -> None:
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
        solver.parameters.log_to_stdout = False  # standard output is the user's (a JSON document)
        if solver.parameters.log_search_progress:
            solver.log_callback = lambda line: send(LogLine(line))
        solver.best_bound_callback = lambda bound: send(Bound(bound))
        status = solver.solve(model, _Reporter(watched, send))
        send(Finished(status, solver.best_objective_bound, solver.solution_info()))
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
