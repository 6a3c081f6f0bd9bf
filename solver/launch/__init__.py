"""Launch files: the plan's chosen configuration written in a runtime's own terms (docs/runtimes/).

A writer takes the configuration, its schedule and the spec it was planned from, and returns the
files to write: the launch file's own name first, then what it names (a schedule CSV), each name
relative to the launch file's folder. Every field, flag and class a writer emits is one the runtime
has, held by a test against the lists in docs/runtimes/ (with the version and file they were read from).
"""

from __future__ import annotations

from collections.abc import Callable

from pipesat.solver.launch.launch_input import LaunchInput
from pipesat.solver.launch.torch import write_torch
from pipesat.solver.launch.torchtitan import write_torchtitan

__all__ = ["WRITERS", "LaunchInput"]


WRITERS: dict[str, Callable[[LaunchInput], dict[str, str]]] = {
    "torchtitan": write_torchtitan,
    "torch": write_torch,
}
"""Runtime name -> its writer: file name (relative to the launch file's folder) -> text, the launch
file's own name first."""
