"""pipesat's log: what a solve decided and why, and CP-SAT's own search log, through Python's `logging`.

Every module logs to its own logger under `pipesat` (`logging.getLogger(__name__)`): pipesat's
decisions at INFO (the starting schedules tried and the one kept, the lower bound and where it came
from, the phases of a span solve, why a search stopped), CP-SAT's search log at DEBUG
(`pipesat.solver.cpsat.child`, relayed line by line from the search's child process). Nothing is
printed unless a handler is attached: `show_log()` attaches one to standard error (what the command line's log option
does), or configure `logging` as usual (`logging.basicConfig(level=logging.DEBUG)`). CP-SAT writes
its log only when DEBUG is enabled for it, so a solve without a log pays nothing for it.
"""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Iterator
from typing import TextIO

ROOT = "pipesat"


class _Formatter(logging.Formatter):
    """`solve: message`: the logger's name without the package's prefixes."""

    def format(self, record: logging.LogRecord) -> str:
        where = record.name.removeprefix(f"{ROOT}.").removeprefix("solver.")
        return f"{where}: {record.getMessage()}"


@contextlib.contextmanager
def show_log(stream: TextIO | None = None, level: int = logging.DEBUG) -> Iterator[logging.Handler]:
    """Print pipesat's log to `stream` (standard error when None) while in the block: at DEBUG (the
    default) with CP-SAT's search log, at INFO pipesat's decisions only. The `pipesat` logger's level
    and handlers are restored after."""
    logger = logging.getLogger(ROOT)
    handler = logging.StreamHandler(sys.stderr if stream is None else stream)
    handler.setFormatter(_Formatter())
    before = logger.level
    logger.addHandler(handler)
    logger.setLevel(level)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.setLevel(before)


def log_shown() -> bool:
    """Whether pipesat's decisions are logged (then a live progress line would cut into them)."""
    return logging.getLogger(ROOT).isEnabledFor(logging.INFO)
