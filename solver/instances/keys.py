"""The keys of a training run's description, each declared once: its kind, default, unit, range and help.

The records that describe a run (`Transformer`, `Training`, `Hardware` and `Pipeline` in
`cost_model`, the plan's `Cluster` and `PlanSpec`) make their fields with `key(...)` and derive from
`Keyed`, which checks every key on construction. The plan spec's sections (`solver.plan.spec`) and the
command-line options (`commands.keys`) are read off the same declarations, so a key added to a record is
a spec key and an option at once, with the same checks and the same one-line errors:

    <name> must be <what the key takes>, got <value>

where the name is the field's (`heads`), the spec's (`model.heads`) or, on the command line, its option's.
Each key is checked alone; how keys fit together (heads dividing the hidden size) is
`cost_model.check_description`'s.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import MISSING, dataclass
from typing import Any

from pipesat.models import InstanceError
from pipesat.models.errors import did_you_mean
from pipesat.solver.instances.value_kinds import Flag, ValueKind, Whole, Wholes, Word

KEY = "pipesat.key"
"""The field metadata entry that holds a field's `Key`."""


@dataclass(frozen=True)
class Key:
    """One key: its kind, default (MISSING: required), help, unit, allowed range, a short option
    besides the long one (`short`), and `default_from`, another key of the record whose value a key left at
    None takes (the link within a node is the link across nodes unless given)."""

    kind: ValueKind
    help: str
    default: Any = dataclasses.field(default_factory=lambda: MISSING)  # `= MISSING` would make it required
    unit: str = ""
    at_least: float | None = None
    above: float | None = None
    at_most: float | None = None
    short: str = ""
    default_from: str = ""

    @property
    def required(self) -> bool:
        return self.default is MISSING

    def read(self, value: Any, name: str) -> Any:
        """A value as a spec document holds it, checked: the record's value, or one line naming `name`."""
        try:
            held = self.kind.read(value, name)
        except ValueError:
            hint = did_you_mean(value, self.kind.choices) if isinstance(self.kind, Word) else ""
            raise InstanceError(f"{name} must be {self.kind.what}, got {value!r}{hint}") from None
        self.check(held, name)
        return held

    def parse(self, text: str, name: str) -> Any:
        """Command-line text as a spec document would hold it (`1,2` -> [1, 2]), checked as `read` does."""
        try:
            written = self.kind.parse(text)
        except ValueError:
            raise InstanceError(f"{name} must be {self.kind.written}, got {text!r}") from None
        self.read(written, name)
        return written

    def check(self, value: Any, name: str) -> None:
        """Raise one line naming `name` when a record's value is not of the kind or out of range."""
        if not self.kind.holds(value):
            raise InstanceError(f"{name} must be {self.kind.what}, got {value!r}")
        if not all(self.in_range(item) for item in self.kind.items(value)):
            shown = list(value) if isinstance(value, tuple) else value if isinstance(value, int) else f"{value:g}"
            # An interval alone does not say what the number is (a fraction of the peak), the help does.
            meaning = f" ({self.help[0].lower()}{self.help[1:].rstrip('.')})" if self.at_most is not None else ""
            raise InstanceError(f"{name} must be {self.range_text()}{meaning}, got {shown}")

    def in_range(self, number: float) -> bool:
        return (
            (self.at_least is None or number >= self.at_least)
            and (self.above is None or number > self.above)
            and (self.at_most is None or number <= self.at_most)
        )

    def range_text(self) -> str:
        """The allowed range in words: `at least 1`, `a positive number`, `in (0, 1]`."""
        low = self.above if self.above is not None else self.at_least
        if self.at_most is not None:
            return f"in {'(' if self.above is not None else '['}{low:g}, {self.at_most:g}]"
        if isinstance(self.kind, Wholes):
            return f"whole numbers of at least {low:g}"
        if low == 0 and not isinstance(self.kind, Whole):
            return f"a {'positive' if self.above is not None else 'non-negative'} {self.kind.noun}"
        return f"{'above' if self.above is not None else 'at least'} {low:g}"

    def option_text(self, name: str, value: Any) -> str:
        """The option that gives `value` on the command line and the value as written: the short
        option if there is one; for a flag, its option alone when true, the option of `no_NAME` when false."""
        if isinstance(self.kind, Flag):
            return option_name(name if value else f"no_{name}")
        return f"{self.short or option_name(name)} {self.kind.text(value)}"


def key(kind: ValueKind, help: str, default: Any = MISSING, **limits: Any) -> Any:
    """A record's field declared by its key (see `Key` for the `limits`: unit, range, short option,
    default_from, whose key's default is None)."""
    declared = Key(kind, help, None if limits.get("default_from") else default, **limits)
    return dataclasses.field(default=declared.default, metadata={KEY: declared})


def like(record: type, name: str, **changes: Any) -> Any:
    """A field declared as `record`'s key `name`, with `changes` (another help, default or range)."""
    return key(**{**vars(keys(record)[name]), **changes})


def keys(record: type, leave_out: Sequence[str] = ()) -> dict[str, Key]:
    """The keys of a record's fields, in their order, but those named in `leave_out`."""
    return {
        field.name: field.metadata[KEY]
        for field in dataclasses.fields(record)
        if KEY in field.metadata and field.name not in leave_out
    }


def option_name(name: str) -> str:
    """A key's option on the command line: its name, dashes for underscores, after two dashes."""
    return "--" + name.replace("_", "-")


class Keyed:
    """A record whose fields are keys, each checked when the record is made (a dataclass base)."""

    def __post_init__(self) -> None:
        for name, declared in keys(type(self)).items():
            value = getattr(self, name)
            if value is None and declared.default_from:
                value = getattr(self, declared.default_from)
                object.__setattr__(self, name, value)
            if value is not None or declared.default is not None:
                declared.check(value, name)
