"""What a solve minimises and how it ended: `Objective`, `Minimize` and `Status`."""

from __future__ import annotations

from enum import Enum

from pipesat.models.errors import OptionError


class Objective(str, Enum):
    """The quantity a schedule is judged by. MAKESPAN and SPAN are times; MEMORY the peak memory."""

    MAKESPAN = "makespan"
    SPAN = "span"
    MEMORY = "memory"

    @property
    def label(self) -> str:
        """How tables and messages name it."""
        return {"makespan": "makespan", "span": "max span", "memory": "peak memory"}[self.value]

    def __str__(self) -> str:
        return self.value


TIME_OBJECTIVES = (Objective.MAKESPAN, Objective.SPAN)


def time_objective(objective: Objective | str) -> Objective:
    """`objective` (an `Objective` or its value, as a caller may give it) as a time objective; any
    other is an `OptionError`."""
    if objective not in TIME_OBJECTIVES:
        raise OptionError(f"unknown objective {objective!r}; use one of {', '.join(TIME_OBJECTIVES)}")
    return Objective(objective)


class Minimize(str, Enum):
    """What a solve minimises: TIME its time objective, under the memory limit; MEMORY the peak memory,
    ignoring the memory limit, with the time objective optionally capped."""

    TIME = "time"
    MEMORY = "memory"

    def __str__(self) -> str:
        return self.value


class Status(str, Enum):
    """How a solve ended. OPTIMAL is a proof (value equals the bound); FEASIBLE has a gap."""

    OPTIMAL = "optimal"
    FEASIBLE = "feasible"
    INFEASIBLE = "infeasible"
    UNKNOWN = "unknown"
    INTERRUPTED = "interrupted"

    def __str__(self) -> str:
        return self.value
