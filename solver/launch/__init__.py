"""Launch files: the plan's chosen configuration written in a runtime's own terms, one writer a
runtime (`solver.plan.runtimes`; docs/runtimes/).

A writer takes a `LaunchInput` and returns the files to write, by name relative to the launch
file's folder: the launch file's own name first (`LaunchInput.launch_name`), then what it names (a
schedule CSV, Megatron-Bridge's overrides), each with its text. It only words what the plan chose:
every field, flag and class a writer emits is one the runtime has, held by a test against the lists
in docs/runtimes/ (with the version and file they were read from).
"""

from __future__ import annotations

from collections.abc import Callable

from pipesat.solver.launch.launch_input import LaunchInput
from pipesat.solver.launch.megatron import write_megatron, write_megatron_zb
from pipesat.solver.launch.torch import write_torch
from pipesat.solver.launch.torchtitan import write_torchtitan

Writer = Callable[[LaunchInput], dict[str, str]]

WRITERS: dict[str, Writer] = {
    "megatron": write_megatron,
    "megatron-zb": write_megatron_zb,
    "torchtitan": write_torchtitan,
    "torch": write_torch,
}
"""Runtime name -> its writer."""

__all__ = ["WRITERS", "LaunchInput", "Writer"]
