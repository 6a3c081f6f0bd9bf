"""The frame every command runs in: pipesat's errors and click's usage errors as one `error:` line on
standard error (`echo_error`, the one printer of errors; the keys a message of the layers below names
shown as the command's flags, `commands.flags`) and an exit code, the list options that take
space-separated numbers (the earlier tool's `-f 1 2 3`), and the exits for Ctrl-C and SIGTERM."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

import click
from click.core import ParameterSource

from pipesat.commands.flags import with_flags
from pipesat.commands.interrupt import EXIT_INTERRUPTED, signalled
from pipesat.models.errors import InputError, PipesatError

EXIT_INVALID = 1
EXIT_BAD_INPUT = 2

# Options that take a space-separated list, as the earlier tool's argparse `nargs="+"` did.
LIST_OPTIONS = ("-f", "--forward-times", "-bw", "--backward-times", "-w", "--weight-times")


def _is_numbers(token: str) -> bool:
    """Whether a token is one number or a comma-separated list of numbers."""
    try:
        return bool([float(part) for part in token.replace(",", " ").split()])
    except ValueError:
        return False


def join_list_options(args: list[str]) -> list[str]:
    """Turn `-f 1 2 3` into `-f "1 2 3"` so that click sees one value per list option."""
    joined: list[str] = []
    i = 0
    while i < len(args):
        joined.append(args[i])
        i += 1
        if joined[-1] in LIST_OPTIONS:
            values = []
            while i < len(args) and _is_numbers(args[i]):
                values.append(args[i])
                i += 1
            if values:
                joined.append(" ".join(values))
    return joined


# Raised by click >= 8.2 for a group called with no command; pipesat shows its help then.
NO_ARGS_IS_HELP = getattr(click.exceptions, "NoArgsIsHelpError", ())


RUNNING = "pipesat.running"
"""The context of the command that runs (`ctx.meta`, which every context of a command line shares)."""


class PipesatCommand(click.Command):
    """A command whose list options accept space-separated numbers, and whose errors name the flags
    of the keys they name (`PipesatGroup`)."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        return super().parse_args(ctx, join_list_options(args))

    def invoke(self, ctx: click.Context) -> Any:
        ctx.meta[RUNNING] = ctx
        return super().invoke(ctx)


def echo_error(message: object) -> None:
    """Report an error the one way pipesat does: one `error: ...` line on standard error (a message
    of several lines is joined into one). The caller chooses the exit code."""
    text = " ".join(line.strip() for line in str(message).splitlines() if line.strip())
    click.echo(f"error: {text}", err=True)


def shown(error: PipesatError, ctx: click.Context) -> str:
    """An error's message as the command line shows it: the keys it names as the flags of the
    command that ran in `ctx` and of the groups above it (`commands.flags`)."""
    taken: set[str] = set()
    given: set[str] = set()
    context: click.Context | None = ctx
    while context is not None:
        for param in context.command.params:
            if isinstance(param, click.Option):
                flags = {*param.opts, *param.secondary_opts}
                taken |= flags
                if param.name is not None and context.get_parameter_source(param.name) == ParameterSource.COMMANDLINE:
                    given |= flags
        context = context.parent
    return with_flags(str(error), taken, given)


class PipesatGroup(click.Group):
    """Turns pipesat's errors into one line on stderr, naming the flags of the keys it names
    (`commands.flags`), and an exit code (a traceback with --debug)."""

    command_class = PipesatCommand
    group_class = type

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except PipesatError as error:
            if ctx.find_root().params.get("debug"):
                raise
            echo_error(shown(error, ctx.meta.get(RUNNING, ctx)))
            ctx.exit(EXIT_BAD_INPUT if isinstance(error, InputError) else EXIT_INVALID)

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        """As click's main, but a usage error is one `error:` line too (click prints three)."""
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        try:
            result = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except NO_ARGS_IS_HELP as error:
            click.echo(error.ctx.get_help() if error.ctx else str(error))
            sys.exit(0)
        except click.UsageError as error:
            where = f" (see '{error.ctx.command_path} --help')" if error.ctx else ""
            message = " ".join(error.format_message().split())  # click lists choices on lines of their own
            echo_error(f"{message}{where}")
            sys.exit(EXIT_BAD_INPUT)
        except click.ClickException as error:
            echo_error(error.format_message())
            sys.exit(error.exit_code)
        except click.Abort:
            echo_error("interrupted")
            sys.exit(EXIT_INTERRUPTED)
        except Exception:
            if not signalled():  # else a signal broke what was running (an import: its ImportError)
                raise
            echo_error("interrupted")
            sys.exit(EXIT_INTERRUPTED)
        sys.exit(result if isinstance(result, int) else 0)


def exit_if_interrupted(interrupted: bool) -> None:
    """End with EXIT_INTERRUPTED when Ctrl-C or SIGTERM stopped the work; call it once what the work
    had is printed and saved."""
    if interrupted:
        click.get_current_context().exit(EXIT_INTERRUPTED)
