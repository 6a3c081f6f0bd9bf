"""The error families: the command line exits 2 for an InputError and 1 for any other PipesatError."""

from __future__ import annotations

import pytest

from pipesat.models import InputError, InstanceError, OptionError, PipesatError, ScheduleError


@pytest.mark.parametrize("error", [InstanceError, OptionError])
def test_bad_instances_and_options_are_input_errors(error: type[PipesatError]) -> None:
    assert issubclass(error, InputError) and issubclass(error, PipesatError)


def test_a_schedule_error_is_not_an_input_error() -> None:
    assert issubclass(ScheduleError, PipesatError) and not issubclass(ScheduleError, InputError)
    assert str(ScheduleError("one line")) == "one line"
