"""The one float tolerance: when two computed times or memory amounts count as equal.

Times and memory are sums of the instance's floats, added up in different orders by the simulator,
the re-timer, the validator and the CP-SAT read-back, so equal quantities can differ in their last
bits. Such a difference is float noise, never a real difference; how much counts as noise depends on
the question. `same` allows RELATIVE times the larger magnitude and no absolute term (so only 0
equals 0); `fits` (a value within a limit) allows RELATIVE times the limit's magnitude plus RELATIVE
absolute (`slack`), so that a limit of 0 admits noise too; `time_slack` and `duration_slack` allow
RELATIVE of a length plus ULPS units in the last place of a time.
"""

from __future__ import annotations

import math

RELATIVE = 1e-9
# Units in the last place of a time that its own rounding may cost (a sum rounds once per term).
ULPS = 64


def slack(reference: float) -> float:
    """The float noise allowed around `reference`."""
    return RELATIVE * (abs(reference) + 1.0)


def fits(value: float, limit: float) -> bool:
    """`value <= limit` up to float noise: a peak within a memory limit, a value within a cap or bound."""
    return value <= limit + slack(limit)


def same(value: float, reference: float) -> bool:
    """`value == reference` up to float noise."""
    return abs(value - reference) <= RELATIVE * max(abs(value), abs(reference))


def time_slack(time: float, origin: float = 0.0) -> float:
    """The float noise allowed in a time computed as a sum of op times starting at `origin`.

    It scales with that time alone (how far it is from the schedule's first start, and a few units in
    the last place of the time itself), never with the rest of a schedule: an op placed far away
    cannot widen the tolerance of the others.
    """
    return RELATIVE * abs(time - origin) + ULPS * math.ulp(time)


def duration_slack(duration: float, end: float) -> float:
    """The float noise allowed in an op's length `end - start`: relative to the length, plus the
    rounding of its end time."""
    return RELATIVE * duration + ULPS * math.ulp(end)
