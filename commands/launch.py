"""`plan --launch FILE`: the chosen configuration written in its runtime's own terms (`solver.launch`)."""

from __future__ import annotations

from pathlib import Path

from pipesat.commands.checks import check_writes
from pipesat.models.errors import InputError
from pipesat.models.plan_result import Configuration
from pipesat.models.schedule import Schedule
from pipesat.solver.io.output_file import write_output
from pipesat.solver.plan.runtime_bests import runs_on
from pipesat.solver.plan.runtimes import ANY
from pipesat.solver.plan.spec import PlanSpec


def launch_runtime(spec: PlanSpec, config: Configuration, made_by: str) -> str:
    """The runtime the launch files are for: the one the plan was held to, else the first runtime
    with a writer that runs the configuration and its schedule; one line when there is none."""
    from pipesat.solver.launch import WRITERS

    if spec.runtime != ANY:
        if spec.runtime not in WRITERS:
            raise InputError(f"--launch: no launch writer for {spec.runtime} yet (writers: {', '.join(WRITERS)})")
        return spec.runtime
    running = runs_on(config, made_by)
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
    path: Path,
    force: bool,
    outputs: dict[str, Path | None],
) -> str:
    """Write the launch files of `config` at `path` and beside it (each checked with the command's
    other `outputs`, then written atomically); the line that says what was written."""
    from pipesat.solver.launch import WRITERS, LaunchInput

    runtime = launch_runtime(spec, config, made_by)
    files = WRITERS[runtime](
        LaunchInput(spec=spec, config=config, schedule=schedule, schedule_name=made_by, launch_name=path.name)
    )
    paths = {name: path.parent / name for name in files}
    named = {("--launch" if name == path.name else f"--launch's {name}"): target for name, target in paths.items()}
    check_writes(force, {**outputs, **named})
    for name, text in files.items():
        write_output(paths[name], text)
    return f"launch ({runtime}): {', '.join(map(str, paths.values()))}"
