"""The units reports show: the instance's time unit, and memory scaled to read well."""

from __future__ import annotations

import pytest

from pipesat.solver.report.units import Units, units_of
from tests.conftest import make_instance


def test_an_instance_without_units_shows_bare_numbers() -> None:
    units = units_of(make_instance(2, 4))
    assert units == Units()
    assert units.time_header("makespan") == "makespan" and units.with_memory("3") == "3"


def test_memory_is_shown_in_gib_once_the_1f1b_peak_or_a_limit_reaches_one() -> None:
    small = make_instance(2, 4, activation_memory=100).with_changes(time_unit="ms", memory_unit="MiB")
    assert units_of(small) == Units("ms", "MiB", 1.0)
    assert units_of(small.with_limit(2048)) == Units("ms", "GiB", pytest.approx(1 / 1024))
    units = units_of(small.with_limit(2048))
    assert units.time_header("makespan") == "makespan (ms)" and units.memory_header("peak") == "peak (GiB)"
    assert units.with_time("12.5") == "12.5 ms" and units.memory_value(1536) == pytest.approx(1.5)
