"""The one float tolerance: when two computed times or memory amounts count as equal.

Times and memory are sums of the instance's floats, added up in different orders by the simulator,
the re-timer, the validator and the CP-SAT read-back, so equal quantities can differ in their last
bits. A difference of at most RELATIVE times the larger magnitude (plus RELATIVE absolute, so that
zero compares sensibly) is float noise, never a real difference.
"""

from __future__ import annotations

RELATIVE = 1e-9


def slack(reference: float) -> float:
    """The float noise allowed around `reference`."""
    return RELATIVE * (abs(reference) + 1.0)


def fits(value: float, limit: float) -> bool:
    """`value <= limit` up to float noise: a peak within a memory limit, a value within a cap or bound."""
    return value <= limit + slack(limit)


def same(value: float, reference: float) -> bool:
    """`value == reference` up to float noise."""
    return abs(value - reference) <= RELATIVE * max(abs(value), abs(reference))
