"""The kinds of value a key of a run's description takes (`solver.instances.keys`): how each is
written in a spec document, on the command line and in a record, and how a record's value is written
back as an option takes it."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from pipesat.models.units import MEMORY_UNITS, memory_in


class ValueKind:
    """How values of a key are written: in a spec document (`read`), on the command line (`parse`, to
    what a document would hold), in a record (`holds`) and back as an option's text (`text`). `read`
    and `parse` raise ValueError for a value not of the kind; the key turns it into the error line.
    `what` says what the kind takes (`written`: on the command line), `noun` names its values in a
    range, `metavar` in the help."""

    def __init__(self, what: str, noun: str, metavar: str, written: str = "") -> None:
        self.what, self.noun, self.metavar, self.written = what, noun, metavar, written or what

    def holds(self, value: Any) -> bool:
        raise NotImplementedError

    def read(self, value: Any, name: str) -> Any:
        if not self.holds(value):
            raise ValueError(value)
        return value

    def parse(self, text: str) -> Any:
        return text

    def text(self, value: Any) -> str:
        return str(value)

    def items(self, value: Any) -> Sequence[float]:
        """The numbers a range applies to."""
        return [value]


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


class Whole(ValueKind):
    def __init__(self) -> None:
        super().__init__("a whole number", "whole number", "INTEGER")

    def holds(self, value: Any) -> bool:
        return _whole(value)

    def parse(self, text: str) -> Any:
        return int(text)


class Number(ValueKind):
    def __init__(self) -> None:
        super().__init__("a number", "number", "NUMBER")

    def holds(self, value: Any) -> bool:
        return _finite(value)

    def read(self, value: Any, name: str) -> Any:
        return float(super().read(value, name))

    def parse(self, text: str) -> Any:
        return float(text)

    def text(self, value: Any) -> str:
        return f"{value:g}"


class Flag(ValueKind):
    def __init__(self) -> None:
        super().__init__("true or false", "flag", "BOOLEAN")

    def holds(self, value: Any) -> bool:
        return isinstance(value, bool)

    def text(self, value: Any) -> str:
        return str(value).lower()


class Word(ValueKind):
    """One word out of `choices` (the command line offers them as a choice)."""

    def __init__(self, choices: Sequence[str]) -> None:
        super().__init__(f"one of {', '.join(choices)}", "word", "WORD")
        self.choices = tuple(choices)

    def holds(self, value: Any) -> bool:
        return value in self.choices


class Text(ValueKind):
    """Free text, which the record's user checks (a placement: a name or a stage-to-device list)."""

    def __init__(self) -> None:
        super().__init__("text", "text", "TEXT")

    def holds(self, value: Any) -> bool:
        return isinstance(value, str)


class Amount(ValueKind):
    """Memory with a unit (`80GiB`), held in bytes. A written amount is positive; a record may hold 0
    for none (`Hardware.gpu_memory`: no budgets)."""

    def __init__(self, what: str = "a positive amount with a unit, such as 80GiB", noun: str = "amount") -> None:
        super().__init__(what, noun, "AMOUNT")

    def holds(self, value: Any) -> bool:
        return _finite(value)

    def read(self, value: Any, name: str) -> Any:
        amount = memory_in(value, "B", name) if isinstance(value, str) else None
        if amount is None or amount <= 0:
            raise ValueError(value)
        return amount

    def text(self, value: Any) -> str:
        """Bytes as an option takes them: in the largest binary unit that keeps them exact (80GiB)."""
        for unit in ("TiB", "GiB", "MiB", "KiB"):
            text = f"{value / MEMORY_UNITS[unit]:.12g}"
            if value >= MEMORY_UNITS[unit] and float(text) * MEMORY_UNITS[unit] == value:
                return text + unit
        return f"{value:.17g}B"


class Share(Amount):
    """A part of the GPU's memory: a percentage (`10%`, held as the fraction 0.1) or an amount of at
    least a byte (`6GiB`, held in bytes); a held value below 1 is a fraction."""

    def __init__(self) -> None:
        super().__init__("a percentage of the GPU below 100 (10%) or an amount (6GiB)", "number")
        self.metavar = "SHARE"

    def read(self, value: Any, name: str) -> Any:
        if isinstance(value, str) and value.strip().endswith("%"):
            percent = float(value.strip()[:-1])
            if not 0 <= percent < 100:
                raise ValueError(value)
            return percent / 100
        amount = super().read(value, name)
        if amount < 1:
            raise ValueError(value)
        return amount

    def text(self, value: Any) -> str:
        return f"{value * 100:.12g}%" if value < 1 else super().text(value)


class Wholes(ValueKind):
    """Whole numbers, one or a list (`[1, 2]`; `1,2` on the command line); `distinct`: a set, sorted."""

    def __init__(self, distinct: bool = False) -> None:
        what = "a whole number or a list of them, such as [1, 2]"
        super().__init__(what, "whole numbers", "N,N,...", "whole numbers separated by commas, such as 1,2")
        self.distinct = distinct

    def holds(self, value: Any) -> bool:
        return isinstance(value, tuple) and all(_whole(item) for item in value)

    def read(self, value: Any, name: str) -> Any:
        items = tuple(value) if isinstance(value, list | tuple) else (value,)
        if not items or not self.holds(items):
            raise ValueError(value)
        return tuple(sorted(set(items))) if self.distinct else items

    def parse(self, text: str) -> Any:
        return [int(part) for part in text.replace(",", " ").split()]

    def text(self, value: Any) -> str:
        return ",".join(str(item) for item in value)

    def items(self, value: Any) -> Sequence[float]:
        return value


class Words(ValueKind):
    """Some of `choices`, called `noun` (`placements`): one or a list, held in the order of `choices`."""

    def __init__(self, choices: Sequence[str], noun: str) -> None:
        super().__init__(f"a list of {noun} out of {', '.join(choices)}", noun, "NAME,NAME,...")
        self.choices = tuple(choices)

    def holds(self, value: Any) -> bool:
        return isinstance(value, tuple) and bool(value) and all(item in self.choices for item in value)

    def read(self, value: Any, name: str) -> Any:
        items = value if isinstance(value, list | tuple) else [value]
        if not items or any(item not in self.choices for item in items):
            raise ValueError(value)
        return tuple(choice for choice in self.choices if choice in items)

    def parse(self, text: str) -> Any:
        return text.replace(",", " ").split()

    def text(self, value: Any) -> str:
        return ",".join(value)


WHOLE, NUMBER, FLAG, TEXT, AMOUNT, SHARE = Whole(), Number(), Flag(), Text(), Amount(), Share()
