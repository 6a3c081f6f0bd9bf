"""What a command checks before any work: the files it reads and the files it will write (the one
output policy, `solver.io.output_file`), a window that has a picture to zoom, and torch for the
commands that need it."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import click

from pipesat.models.errors import InputError
from pipesat.solver.io.output_file import DefaultName, check_outputs

if TYPE_CHECKING:
    from pipesat.solver.report.schedule_plot import Window

INPUTS = "pipesat.inputs"


def reads(**inputs: Path | None) -> None:
    """Note the files this command reads (by what they are: `schedule file=...`), which it may not write."""
    click.get_current_context().meta.setdefault(INPUTS, {}).update(inputs)


def check_writes(force: bool, outputs: Mapping[str, Path | DefaultName | None]) -> None:
    """Check the files this command will write (by option: `{"--save": path}`) against the one output
    policy (`solver.io.output_file`) before any work: never an input, never twice, never over an
    existing file the user named without --force (a `DefaultName`, the command's own choice, may be
    replaced), only where it can be written."""
    files = {name: path for name, path in outputs.items() if path != Path("-")}  # `-`: standard output
    check_outputs(files, click.get_current_context().meta.get(INPUTS, {}), force)


def picture_output(picture: Path | None, output: Path | None) -> Path | DefaultName | None:
    """The picture a command draws, as an output for `check_writes`: the file named with -o (`output`)
    as it is, never replaced without --force; a name the command chose itself as a `DefaultName`, which
    may replace the picture of an earlier run (so that `pipesat schedule 1f1b -s 4 -b 8` can be run again)."""
    return DefaultName(picture) if picture is not None and output is None else picture


def check_window(window: Window | None, picture: Path | None) -> None:
    """--window zooms the picture: refuse it, before any work, where none is drawn."""
    if window is not None and picture is None:
        raise InputError("--window zooms the picture, but no picture is drawn (see -o)")


def exit_without_torch() -> None:
    """Refuse, as bad input (one `error:` line, exit 2), with the install line when torch (the optional
    extra) is not installed."""
    from pipesat.solver.torch import import_schedule as torch_import  # numpy, imported for the torch commands

    try:
        torch_import.require_torch()
    except torch_import.TorchMissing as error:
        raise InputError(str(error)) from None
