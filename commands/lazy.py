"""Commands imported when they are used: a group's table names each command's module and function
and its short help, so that `pipesat --help`, `--version` and a usage error import no command, and
no command imports what another needs (OR-Tools, numpy, matplotlib, torch, ray)."""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import click

from pipesat.commands.frame import PipesatGroup
from pipesat.commands.interrupt import leaving_on_signals


@dataclass(frozen=True)
class LazyCommand:
    """Where a command is (`pipesat.commands.files:check`) and its short help: the first sentence of
    its docstring, which a group's help lists (tests/commands/test_lazy.py holds them equal)."""

    target: str
    short_help: str

    def load(self) -> click.Command:
        module, _, name = self.target.partition(":")
        with leaving_on_signals():  # nothing to keep yet: a signal ends the command at once
            command: click.Command = getattr(importlib.import_module(module), name)
        return command


class LazyGroup(PipesatGroup):
    """A group whose commands in `lazy_commands` are imported only to run or to show their own help;
    the group's help lists them with the short help of the table."""

    def __init__(self, *args: Any, lazy_commands: Mapping[str, LazyCommand], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy_commands = dict(lazy_commands)
        self._listing = False

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy_commands})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        lazy = self.lazy_commands.get(cmd_name)
        if lazy is None:
            return super().get_command(ctx, cmd_name)
        if self._listing:
            return click.Command(cmd_name, help=lazy.short_help)
        return lazy.load()

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """click's list of commands, from the table: the help of each as click shortens it, no import."""
        self._listing = True
        try:
            super().format_commands(ctx, formatter)
        finally:
            self._listing = False
