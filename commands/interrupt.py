"""Ctrl-C, SIGTERM and SIGHUP (the terminal closed) as the command line answers them, from its first line.

Before a command runs (the CLI's own import, and a command's module imported to run it) there is nothing
printed or saved to keep: a signal then ends the process at once, one `error: interrupted` line and exit
EXIT_INTERRUPTED, however deep in an import it lands (a KeyboardInterrupt inside a C extension's import
comes back as its ImportError, with a traceback). While a command runs, each of them raises
KeyboardInterrupt, which the command answers with what it has (a solve, its best schedule so far), and
`signalled` says one came, so that whatever it raised instead (that ImportError) is still reported as the
interruption. Standard library only: the CLI imports it before anything else.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterator
from types import FrameType

EXIT_INTERRUPTED = 130
"""Ctrl-C or SIGTERM ended the command (the shell's 128 + SIGINT); what it had is printed and saved."""
SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name))
"""The signals that stop a command (no SIGHUP on Windows)."""
_signalled = False
_program = False
"""Whether this process is the command line (`stop_on_signals`), not a test or a program calling it."""


def _leave(signum: int, frame: FrameType | None) -> None:
    os.write(2, b"error: interrupted\n")
    os._exit(EXIT_INTERRUPTED)


def _interrupt(signum: int, frame: FrameType | None) -> None:
    global _signalled
    _signalled = True
    raise KeyboardInterrupt


def leave_on_signals() -> None:
    """From now on a signal ends the process at once (nothing to keep yet: module notes)."""
    for number in SIGNALS:
        signal.signal(number, _leave)


def stop_on_signals() -> None:
    """From now on a signal raises KeyboardInterrupt, which the command answers (module notes); the
    CP-SAT child and a plan's workers set their own."""
    global _program
    _program = True
    for number in SIGNALS:
        signal.signal(number, _interrupt)


@contextlib.contextmanager
def leaving_on_signals() -> Iterator[None]:
    """`leave_on_signals` for the block (an import), then the handlers as they were; only in the
    command line's own process, whose handlers these are."""
    if not _program or threading.current_thread() is not threading.main_thread():
        yield
        return
    handlers = {number: signal.getsignal(number) for number in SIGNALS}
    leave_on_signals()
    try:
        yield
    finally:
        for number, handler in handlers.items():
            signal.signal(number, handler)


def signalled() -> bool:
    """Whether a signal has stopped the command."""
    return _signalled


def program() -> None:
    """The `pipesat` script (pyproject's entry point): a signal ends the process at once while the CLI
    loads, then `cli.main` runs the command."""
    leave_on_signals()
    from pipesat.cli import main

    main()
