"""Units: amounts written with a unit, converted to the instance's, and the unit reports show them in."""

from __future__ import annotations

import pytest

from pipesat.models.errors import InstanceError
from pipesat.models.units import MEMORY_UNITS, check_unit, display_memory_unit, memory_in


@pytest.mark.parametrize(
    ("text", "unit", "expected"),
    [("12GiB", "MiB", 12288.0), (" 1.5 GiB ", "GiB", 1.5), ("1GB", "MB", 1000.0), ("2048KiB", "MiB", 2.0)],
)
def test_an_amount_is_converted_to_the_instance_unit(text: str, unit: str, expected: float) -> None:
    assert memory_in(text, unit, "--memory-limit") == pytest.approx(expected)


@pytest.mark.parametrize("text", ["12", "1,2", ""])
def test_text_without_a_unit_is_left_to_the_caller(text: str) -> None:
    assert memory_in(text, "MiB", "--memory-limit") is None


@pytest.mark.parametrize(
    ("text", "unit", "message"),
    [
        ("12 GiBs", "MiB", "'GiBs' is not a memory unit; use one of B, KiB, MiB"),
        ("12GiB", "", "has a unit but the instance's memory has none"),
        ("1e999GiB", "MiB", "must be a finite amount"),
        ("1.2.3GiB", "MiB", "is not a number with a unit"),
    ],
)
def test_a_bad_amount_says_what_is_wrong(text: str, unit: str, message: str) -> None:
    with pytest.raises(InstanceError, match=message):
        memory_in(text, unit, "memory_limit")


def test_an_unknown_unit_key_lists_the_known_ones() -> None:
    assert check_unit("memory_unit", None, MEMORY_UNITS) == ""
    assert check_unit("memory_unit", "GiB", MEMORY_UNITS) == "GiB"
    with pytest.raises(InstanceError, match="memory_unit 'gb' is not a unit pipesat knows"):
        check_unit("memory_unit", "gb", MEMORY_UNITS)


@pytest.mark.parametrize(
    ("unit", "largest", "shown", "factor"),
    [
        ("MiB", 512.0, "MiB", 1.0),
        ("MiB", 20480.0, "GiB", 1 / 1024),
        ("KiB", 3 * 2.0**20, "GiB", 2.0**-20),
        ("GB", 1e6, "GB", 1.0),  # decimal units are shown as given
        ("", 1e9, "", 1.0),
    ],
)
def test_binary_units_step_up_once_amounts_reach_the_next(unit: str, largest: float, shown: str, factor: float) -> None:
    assert display_memory_unit(unit, largest) == (shown, pytest.approx(factor))
