"""What the CP-SAT layer knows of processes without OR-Tools: the cores this one may run on (CP-SAT's
workers by default) and how long a CP-SAT child told to stop may take before it is killed
(`solver.cpsat.child`). The command line's defaults and the plan's executors read them without
importing OR-Tools, so that a command's help and a refusal of its inputs start fast."""

from __future__ import annotations

import os

STOP_GRACE = 0.5


def available_cores() -> int:
    """The CPU cores this process may run on (its affinity where the platform says, else all of them)."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)
