"""What a solve minimises and how it ended: `Objective` and `Status`."""

from __future__ import annotations

from enum import Enum


class Objective(str, Enum):
    """The quantity a schedule is judged by. MAKESPAN and SPAN are times; MEMORY the peak memory."""

    MAKESPAN = "makespan"
    SPAN = "span"
    MEMORY = "memory"

    @property
    def title(self) -> str:
        """How tables and messages name it."""
        return {"makespan": "makespan", "span": "max span", "memory": "peak memory"}[self.value]

    def __str__(self) -> str:
        return self.value


TIME_OBJECTIVES = (Objective.MAKESPAN, Objective.SPAN)


class Status(str, Enum):
    """How a solve ended. OPTIMAL is a proof (value equals the bound); FEASIBLE has a gap."""

    OPTIMAL = "optimal"
    FEASIBLE = "feasible"
    INFEASIBLE = "infeasible"
    UNKNOWN = "unknown"
    INTERRUPTED = "interrupted"

    def __str__(self) -> str:
        return self.value
