"""What the CP-SAT layer knows of processes without OR-Tools: the cores this one may run on (CP-SAT's
workers by default), how long a CP-SAT child told to stop may take before it is killed
(`solver.cpsat.child`), and a child's watch on its parent (the search child's and a plan's pool
workers'). The command line's defaults and the plan's executors read them without
importing OR-Tools, so that a command's help and a refusal of its inputs start fast."""

from __future__ import annotations

import os
import threading
import time

STOP_GRACE = 0.5
PARENT_POLL_SECONDS = 0.05
"""How often a child looks whether its parent is still there."""


def available_cores() -> int:
    """The CPU cores this process may run on (its affinity where the platform says, else all of them)."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


def end_with_parent() -> None:
    """End this process when its parent is gone, from a watching thread. A parent that is killed (a
    plan's pool worker that did not answer a stop in time, a plan killed or whose terminal closed)
    cannot end its children, and a search with nothing to send, or an idle pool worker, does not notice."""
    threading.Thread(target=_end_with_parent, args=(os.getppid(),), name="parent-watch", daemon=True).start()


def _end_with_parent(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(PARENT_POLL_SECONDS)
    os._exit(1)
