"""Driving the command line through click's runner, shared by every CLI test."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
import yaml
from click.testing import CliRunner, Result

from pipesat.cli import cli
from pipesat.commands.frame import EXIT_BAD_INPUT


def write_yaml(path: Path, data: Any) -> Path:
    """Write `data` to `path` as YAML (a spec or instance file for the command line); the path."""
    path.write_text(yaml.safe_dump(data))
    return path


def run_cli(*args: object) -> Result:
    """Invoke `pipesat ARGS...` in-process; stdout and stderr are kept apart."""
    return CliRunner().invoke(cli, [str(arg) for arg in args])


def cli_ok(result: Result) -> str:
    """Assert success and return what went to stdout."""
    assert result.exit_code == 0, result.output + (result.stderr or "")
    return result.stdout


def cli_error(result: Result, code: int = EXIT_BAD_INPUT) -> str:
    """Assert exit `code` with exactly one `error:` line on stderr and no traceback; return the line."""
    assert result.exit_code == code, result.output
    assert "Traceback" not in result.stdout and "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0]


def subcommands(group: click.Group) -> dict[str, click.Command]:
    """A group's commands by name, those imported when used (`commands.lazy`) too."""
    ctx = click.Context(group)
    found = {name: group.get_command(ctx, name) for name in group.list_commands(ctx)}
    return {name: command for name, command in found.items() if command is not None}
