"""What the torch-based launch files share: the schedule CSV they name, and the pipeline's layout
read off the schedule (which stages each rank holds, the layers of each stage).

Every such runtime runs the schedule as the CSV of `torch.distributed.pipelining`
(`solver.torch.export`), whatever made it: torch's own built-in orders differ from pipesat's (torch's
1F1B is wrong on the last rank, docs/reference.md), so the CSV is the one way to run exactly the order
pipesat timed.
"""

from __future__ import annotations

from pathlib import Path

from pipesat.models import InputError, Schedule
from pipesat.solver.torch.export import torch_csv_text

LINE = 120
"""The longest line a launch file writes, as the formatter a project runs over it (ruff's default 88 aside,
this repository's 120) would leave it."""


def python_list(items: list[str], indent: str = "", outer: int = 0, prefix: str = "", after: str = "") -> str:
    """The list of the source texts `items` as Python at `indent`, behind `prefix` (`NAME = `) and before
    `after` (a comma), in a block the caller indents by `outer` more columns: on one line when it fits,
    else one item a line with a trailing comma, as a formatter writes it."""
    line = f"{indent}{prefix}[{', '.join(items)}]{after}"
    if outer + len(line) <= LINE:
        return line
    inner = "".join(f"{indent}    {item},\n" for item in items)
    return f"{indent}{prefix}[\n{inner}{indent}]{after}"


def quoted(names: list[str]) -> list[str]:
    """Strings as Python source, in double quotes."""
    return [f'"{name}"' for name in names]


def csv_name(launch_name: str) -> str:
    """The schedule CSV's name beside the launch file `launch_name` (`torchtitan.py` -> `torchtitan.csv`)."""
    return f"{Path(launch_name).stem}.csv"


def schedule_csv(schedule: Schedule) -> str:
    """The schedule's CSV text; one line when torch cannot run it (a bidirectional schedule, an
    invalid or deadlocking order)."""
    return torch_csv_text(schedule)


def rank_stages(schedule: Schedule) -> list[list[int]]:
    """The stages each rank (device) holds, in stage order."""
    instance = schedule.instance
    return [sorted(instance.stages_of(device)) for device in range(instance.num_devices)]


def stage_layers(schedule: Schedule) -> list[int]:
    """The transformer layers of each stage, as the plan's derivation split them (the instance's
    `layers_per_stage`); one line when the schedule's instance was not derived from a model."""
    model = schedule.instance.metadata.get("model")
    split = model.get("layers_per_stage") if isinstance(model, dict) else None
    if not isinstance(split, list) or len(split) != schedule.instance.num_stages:
        raise InputError(
            "the schedule's instance gives no layers per stage (model.layers_per_stage): a launch file is "
            "written for a schedule the plan derived from a model"
        )
    return [int(count) for count in split]
