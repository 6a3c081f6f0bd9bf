"""Command-line options read off the keys that describe a training run (`solver.instances.keys`):
`--seq-len` for the key `seq_len`, of its kind (its unit names the value: `--bandwidth GB/s`), with
its default, range and help. A value is checked as its record checks it and refused in the key's one
line, naming the option (`--heads must be at least 1, got 0`); a choice of words is click's choice."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import click

from pipesat.solver.instances.keys import Key, keys, option_name
from pipesat.solver.instances.value_kinds import Flag, Word
from pipesat.solver.plan.spec import KEYS

Decorator = Callable[[Callable[..., Any]], Callable[..., Any]]


class KeyType(click.ParamType):
    """A key's value on the command line: as its record holds it or, `as_written`, as a spec would
    hold it (`1,2` -> [1, 2]), for the options that override the plan's spec keys."""

    def __init__(self, declared: Key, as_written: bool = False) -> None:
        self.declared, self.as_written = declared, as_written
        self.name = declared.kind.metavar

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if not isinstance(value, str):
            return value  # a default: the record's own value
        option = max(param.opts, key=len) if param is not None else self.name
        written = self.declared.parse(value, option)
        return written if self.as_written else self.declared.read(written, option)


def key_options(record: type, *names: str) -> list[Decorator]:
    """`--name` for each key of `record` (only those in `names` when given), in the record's order."""
    declared = keys(record)
    return [_option(name, declared[name]) for name in names or declared]


def spec_overrides(dotted_names: Sequence[str]) -> list[Decorator]:
    """An option for each of the plan's spec keys `dotted_names` (`--gpus` for `cluster.gpus`): no
    default, its value as the spec would hold it, to override the spec's."""
    decorators: list[Decorator] = []
    for dotted in dotted_names:
        section, name = dotted.split(".")
        declared = KEYS[section][name]
        decorators.append(
            click.option(
                option_name(name),
                type=KeyType(declared, as_written=True),
                metavar=declared.unit or None,
                help=f"{declared.help} Overrides {dotted}.",
            )
        )
    return decorators


def _option(name: str, declared: Key) -> Decorator:
    flag = option_name(name)
    if isinstance(declared.kind, Flag):
        flags = f"{flag}/--no-{flag[2:]}" if declared.default else flag
        return click.option(flags, is_flag=True, default=declared.default, show_default=True, help=declared.help)
    # A default is shown as it would be written (`10%`). One that means none (0, None; the help says
    # what) is left to the record the option fills: the option gives None.
    # A default is passed only when there is one: click (8.3 and later) takes an explicit None as a
    # value given, so a required option with `default=None` would never be missing.
    shown = not declared.required and bool(declared.default)
    default: dict[str, Any] = {"default": declared.kind.text(declared.default)} if shown else {}
    return click.option(
        *(declared.short, flag) if declared.short else (flag,),
        type=click.Choice(declared.kind.choices) if isinstance(declared.kind, Word) else KeyType(declared),
        required=declared.required,
        show_default=shown,
        **default,
        metavar=declared.unit or None,
        help=declared.help,
    )
