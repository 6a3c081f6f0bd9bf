"""The pipesat command line: the `pipesat` group and its entry point. The commands are in `commands/`;
they parse options, call `solver` and print. No scheduling logic lives here."""

from __future__ import annotations

import click

from pipesat.commands.files import check, export_command, import_group, render
from pipesat.commands.frame import PipesatGroup, stop_on_sigterm
from pipesat.commands.instances import instance
from pipesat.commands.options import LIMIT_OPTIONS
from pipesat.commands.plan import plan_command
from pipesat.commands.schedules import compare_command, pareto, schedule_command, solve
from pipesat.commands.torch import calibrate_command, import_torch_command, profile_command, torch_run_command
from pipesat.models.limits import set_max_input_mb, set_max_ops


@click.group(cls=PipesatGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--debug", is_flag=True, help="Show the full traceback on errors.")
@LIMIT_OPTIONS
@click.version_option(package_name="pipesat")
def cli(debug: bool, max_ops: int, max_model_ops: int, max_input_mb: int) -> None:
    """pipesat: optimal pipeline-parallel training schedules with CP-SAT."""
    set_max_ops(max_ops, max_model_ops)
    set_max_input_mb(max_input_mb)


import_group.add_command(import_torch_command)
for command in (
    check,
    schedule_command,
    render,
    solve,
    compare_command,
    pareto,
    instance,
    profile_command,
    calibrate_command,
    export_command,
    import_group,
    torch_run_command,
    plan_command,
):
    cli.add_command(command)


def main() -> None:
    stop_on_sigterm()
    cli(prog_name="pipesat")


if __name__ == "__main__":
    main()
