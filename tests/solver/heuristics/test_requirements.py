"""The requirement checks: None when met, else one reason that starts with "needs"."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from pipesat.models import Instance
from pipesat.solver.heuristics.requirements import (
    first_unmet,
    needs_interleaved,
    needs_linear,
    needs_microbatches_divisible_by_devices,
    needs_nothing,
    needs_split_backward,
    needs_vshape,
)
from tests.conftest import make_instance

LINEAR = make_instance(4, 6)
SPLIT = make_instance(4, 8, weight_times=1)
INTERLEAVED = make_instance(4, 8, chunks=2, placement="interleaved")
VSHAPE = make_instance(4, 8, chunks=2, placement="vshape")


@pytest.mark.parametrize(
    ("check", "met", "unmet", "reason"),
    [
        (needs_linear, LINEAR, VSHAPE, "needs one stage per device (chunks 1, linear placement)"),
        (needs_split_backward, SPLIT, LINEAR, "needs a split backward (weight_times)"),
        (needs_interleaved, INTERLEAVED, VSHAPE, "needs chunks >= 2 with interleaved placement"),
        (needs_interleaved, INTERLEAVED, LINEAR, "needs chunks >= 2 with interleaved placement"),
        (needs_vshape, VSHAPE, INTERLEAVED, "needs chunks 2 with vshape placement"),
        (
            needs_microbatches_divisible_by_devices,
            SPLIT,
            LINEAR,
            "needs the number of microbatches divisible by the number of devices (4)",
        ),
    ],
)
def test_each_check_passes_what_it_needs_and_names_what_is_missing(
    check: Callable[[Instance], str | None], met: Instance, unmet: Instance, reason: str
) -> None:
    assert check(met) is None
    assert check(unmet) == reason


def test_with_one_device_the_v_is_the_interleaved_placement() -> None:
    one_device = make_instance(1, 2, chunks=2, placement="interleaved")
    assert needs_vshape(one_device) is None and needs_interleaved(one_device) is None


def test_first_unmet_is_the_first_in_the_given_order() -> None:
    assert first_unmet(VSHAPE, needs_nothing, needs_vshape) is None
    assert first_unmet(VSHAPE, needs_linear, needs_split_backward) == needs_linear(VSHAPE)
    assert first_unmet(VSHAPE, needs_split_backward, needs_linear) == needs_split_backward(VSHAPE)
