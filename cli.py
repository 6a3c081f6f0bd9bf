"""The pipesat command line: the `pipesat` group and its entry point. The commands are in `commands/`;
they parse options, call `solver` and print. No scheduling logic lives here. Each command's module is
imported when the command runs or shows its help (`commands.lazy`), so that `pipesat --help`,
`--version` and a usage error load none of the solver."""

from __future__ import annotations

from pipesat.commands.interrupt import leave_on_signals, stop_on_signals

if __name__ == "__main__":  # the program (not a test importing it): a signal while the imports load ends it
    leave_on_signals()
import click

from pipesat.commands.lazy import LazyCommand, LazyGroup
from pipesat.commands.options import LIMIT_OPTIONS
from pipesat.models.limits import set_max_input_mb, set_max_ops

FILES = "pipesat.commands.files"
INSTANCES = "pipesat.commands.instances"
PLAN = "pipesat.commands.plan"
SCHEDULES = "pipesat.commands.schedules"
TORCH = "pipesat.commands.torch"

COMMANDS = {
    "check": LazyCommand(f"{FILES}:check", "Validate a schedule file; list every violation (exit 1 when invalid)."),
    "schedule": LazyCommand(
        f"{SCHEDULES}:schedule_command", "Run the handwritten schedule NAME: its metrics, picture and schedule file."
    ),
    "render": LazyCommand(
        f"{FILES}:render", "Draw a schedule file, or print it with --ascii; it must pass the validator."
    ),
    "solve": LazyCommand(
        f"{SCHEDULES}:solve",
        "Find the best schedule with CP-SAT, warm-started from every handwritten schedule that fits.",
    ),
    "compare": LazyCommand(
        f"{SCHEDULES}:compare_command",
        "Every handwritten schedule and the solver side by side, on one instance and memory limit (or the same "
        "model at several placements).",
    ),
    "pareto": LazyCommand(
        f"{SCHEDULES}:pareto", "The fastest schedule at each memory limit: the frontier table and its plot."
    ),
    "instance": LazyCommand(f"{INSTANCES}:instance", "Inspect and make instance files."),
    "profile": LazyCommand(
        f"{TORCH}:profile_command",
        "Measure F, B, W and memory per stage of a small GPT-like model with torch (the torch extra).",
    ),
    "calibrate": LazyCommand(
        f"{TORCH}:calibrate_command",
        "Measure one transformer layer of each shape SPEC's plan needs with torch (each tensor-parallel degree, "
        "microbatch size and recomputation it tries), for `plan --calibration` (docs/calibration.md).",
    ),
    "export": LazyCommand(
        f"{FILES}:export_command",
        "Write a schedule file as torch's compute_only CSV or as a Chrome trace (Perfetto, chrome://tracing).",
    ),
    "import": LazyCommand(
        f"{FILES}:import_group",
        "Time PyTorch's schedules on an instance: torch's built-ins, or any torch schedule CSV.",
    ),
    "torch-run": LazyCommand(
        f"{TORCH}:torch_run_command",
        "Run one training step of the schedule in PyTorch (gloo, CPU, one process per device) and check the "
        "gradients against plain training (needs torch).",
    ),
    "plan": LazyCommand(
        f"{PLAN}:plan_command",
        "Rank every way to train SPEC's model on its cluster: parallel degrees, placement, microbatch size and "
        "the best schedule of each, by tokens/s (docs/plan.md).",
    ),
}
"""Each command of `pipesat`: its function and short help (the first sentence of its docstring)."""


@click.group(cls=LazyGroup, lazy_commands=COMMANDS, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--debug", is_flag=True, help="Show the full traceback on errors.")
@LIMIT_OPTIONS
@click.version_option(package_name="pipesat")
def cli(debug: bool, max_ops: int, max_model_ops: int, max_input_mb: int) -> None:
    """pipesat: optimal pipeline-parallel training schedules with CP-SAT."""
    set_max_ops(max_ops, max_model_ops)
    set_max_input_mb(max_input_mb)


def main() -> None:
    stop_on_signals()
    cli(prog_name="pipesat")


if __name__ == "__main__":
    main()
