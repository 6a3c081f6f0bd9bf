"""`plan --launch FILE`: the chosen configuration written in its runtime's own terms (`solver.launch`)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from pipesat.commands.checks import check_writes
from pipesat.models.errors import InputError
from pipesat.models.plan_result import Configuration
from pipesat.models.schedule import Schedule
from pipesat.solver.io.output_file import write_output
from pipesat.solver.plan.runtimes import ANY, RUNTIMES
from pipesat.solver.plan.spec import PlanSpec


def launch_runtime(spec: PlanSpec, config: Configuration, made_by: str, running: tuple[str, ...]) -> str:
    """The runtime the launch files are for: the one the plan was held to, else the first of
    `running` (those that run the configuration as fast) with a writer; one line when there is none."""
    from pipesat.solver.launch import WRITERS

    if spec.runtime != ANY:
        if spec.runtime not in WRITERS:
            raise InputError(f"--launch: no launch writer for {spec.runtime} yet (writers: {', '.join(WRITERS)})")
        return spec.runtime
    for name in running:
        if name in WRITERS:
            return name
    raise InputError(
        f"--launch: {config.label} with its schedule ({made_by}) runs on {', '.join(running) or 'none of the runtimes'}, "
        f"and none of them has a launch writer yet (writers: {', '.join(WRITERS)}); choose one with --runtime"
    )


def write_launch(
    spec: PlanSpec,
    config: Configuration,
    schedule: Schedule,
    made_by: str,
    running: tuple[str, ...],
    own: Mapping[str, str],
    path: Path,
    force: bool,
    outputs: dict[str, Path | None],
) -> str:
    """Write the launch files of `config` at `path` and beside it (each checked with the command's
    other `outputs`, then written atomically); the line that says what was written. A runtime that
    does not run `made_by` but runs the configuration as fast with a schedule of its own (`own`:
    runtime -> that schedule's maker) is written with that one."""
    from pipesat.solver.launch import WRITERS, LaunchInput

    runtime = launch_runtime(spec, config, made_by, running)
    name = made_by if RUNTIMES[runtime].runs_schedule(made_by) else own.get(runtime, made_by)
    files = WRITERS[runtime](
        LaunchInput(spec=spec, config=config, schedule=schedule, schedule_name=name, launch_name=path.name)
    )
    paths = {name: path.parent / name for name in files}
    named = {("--launch" if name == path.name else f"--launch's {name}"): target for name, target in paths.items()}
    check_writes(force, {**outputs, **named})
    for name, text in files.items():
        write_output(paths[name], text)
    return f"launch ({runtime}): {', '.join(map(str, paths.values()))}"
