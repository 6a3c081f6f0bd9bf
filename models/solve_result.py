"""What a solve returns: the schedule, its value and proof, and why there is none when there is none.

Data only: `solver.solve` fills it, `solver.report.solve_text` words it for people.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from pipesat.models.objective import Objective, Status
from pipesat.models.schedule import Schedule
from pipesat.models.tuning import DEFAULT_TUNING, Tuning


@dataclass(frozen=True)
class NamedValue:
    """A schedule's name (a heuristic's, `periodic`, `one-at-a-time`, a given file's) and its objective value."""

    name: str
    value: float


class InfeasibleReason(str, Enum):
    """Why no schedule exists."""

    MEMORY_LIMIT = "memory limit"  # the memory limit is below the smallest feasible one
    TIME_CAP = "time cap"  # the cap on the time objective is below its lower bound
    PROVEN = "proven"  # CP-SAT proved that no schedule fits (within the cap, when given)

    def __str__(self) -> str:
        return self.value


class StopReason(str, Enum):
    """Why a solve ended as it did."""

    BOUNDS = "bounds"  # no search: a start met the lower bound (or was within the gap), or no schedule can fit
    PROOF = "proof"  # CP-SAT proved the value optimal, or that no schedule fits
    GAP = "gap"  # CP-SAT reached the gap asked for
    TIME_LIMIT = "time limit"  # the time limit ran out (CP-SAT's deterministic one in a deterministic solve)
    WALL_CLOCK = "wall clock"  # a deterministic solve: the wall clock stopped CP-SAT at its factor of the limit
    INTERRUPT = "interrupt"  # Ctrl-C or SIGTERM
    MODEL_INVALID = "model invalid"  # CP-SAT refused the model or its parameters
    CRASH = "crash"  # the CP-SAT process died without its result

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Infeasibility:
    """Why no schedule exists, with the numbers that show it.

    MEMORY_LIMIT: `limit` is the memory limit and `least` the smallest feasible one; with limits that
    differ between devices, `device` is the first device whose limit is too small and both numbers are
    that device's. TIME_CAP: `limit` is the cap on `time_objective` and `least` its lower bound.
    PROVEN: `limit` is the cap on `time_objective` (None without a cap) and `least` is None.
    """

    reason: InfeasibleReason
    time_objective: Objective
    limit: float | None = None
    least: float | None = None
    device: int | None = None


@dataclass(frozen=True, kw_only=True)
class SolveResult:
    """What a solve found and proved.

    `value` is the schedule's objective (makespan, max span or peak memory) by
    `solver.evaluate.metrics`; `bound` a proven lower bound on it, equal to `value` when the value is
    proven optimal; `gap = (value - bound) / bound` (`relative_gap`, the design's one definition).
    Times are seconds since `solve` was called:
    `time_to_first` until a schedule was in hand (a starting schedule or CP-SAT's first solution),
    `time_to_best` until the returned one was. `searched` is False when a starting schedule met the
    bound (or was within the gap) and no search ran; the schedule is then `starting_point`'s.

    `best_heuristic` is the best handwritten schedule that fits (or a given one): what a user compares
    the result with. `starting_point` is the best schedule the search started from, which may be
    pipesat's own (the periodic or one-at-a-time start). `smallest_feasible_limit` is known when the
    memory limit is infeasible, and when minimising memory proved the value optimal.

    `resolution` is set when the value is optimal only at the model's resolution: CP-SAT proved the
    schedule's order optimal with every time rounded down to a whole multiple of `resolution`
    (instance units), so the true optimum lies between `bound` and `value`, which differ by rounding.

    `stopped_by` says why the solve ended as it did and `reason` says it in words, with what CP-SAT
    or its process said: `proven by CP-SAT`, `the time limit ran out`, `CP-SAT refused the model:
    ...`, `the CP-SAT process was killed by signal SIGKILL; it last wrote: ...`.

    `tuning` is the solve's settings of the search and the bounds (`models.tuning`) that produced it.
    """

    status: Status
    objective: Objective
    schedule: Schedule | None = None
    value: float | None = None
    bound: float | None = None
    gap: float | None = None
    solve_time: float
    time_to_first: float | None = None
    time_to_best: float | None = None
    searched: bool = True
    best_heuristic: NamedValue | None = None
    starting_point: NamedValue | None = None
    smallest_feasible_limit: float | None = None
    infeasibility: Infeasibility | None = None
    resolution: float | None = None
    stopped_by: StopReason | None = None
    reason: str | None = None
    tuning: Tuning = DEFAULT_TUNING

    @property
    def proven_optimal(self) -> bool:
        """Whether the value is proven optimal (also when the solve was interrupted after the proof)."""
        return self.value is not None and self.bound == self.value
