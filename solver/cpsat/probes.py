"""Bisection probes: "is there a schedule whose minimised value is at most T?", for T between the
proven lower bound and the best value in hand, each probe a short CP-SAT run without an objective.

Why: CP-SAT minimising from a warm start can stall well above the optimum, while the same model with
the objective's domain cut to T (every op's latest start then follows from T) is often settled at
once, both ways: a minimisation can end well over a bound that one probe at the bound shows was
right (benchmarks/bench_proofs.py; benchmarks/experiments/2026-11-25_bisection-probes). A probe that
CP-SAT refutes proves that no schedule has a value of T or less, so the bound becomes the least value
above T that an optimum can take (`ModelData.least_value_from`); a probe that finds one lowers the
best value to that schedule's. A probe that runs out of its time settles nothing.

The probes take over from a search that has stalled near its bound: neither its value nor its bound
moved for `Tuning.stall_share` of its time, at a gap of at most `Tuning.probe_gap` (`solver.cpsat.search`); a search
that moves keeps all its time. Near the bound few probes settle the question, and the model cut to
T is nearly tight; far from it, CP-SAT's own bound search often proves the optimum after a long
silence, where probes that took over did not. Bisecting before the search, or keeping a fixed share
of its time for the probes, cost proofs the search would have found in that time (bench_targets;
benchmarks/experiments/2026-11-25_bisection-probes). One probe does
open the search (`solver.cpsat.search`): at the analytic bound, for `Tuning.opening_share` of the
time, when the start is within `Tuning.opening_gap` of it; a start that close is often beaten by a schedule at the bound
itself, which no search of the objective finds as fast (benchmarks/experiments/2026-11-25_opening-probe). After a stall the
first probe is at the search's bound itself (the cheapest refutation, and a schedule at the bound is
optimal) and may take all the time left; the next ones are at the middle of what is left below the
best value and below every probe left open, so that after an open probe the next goes towards the
bound, where refutations come easier. They stop when the bound meets the best value (proven optimal), when a probe at the bound
itself stays open, at the gap asked for, or when their time is spent. On two workers a probe runs
CP-SAT's default_lp beside the same search branching on precedences (`solver.cpsat.search_parameters`,
`Tuning.probe_precedences`): finding a schedule at a tight value is where that branching helps; a third
thread runs that search with each device's no-overlap propagated by CP-SAT's strong disjunctive
reasoning (`Tuning.strong_probes`), which refutes tight values the default propagation leaves open.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable
from dataclasses import dataclass


class Outcome(enum.Enum):
    """What one probe settled."""

    FOUND = "found"  # a schedule of value at most T
    REFUTED = "refuted"  # no schedule of value at most T
    OPEN = "open"  # neither, in its time
    INTERRUPTED = "interrupted"  # Ctrl-C, SIGTERM


@dataclass(frozen=True)
class Probe:
    """One probe's result: what it settled and, when it found a schedule, that schedule's value
    (ticks, at most the T probed) and the watched variables' values."""

    outcome: Outcome
    value: int | None = None
    values: list[int] | None = None


@dataclass(frozen=True)
class Bisection:
    """What the probes proved: no schedule below `lower` (ticks); the best schedule they found, its
    `value` (ticks) and watched `values` (None when they found none better than the upper bound they
    started from); how many probes ran; whether one was interrupted."""

    lower: int
    value: int | None
    values: list[int] | None
    probes: int
    interrupted: bool

    def proven_optimal(self, upper: int) -> bool:
        """Whether the bound meets the best value (the probes' or `upper`, the one they started from)."""
        return self.lower >= (upper if self.value is None else self.value)


RunProbe = Callable[[int, float], Probe]
"""`run_probe(T, seconds)`: one probe at T ticks, for at most `seconds`."""


def bisect(
    lower: int,
    upper: int,
    run_probe: RunProbe,
    seconds: float,
    gap: float,
    clock: Callable[[], float],
    least_value_from: Callable[[int], int] = int,
) -> Bisection:
    """Probe between `lower` (proven) and `upper` (a schedule's value), all in ticks, for at most
    `seconds` of `clock` in all; stop at the relative `gap`. A probe refuted at T proves
    `least_value_from(T + 1)`, the least value an optimum can take above T. See the module notes for
    the order."""
    deadline = clock() + seconds
    best: int | None = None
    values: list[int] | None = None
    below_open = upper - 1  # the largest T worth probing: below the best value and below every open probe
    probes = 0
    while True:
        value = upper if best is None else best
        left = deadline - clock()
        if lower >= value or lower > below_open or _within_gap(lower, value, gap) or left <= 0:
            break
        target = lower if probes == 0 else (lower + below_open) // 2
        probe = run_probe(target, left)
        probes += 1
        if probe.outcome == Outcome.INTERRUPTED:
            return Bisection(lower, best, values, probes, interrupted=True)
        if probe.outcome == Outcome.REFUTED:
            lower = least_value_from(target + 1)
        elif probe.outcome == Outcome.OPEN and target == lower:
            break  # the easiest refutation left stays open: the probes have no more to give
        elif probe.outcome == Outcome.OPEN:
            below_open = target - 1
        elif probe.value is not None and probe.value < value:
            best, values = probe.value, probe.values
            below_open = min(below_open, probe.value - 1)
    return Bisection(lower, best, values, probes, interrupted=False)


def _within_gap(lower: int, value: int, gap: float) -> bool:
    return gap > 0 and lower > 0 and value <= math.floor(lower * (1 + gap))
