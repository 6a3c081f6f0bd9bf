"""A pipesat schedule as a ready torch pipeline schedule for your own `PipelineStage`s.

Call `torch_schedule` on every rank with that rank's stages; the object it returns runs the
schedule with `.step(inputs, target=..., losses=...)`, like torch's built-in schedules. It is torch's
`_PipelineScheduleRuntime` (a private class, checked against torch 2.13.0) loaded with the schedule's
per-rank order in torch's `compute_only` CSV format, to which torch adds the sends and receives.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipesat.models import InputError, Instance, Schedule
from pipesat.solver.io.schedule_file import load_schedule
from pipesat.solver.torch.export import schedule_to_rows, write_rows
from pipesat.solver.torch.import_schedule import require_torch

if TYPE_CHECKING:
    from torch.distributed.pipelining.schedules import _PipelineScheduleRuntime


def torch_schedule(
    schedule: Schedule | str | Path,
    stages: Sequence[Any],
    *,
    loss_fn: Callable[..., Any],
    n_microbatches: int | None = None,
    scale_grads: bool = True,
) -> _PipelineScheduleRuntime:
    """Torch's pipeline schedule object that runs `schedule` (a schedule file or a `Schedule`).

    `stages` are this rank's `torch.distributed.pipelining.PipelineStage`s: one for each stage the
    schedule places on this rank (`schedule.instance.stages_of(rank)`), built with the schedule's
    number of stages, in a process group of one rank per device. `loss_fn(output, target)` is the
    loss of one microbatch; with `scale_grads` (a mean loss) the gradients are those of the mean over
    all microbatches. `n_microbatches`, when given, must be the schedule's.

    Raises `ScheduleError` for an invalid schedule or one whose order would deadlock, `InputError`
    when the stages or `n_microbatches` do not match it, and `TorchMissing` without torch.
    """
    if not isinstance(schedule, Schedule):
        schedule = load_schedule(schedule)
    rows = schedule_to_rows(schedule)
    require_torch()
    from torch.distributed.pipelining.schedules import _PipelineScheduleRuntime

    instance = schedule.instance
    check_stages(instance, stages, n_microbatches)
    runtime = _PipelineScheduleRuntime(
        list(stages), instance.num_microbatches, loss_fn=loss_fn, scale_grads=scale_grads
    )
    with tempfile.TemporaryDirectory(prefix="pipesat-torch-schedule-") as folder:
        path = write_rows(rows, Path(folder) / "schedule.csv")
        runtime._load_csv(str(path), format="compute_only")
    return runtime


def check_stages(instance: Instance, stages: Sequence[Any], n_microbatches: int | None = None) -> None:
    """Raise `InputError` unless `stages` are exactly the stages `instance` places on their rank."""
    if n_microbatches is not None and n_microbatches != instance.num_microbatches:
        raise InputError(
            f"n_microbatches is {n_microbatches} but the schedule has {instance.num_microbatches} microbatches; "
            "leave n_microbatches out or give the schedule's"
        )
    if not stages:
        raise InputError("no stages given; pass the PipelineStage of each stage the schedule places on this rank")
    for position, stage in enumerate(stages):
        _check_stage(instance, position, stage)
    rank = stages[0].group_rank
    given = sorted(stage.stage_index for stage in stages)
    placed = instance.stages_of(rank)
    if given != placed:
        raise InputError(
            f"rank {rank} was given stages {given} but the schedule places stages {placed} on it; "
            "pass a PipelineStage for each of those"
        )


def _check_stage(instance: Instance, position: int, stage: Any) -> None:
    """One stage's own checks: it is a pipeline stage of this schedule's shape."""
    if not all(hasattr(stage, name) for name in ("stage_index", "num_stages", "group_size", "group_rank")):
        raise InputError(
            f"stages[{position}] is a {type(stage).__name__}, not a PipelineStage; wrap your module: "
            "PipelineStage(module, stage_index, num_stages, device)"
        )
    if stage.num_stages != instance.num_stages:
        raise InputError(
            f"stage {stage.stage_index} was built with num_stages={stage.num_stages} but the schedule has "
            f"{instance.num_stages} stages; build it with num_stages={instance.num_stages}"
        )
    if stage.group_size != instance.num_devices:
        raise InputError(
            f"the process group has {stage.group_size} ranks but the schedule has {instance.num_devices} devices; "
            f"run {instance.num_devices} processes (torchrun's nproc-per-node {instance.num_devices})"
        )
