"""The commands imported when used (`commands.lazy`): the tables name real commands, their short help is
the commands' own, and a group's help imports none of them."""

from __future__ import annotations

import subprocess
import sys

import click
import pytest

from pipesat.cli import COMMANDS, cli
from pipesat.commands.files import IMPORT_COMMANDS, import_group
from pipesat.commands.lazy import LazyCommand, LazyGroup

TABLES = [(cli, name, lazy) for name, lazy in COMMANDS.items()] + [
    (import_group, name, lazy) for name, lazy in IMPORT_COMMANDS.items()
]


@pytest.mark.parametrize(("group", "name", "lazy"), TABLES, ids=lambda v: v if isinstance(v, str) else "")
def test_each_lazy_command_is_the_command_of_its_name_with_its_short_help(
    group: click.Group, name: str, lazy: LazyCommand
) -> None:
    command = group.get_command(click.Context(group), name)
    assert isinstance(command, click.Command) and command.name == name
    listed = click.Command(name, help=lazy.short_help)
    for limit in (20, 45, 80, 1000):  # click shortens the short help to the terminal's width
        assert listed.get_short_help_str(limit) == command.get_short_help_str(limit)


def test_a_group_lists_its_lazy_commands_with_the_eager_ones() -> None:
    ctx = click.Context(import_group)
    assert import_group.list_commands(ctx) == ["csv", "torch"]
    assert set(COMMANDS) <= set(cli.list_commands(click.Context(cli)))


def test_the_help_of_a_group_imports_no_command() -> None:
    code = (
        "import sys\nfrom pipesat.cli import cli\n"
        "try:\n    cli(['--help'], prog_name='pipesat')\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in sys.modules if m.startswith('pipesat.commands.') and m.count('.') == 2))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "calibrate  Measure one transformer layer" in done.stdout
    imported = set(eval(done.stdout.splitlines()[-1]))
    assert not imported & {target.partition(":")[0] for target in (lazy.target for lazy in COMMANDS.values())}


def test_a_lazy_group_shows_a_missing_command_as_click_does() -> None:
    group = LazyGroup("g", lazy_commands={"run": LazyCommand("pipesat.commands.files:check", "Run.")})
    assert group.get_command(click.Context(group), "nothing") is None
    assert group.get_command(click.Context(group), "run") is not None
