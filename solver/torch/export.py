"""Export a schedule as the `compute_only` CSV of PyTorch's `torch.distributed.pipelining`.

The CSV has one row per device (pipeline rank), each cell one action `{stage}{type}{microbatch}`:
`F` forward, `B` the whole backward, `I` the backward for inputs and `W` the backward for weights.
A pipesat schedule without W ops exports its B ops as `B`; one with W ops exports B as `I`. An
overlapped pair is one `(F;B)OVERLAP_F_B` cell: `B` when the pair holds the whole backward (its W
inside, or a schedule without W ops), `I` when its W runs on its own. Torch's runtime runs a pair's
actions one after the other unless a custom function is registered for `OVERLAP_F_B`.
PyTorch reads it with `_PipelineScheduleRuntime._load_csv(path, format="compute_only")` (a private
API, checked against torch 2.13.0), which infers the stage-to-rank placement from the rows.

A bidirectional schedule (DualPipe's two copies) is refused: torch's stages form one pipeline that
every microbatch runs through. Nothing is written for a schedule that the validator rejects or whose per-device order would
deadlock: the runtime would only hang or fail with "Malformed compute schedule" on every rank.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from pathlib import Path

from pipesat.models import InputError, Instance, Kind, OpKey, Pair, Schedule, ScheduleError, Step
from pipesat.solver.evaluate.simulator import simulate
from pipesat.solver.evaluate.validator import ensure_valid
from pipesat.solver.io.output_file import write_output

Rows = list[list[str]]


def torch_cell(step: Step, split_backward: bool) -> str:
    """The CSV cell of one step: `2F5`, `2B5` (whole backward), `2I5` (split B), `2W5`, or a pair
    `(2F5;5B1)OVERLAP_F_B`."""
    if isinstance(step, Pair):
        backward = torch_cell(step.backward, split_backward and not step.with_weight)
        return f"({torch_cell(step.forward, split_backward)};{backward})OVERLAP_F_B"
    return _action(step, split_backward)


def _action(key: OpKey, split_backward: bool) -> str:
    kind, stage, microbatch = key
    letter = "I" if kind == Kind.B and split_backward else kind
    return f"{stage}{letter}{microbatch}"


def orders_to_rows(instance: Instance, orders: Sequence[Sequence[Step]]) -> Rows:
    """CSV rows of per-device op orders, refused (ScheduleError) when they deadlock or are invalid.

    The orders are timed by the simulator, which raises on an incomplete or deadlocking order, and
    the timed schedule must pass the validator (placement, dependencies, the memory limit).
    """
    if instance.bidirectional:
        raise InputError(
            "torch's pipelining runs every microbatch through every stage, so a bidirectional (DualPipe) "
            "schedule has no form there; export the V-shape cut's DualPipeV (`placement` vshape) instead"
        )
    schedule = simulate(instance, orders, name="orders")
    ensure_valid(schedule)
    split = schedule.split_backward
    return [[torch_cell(step, split) for step in order] for order in orders]


def schedule_to_rows(schedule: Schedule) -> Rows:
    """CSV rows of a timed schedule: validated, then its per-device order (by start time) exported.

    A schedule that offloads activations is refused: torch's CSV has no action for a host-link copy,
    and its order without them does not fit the memory it was made for."""
    ensure_valid(schedule)
    if schedule.transfers:
        raise ScheduleError(
            f"torch's compute_only CSV cannot carry offloads: this schedule has {len(schedule.transfers)} host-link "
            "transfers; export it as a Chrome trace, or solve it without offload"
        )
    return orders_to_rows(schedule.instance, schedule.orders())


def rows_text(rows: Rows) -> str:
    """CSV rows (one per device) as text the way `csv.reader` reads them back."""
    text = io.StringIO(newline="")
    csv.writer(text).writerows(rows)
    return text.getvalue()


def write_rows(rows: Rows, path: str | Path) -> Path:
    """Write CSV rows (one per device) the way `csv.reader` reads them back."""
    return write_output(path, rows_text(rows))


def torch_csv_text(schedule: Schedule) -> str:
    """The schedule's `compute_only` CSV as text (a launch file names it); refuses an invalid or
    deadlocking schedule."""
    return rows_text(schedule_to_rows(schedule))


def export_torch_csv(schedule: Schedule, path: str | Path) -> Path:
    """Write the schedule's `compute_only` CSV; refuses an invalid or deadlocking schedule.

    Parameters
    ----------
    schedule
        A valid schedule (an overlapped pair is torch's OVERLAP_F_B).
    path
        The CSV file to write.

    Returns
    -------
    Path
        The file written.

    Raises
    ------
    ScheduleError
        An invalid schedule, or one whose order deadlocks in torch.
    """
    return write_output(path, torch_csv_text(schedule))
