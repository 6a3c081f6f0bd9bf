"""The one live progress line on standard error, for every command that shows one."""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
from collections.abc import Iterator

import click

from pipesat.models.log import log_shown
from pipesat.solver.report.solve_text import progress_text


def terminal_columns() -> int:
    """The width of the terminal: $COLUMNS when set, else that of standard error's terminal (where the
    progress line goes), else shutil's answer (standard output's terminal, or 80)."""
    if not os.environ.get("COLUMNS"):
        with contextlib.suppress(AttributeError, OSError, ValueError):
            columns = os.get_terminal_size(sys.stderr.fileno()).columns
            if columns > 0:
                return columns
    return shutil.get_terminal_size().columns


class ProgressLine:
    """The one live progress line on standard error, for every command that shows one: rewritten in
    place, cut to the terminal's width so that it never wraps, cleared at the end; off unless enabled.
    Called as the solver's callback, `(elapsed, best, bound)`, it shows the `elapsed best bound gap`
    line; `show` writes any other text (plan's bar)."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.width = 0  # the characters on the line now

    def __call__(self, elapsed: float, best: float | None, bound: float | None) -> None:
        self.show(progress_text(elapsed, best, bound))

    def show(self, text: str) -> None:
        if not self.enabled:
            return
        room = max(1, terminal_columns() - 1)  # a line filling the last column wraps on some terminals
        text = text[:room]
        click.echo("\r" + text.ljust(min(self.width, room)), nl=False, err=True)
        self.width = len(text)

    def clear(self) -> None:
        if self.width:
            click.echo("\r" + " " * min(self.width, max(1, terminal_columns() - 1)) + "\r", nl=False, err=True)
            self.width = 0


@contextlib.contextmanager
def live_progress(enabled: bool | None) -> Iterator[ProgressLine]:
    """The progress line: shown when standard error is a terminal and no log is printed there (or as
    `enabled`, from --progress/--no-progress, says), cleared after."""
    line = ProgressLine(sys.stderr.isatty() and not log_shown() if enabled is None else enabled)
    try:
        yield line
    finally:
        line.clear()
