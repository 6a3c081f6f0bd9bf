"""Units: the memory and time units an instance may carry, and quantities written with them ("12GiB").

An instance's numbers are in its own units (`time_unit`, `memory_unit`; empty for the earlier tool's
unit-less configs). A memory quantity written with a unit is converted to the instance's memory unit;
one without is taken as already in it.
"""

from __future__ import annotations

import math
import re

from pipesat.models.errors import InstanceError

MIB = 2**20
GIB = 2**30
"""Bytes in a MiB and a GiB, as whole numbers (the cost model's memory and the reports' axes)."""
MEMORY_UNITS: dict[str, float] = {
    "B": 1.0,
    "KiB": 2.0**10,
    "MiB": 2.0**20,
    "GiB": 2.0**30,
    "TiB": 2.0**40,
    "KB": 1e3,
    "MB": 1e6,
    "GB": 1e9,
    "TB": 1e12,
}
TIME_UNITS: dict[str, float] = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}

_QUANTITY = re.compile(r"^\s*([-+0-9.eE]+)\s*([A-Za-z]+)\s*$")


def check_unit(key: str, unit: object, known: dict[str, float]) -> str:
    """An instance's unit key: empty (no unit) or one of `known`."""
    if unit is None or unit == "":
        return ""
    if not isinstance(unit, str) or unit not in known:
        raise InstanceError(f"{key} {unit!r} is not a unit pipesat knows; use one of {', '.join(known)}")
    return unit


def memory_in(text: str, unit: str, what: str) -> float | None:
    """`text` ("12GiB", "12288 MiB") in `unit`, or None when it carries no unit. `what` names the option
    or key in messages."""
    match = _QUANTITY.match(text)
    if match is None:
        return None
    number, written = match.groups()
    if written not in MEMORY_UNITS:
        raise InstanceError(f"{what} {text!r}: {written!r} is not a memory unit; use one of {', '.join(MEMORY_UNITS)}")
    if not unit:
        raise InstanceError(
            f"{what} {text!r} has a unit but the instance's memory has none; "
            "give memory_unit in the instance (MiB, GiB, ...) or a plain number"
        )
    try:
        value = float(number)
    except ValueError:
        raise InstanceError(f"{what} {text!r} is not a number with a unit such as 12GiB") from None
    if not math.isfinite(value):
        raise InstanceError(f"{what} {text!r} must be a finite amount")
    return value * MEMORY_UNITS[written] / MEMORY_UNITS[unit]


def display_memory_unit(unit: str, largest: float) -> tuple[str, float]:
    """The unit to show memory amounts in, and the factor from `unit` to it: GiB rather than MiB once
    amounts reach 1 GiB (bytes and binary units step by 1024; decimal units stay as given)."""
    binary = ["B", "KiB", "MiB", "GiB", "TiB"]
    if unit not in binary:
        return unit, 1.0
    index = binary.index(unit)
    while index + 1 < len(binary) and largest * MEMORY_UNITS[unit] >= MEMORY_UNITS[binary[index + 1]]:
        index += 1
    return binary[index], MEMORY_UNITS[unit] / MEMORY_UNITS[binary[index]]


def memory_text(amount: float, unit: str) -> str:
    """`3 GiB`: an amount in `unit`, shown in the unit `display_memory_unit` picks for it (bare without
    a unit), for messages outside the reports."""
    shown, factor = display_memory_unit(unit, amount)
    number = f"{amount * factor:.6g}"
    return f"{number} {shown}" if shown else number
