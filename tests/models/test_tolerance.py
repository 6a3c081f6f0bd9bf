"""The one float tolerance: float noise passes, a real difference does not, and zero compares sensibly."""

from __future__ import annotations

import pytest

from pipesat.models.tolerance import RELATIVE, fits, same, slack


@pytest.mark.parametrize("reference", [0.0, 1.0, -3.0, 4e6])
def test_slack_grows_with_the_magnitude_and_is_never_zero(reference: float) -> None:
    assert slack(reference) == slack(-reference) == RELATIVE * (abs(reference) + 1.0) > 0


def test_fits_up_to_the_slack_and_no_further() -> None:
    limit = 4.0
    assert fits(limit, limit) and fits(3.0, limit)
    assert fits(limit + slack(limit), limit)
    assert not fits(limit + 2 * slack(limit), limit)
    assert not fits(4.001, limit)


def test_fits_absorbs_the_noise_of_sums_in_another_order() -> None:
    assert 0.1 + 0.2 > 0.3  # the noise is real
    assert fits(0.1 + 0.2, 0.3)
    assert fits(sum([0.1] * 10), 1.0) and fits(1.0, sum([0.1] * 10))


def test_fits_at_a_zero_limit_uses_the_absolute_part() -> None:
    assert fits(0.0, 0.0) and fits(RELATIVE / 2, 0.0)
    assert not fits(2 * RELATIVE, 0.0)


def test_same_is_symmetric_and_relative() -> None:
    assert same(0.1 + 0.2, 0.3) and same(0.3, 0.1 + 0.2)
    assert same(0.0, 0.0) and same(5.0, 5.0)
    assert same(1e9, 1e9 + 0.5)  # a relative difference of 5e-10
    assert not same(1e9, 1e9 + 2) and not same(1e9 + 2, 1e9)
    assert not same(1.0, 1.0 + 1e-6)


def test_same_at_zero_has_no_absolute_part() -> None:
    # Unlike `fits`, `same` is purely relative: nothing but zero is the same as zero.
    assert not same(1e-12, 0.0) and not same(0.0, -1e-12)
