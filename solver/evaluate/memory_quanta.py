"""Held memory counted in quanta: the memory-energy bound made to see that activations come in
whole pieces (docs/bounds.md, "Memory energy in quanta").

The memory energy (`device_bounds.memory_energy`) treats a device's held memory as a fluid: the span is
at least the energy, amount x least duration summed over what the device holds, over the limit. But a
microbatch's activations are held whole: a limit of 2.67 microbatches' M_B holds two of them at a time,
not 2.67. For any quantum q > 0, count a held amount a as floor(a / q) quanta; at every moment the
amounts held sum to at most the limit C, so their quanta sum to at most floor(C / q) (a sum of floors is
at most the floor of the sum). The same area argument then gives span >= (sum of floor(a / q) x least
duration) / floor(C / q) for every q, and the fluid bound is the limit q -> 0. `quanta` gives the q
where the ratio can change: just below a / j for each held amount a and count j, where a's quanta
step up, while C holds at most `MOST_SLOTS` of them (beyond that the fluid bound is within 1/16).

`memory_slots` rounds the limit's quanta up and `quanta_of` an amount's down by a margin far above
float error (`MARGIN`), so that the bound stays sound under rounding.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

MOST_SLOTS = 16
"""The most quanta of a limit a candidate quantum leaves; with more, the fluid bound is within 1/16."""

MARGIN = 1e-6
"""A candidate quantum is a / j shrunk by this relative margin, so that a counts j quanta of it
robustly; `quanta_of` subtracts a smaller margin than this, so that float error never rounds up."""


def quanta(amounts: Iterable[float], capacity: float) -> list[float]:
    """The candidate quanta for held `amounts` under a limit of `capacity` (module notes): a / j, shrunk
    by `MARGIN`, for each positive amount a at most the capacity and each j with at most `MOST_SLOTS`
    quanta in the capacity."""
    found = set()
    for amount in amounts:
        if amount <= 0 or amount > capacity:
            continue
        for count in range(1, MOST_SLOTS + 1):
            quantum = amount / count / (1 + MARGIN)
            if capacity / quantum > MOST_SLOTS:
                break
            found.add(quantum)
    return sorted(found)


def quanta_of(amount: float, quantum: float) -> int:
    """Whole quanta in `amount`, rounded down past float error (sound: fewer counted)."""
    return max(0, math.floor(amount / quantum - MARGIN / 16))


def memory_slots(capacity: float, quantum: float) -> int:
    """The most quanta held at once under `capacity`, rounded up past float error (sound: more slots)."""
    return math.floor(capacity / quantum + MARGIN / 16)


def quantized_span(held: list[tuple[float, float]], capacity: float) -> float:
    """The least span in which a device holds each (amount, least total time held) of `held` under
    `capacity`: the largest over the candidate quanta, and the fluid bound, of the held quanta's area
    over the limit's quanta (module notes)."""
    if capacity <= 0:
        return 0.0
    best = sum(amount * duration for amount, duration in held) / capacity
    for quantum in quanta((amount for amount, _ in held), capacity):
        area = sum(quanta_of(amount, quantum) * duration for amount, duration in held)
        best = max(best, area / memory_slots(capacity, quantum))
    return best
