"""The launch files of a plan's chosen configuration, one writer a runtime (`solver.plan.runtimes`).

A writer takes a `LaunchInput` and returns the files to write, by name relative to the launch
file's folder (the first is the launch file itself, `LaunchInput.launch_name`), each file's text.
It only words what the plan chose: every flag or key it writes is one the framework has (the lists
in docs/runtimes/, held by the tests). Register a runtime's writer in `WRITERS`.
"""

from __future__ import annotations

from collections.abc import Callable

from pipesat.solver.launch.launch_input import LaunchInput
from pipesat.solver.launch.megatron import write_megatron, write_megatron_zb

Writer = Callable[[LaunchInput], dict[str, str]]

WRITERS: dict[str, Writer] = {
    "megatron": write_megatron,
    "megatron-zb": write_megatron_zb,
}
"""Runtime name -> its writer; the torchtitan and torch writers register here."""

__all__ = ["WRITERS", "LaunchInput", "Writer"]
