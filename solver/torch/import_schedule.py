"""Import PyTorch pipeline schedules: torch's built-in schedules and any torch schedule CSV.

A torch schedule is per-rank lists of actions `{stage}{type}{microbatch}` (`F`, `I` backward for
inputs, `W` backward for weights, `B` whole backward, and `(a;b)OVERLAP_F_B` holding an F and a
backward of another microbatch that DualPipeV overlaps). pipesat turns them into per-device orders:
`I` becomes pipesat's `B`; in a schedule with any `I`/`W` a whole-backward `B` becomes a `B` directly
followed by its `W` (the same work, timed the same); an `OVERLAP_F_B` of an F and a backward becomes
an overlapped pair, timed by pipesat's overlap model (with the whole backward's W inside); any other
`OVERLAP_F_B` runs its actions one after the other, as torch's runtime does by default;
communication, unshard/reshard and reduce-grad actions are dropped. The
orders are then timed by the one simulator with the instance's durations and checked by the one
validator, so an imported schedule is compared on the same footing as pipesat's own.

The built-in schedules come from `torch.distributed.pipelining._schedule_visualizer.get_schedule_ops`,
a private API checked against torch 2.13.0 (`pip install -e '.[torch]'` installs that version).
Torch's own timing differs from pipesat's model in ways that do not change validity: on stage 0
torch's `I` does nothing and `W` runs the whole backward, and activations stay alive until `W`.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from pipesat.models import (
    InputError,
    Instance,
    InstanceError,
    Kind,
    OpKey,
    Pair,
    PipesatError,
    Schedule,
    ScheduleError,
    Step,
    step_keys,
)
from pipesat.models.document import read_input_text
from pipesat.models.ops import split_out_weight
from pipesat.models.placement import placement_devices
from pipesat.solver.evaluate.simulator import simulate
from pipesat.solver.evaluate.validator import ensure_valid
from pipesat.solver.heuristics import NotApplicable, UnknownSchedule

TORCH_VERSION = "2.13.0"
INSTALL_HINT = f"torch is not installed: pip install -e '.[torch]' (installs torch=={TORCH_VERSION})"

# Torch's built-in schedule names, and whether each puts several stages on a rank.
TORCH_SCHEDULES: dict[str, bool] = {
    "GPipe": False,
    "1F1B": False,
    "Interleaved1F1B": True,
    "LoopedBFS": True,
    "InterleavedZeroBubble": True,
    "ZBVZeroBubble": True,
    "DualPipeV": True,
}

# Torch bugs known to make a built-in schedule fail pipesat's checks; reported with the failure.
KNOWN_WRONG = {
    "1F1B": (
        f"torch {TORCH_VERSION}'s Schedule1F1B order is known to be wrong on the last rank (forwards for "
        "microbatches 1..m); pipesat's 1f1b is the right order"
    ),
}

_COMPUTE = re.compile(r"(\d+)([FIWB])(\d+)")
_NON_COMPUTE = re.compile(r"\d+(UNSHARD|RESHARD|REDUCE_GRAD|SEND_F|RECV_F|SEND_B|RECV_B)\d*")
_OVERLAP = re.compile(r"\((.*)\)OVERLAP_F_B")

TorchAction = tuple[str, int, int]
"""A torch compute action: (type F/I/W/B, stage, microbatch)."""


class TorchOverlap(NamedTuple):
    """An `OVERLAP_F_B` of a forward and a backward (`I` or `B`) of another microbatch."""

    forward: TorchAction
    backward: TorchAction


TorchStep = TorchAction | TorchOverlap


class TorchMissing(PipesatError):
    """torch (the optional extra) is not installed; the message says how to install it."""


def require_torch() -> None:
    """Raise `TorchMissing` with the install line when torch cannot be imported."""
    try:
        import torch  # noqa: F401
    except ImportError:
        raise TorchMissing(INSTALL_HINT) from None


@dataclass(frozen=True)
class TorchOrders:
    """A torch schedule as pipesat per-device op orders, with the placement its rows imply."""

    num_microbatches: int
    placement: tuple[int, ...]
    orders: list[list[Step]]

    @property
    def num_devices(self) -> int:
        return len(self.orders)


@dataclass(frozen=True)
class TorchImport:
    """One torch built-in schedule on an instance: its validated schedule, or why there is none.

    `known_issue` is set when the failure is a known torch bug (the reason then gives the details).
    """

    name: str
    schedule: Schedule | None
    reason: str | None
    known_issue: str | None = None


def parse_cell(text: str) -> list[TorchStep]:
    """The compute steps of one CSV cell (none for an empty or communication cell)."""
    text = text.strip()
    if not text or _NON_COMPUTE.fullmatch(text):
        return []
    overlap = _OVERLAP.fullmatch(text)
    if overlap:
        actions = [action for part in overlap.group(1).split(";") for action in _compute_actions(part)]
        kinds = "".join(kind for kind, _, _ in actions)
        if kinds in ("FB", "FI") and actions[0][2] != actions[1][2]:
            return [TorchOverlap(actions[0], actions[1])]
        return list(actions)
    return list(_compute_actions(text))


def _compute_actions(text: str) -> list[TorchAction]:
    """The one compute action of a plain cell, none for communication."""
    text = text.strip()
    if not text or _NON_COMPUTE.fullmatch(text):
        return []
    match = _COMPUTE.fullmatch(text)
    if not match:
        raise ScheduleError(f"cell {text!r} is not a torch action like 2F5, 2I5, 2W5, 2B5 or (0F3;3B1)OVERLAP_F_B")
    kind, stage, microbatch = match.group(2), int(match.group(1)), int(match.group(3))
    return [(kind, stage, microbatch)]


def rows_to_orders(rows: Sequence[Sequence[str]], num_microbatches: int | None = None) -> TorchOrders:
    """Per-rank rows of torch cells -> pipesat orders; the placement is read from where stages run.

    `num_microbatches` defaults to the largest microbatch seen plus one. Completeness and
    deadlock-freedom are the simulator's to check.
    """
    steps = [[step for cell in row for step in parse_cell(cell)] for row in rows]
    actions = [[action for step in row for action in _actions(step)] for row in steps]
    if not actions or not any(actions):
        raise ScheduleError("the torch schedule has no compute actions")
    device_of: dict[int, int] = {}
    for device, device_actions in enumerate(actions):
        for _, stage, _ in device_actions:
            if device_of.setdefault(stage, device) != device:
                raise ScheduleError(f"stage {stage} has actions on rank {device_of[stage]} and on rank {device}")
    num_stages = max(device_of) + 1
    absent = [s for s in range(num_stages) if s not in device_of]
    if absent:
        raise ScheduleError(
            f"stage(s) {', '.join(map(str, absent))} have no actions; stages must be 0..{num_stages - 1}"
        )
    split = any(kind in "IW" for device_actions in actions for kind, _, _ in device_actions)
    orders = [[key for step in device_steps for key in _to_steps(step, split)] for device_steps in steps]
    if num_microbatches is None:
        num_microbatches = 1 + max(mb for device_actions in actions for _, _, mb in device_actions)
    return TorchOrders(num_microbatches, tuple(device_of[s] for s in range(num_stages)), orders)


def _actions(step: TorchStep) -> tuple[TorchAction, ...]:
    return (step.forward, step.backward) if isinstance(step, TorchOverlap) else (step,)


def _to_steps(step: TorchStep, split: bool) -> list[Step]:
    if isinstance(step, TorchOverlap):
        (_, f_stage, f_mb), (b_kind, b_stage, b_mb) = step
        pair = Pair(OpKey(Kind.F, f_stage, f_mb), OpKey(Kind.B, b_stage, b_mb))
        return split_out_weight(pair) if split and b_kind == Kind.B else [pair]
    kind, stage, microbatch = step
    key = OpKey(Kind.B if kind == "I" else Kind(kind), stage, microbatch)
    return split_out_weight(key) if split and kind == Kind.B else [key]


def read_torch_csv(path: str | Path) -> TorchOrders:
    """Read a torch schedule CSV (compute_only, or compute_comms whose communication is dropped); a file
    that cannot be read or holds malformed cells is bad input (`InputError`)."""
    path = Path(path)
    text = read_input_text(path, "torch schedule CSV")
    try:
        rows = list(csv.reader(io.StringIO(text, newline="")))
    except csv.Error as error:
        raise InputError(f"{path}: cannot read ({error})") from None
    try:
        return rows_to_orders(rows)
    except ScheduleError as error:
        raise InputError(f"{path}: {error}") from None


def placement_options(placement: Sequence[int], num_devices: int) -> tuple[int, str]:
    """The chunks and the `placement` value (a name, else an explicit list) that give this placement."""
    chunks = len(placement) // num_devices
    for name in ("linear", "interleaved", "vshape"):
        try:
            if placement_devices(name, num_devices, chunks) == tuple(placement):
                return chunks, name
        except InstanceError:
            continue
    return chunks, ",".join(map(str, placement))


def schedule_from_orders(torch_orders: TorchOrders, instance: Instance, name: str, source: dict) -> Schedule:
    """Time torch orders on `instance` with the simulator and validate them.

    The instance must have the torch schedule's devices, microbatches and placement; otherwise an
    `InstanceError` names the options that match.
    """
    p, m = torch_orders.num_devices, torch_orders.num_microbatches
    if (instance.num_devices, instance.num_microbatches) != (p, m):
        raise InstanceError(
            f"{name} has {p} devices and {m} microbatches but the instance has {instance.num_devices} and "
            f"{instance.num_microbatches}; give `num_devices` {p} `num_microbatches` {m}"
        )
    if instance.placement != torch_orders.placement:
        chunks, placement = placement_options(torch_orders.placement, p)
        raise InstanceError(
            f"{name} places stages on devices {list(torch_orders.placement)} but the instance places them on "
            f"{list(instance.placement)}; give `chunks` {chunks} `placement` {placement}"
        )
    schedule = simulate(instance, torch_orders.orders, name=name, source=source)
    return ensure_valid(schedule)


def torch_builtin_orders(name: str, num_devices: int, num_microbatches: int, chunks: int) -> TorchOrders:
    """The per-device orders of torch's built-in schedule `name` (needs torch)."""
    require_torch()
    from torch.distributed.pipelining._schedule_visualizer import get_schedule_ops

    canonical = canonical_name(name)
    stages_per_rank = chunks if TORCH_SCHEDULES[canonical] else 1
    try:
        rows = get_schedule_ops(canonical, num_devices, num_microbatches, stages_per_rank)
    except (ValueError, AssertionError) as error:
        raise NotApplicable(f"torch {canonical}: {str(error).splitlines()[0]}") from None
    cells = [[str(action) for action in row if action is not None] for row in rows]
    return rows_to_orders(cells, num_microbatches)


def canonical_name(name: str) -> str:
    """Torch's spelling of a built-in schedule name given in any case."""
    for canonical in TORCH_SCHEDULES:
        if canonical.lower() == name.strip().lower():
            return canonical
    raise UnknownSchedule(f"unknown torch schedule {name!r}; choose one of {', '.join(TORCH_SCHEDULES)}")


def import_torch_schedule(name: str, instance: Instance) -> Schedule:
    """Torch's built-in schedule `name` on `instance`, timed by the simulator and validated.

    Raises `NotApplicable` when it does not fit the instance's shape (chunks, placement, backward
    split, or torch's own conditions) and `ScheduleError` with the reason when torch's order is
    incomplete, deadlocks or breaks the validator's rules (for 1F1B, naming the known torch bug).

    Parameters
    ----------
    name
        One of torch's built-in schedules (`TORCH_SCHEDULES`).
    instance
        The instance that times it.

    Returns
    -------
    Schedule
        Torch's order, timed by the simulator and validated.
    """
    canonical = canonical_name(name)
    multi = TORCH_SCHEDULES[canonical]
    if multi and instance.chunks < 2:
        raise NotApplicable(f"torch {canonical}: needs several stages per device (chunks >= 2)")
    if not multi and instance.chunks != 1:
        raise NotApplicable(f"torch {canonical}: needs one stage per device (chunks 1, linear placement)")
    torch_orders = torch_builtin_orders(canonical, instance.num_devices, instance.num_microbatches, instance.chunks)
    if instance.placement != torch_orders.placement:
        chunks, placement = placement_options(torch_orders.placement, instance.num_devices)
        raise NotApplicable(f"torch {canonical}: needs chunks {chunks} with {placement} placement")
    split = any(key.kind == Kind.W for order in torch_orders.orders for step in order for key in step_keys(step))
    if split and not instance.split_backward:
        raise NotApplicable(f"torch {canonical}: needs a split backward (weight_times)")
    import torch

    source = {"kind": "torch", "name": canonical, "torch_version": torch.__version__}
    try:
        return schedule_from_orders(torch_orders, instance, f"torch:{canonical}", source)
    except ScheduleError as error:
        known = KNOWN_WRONG.get(canonical)
        raise ScheduleError(f"torch {canonical}: {known + ': ' if known else ''}{error}") from None


def import_torch_csv(path: str | Path, instance: Instance) -> Schedule:
    """A torch schedule CSV timed on `instance` (which must match its devices, microbatches, placement).

    Parameters
    ----------
    path
        A torch `compute_only` CSV, one row per rank.
    instance
        The instance that times it.

    Returns
    -------
    Schedule
        The order, timed by the simulator and validated.

    Raises
    ------
    InputError
        A file that is not such a CSV.
    ScheduleError
        A cell that is not a torch action, or an order that does not match the instance, is
        incomplete or deadlocks.
    """
    torch_orders = read_torch_csv(path)
    source = {"kind": "torch-csv", "file": str(path)}
    return schedule_from_orders(torch_orders, instance, Path(path).stem, source)


def torch_rows(instance: Instance) -> list[TorchImport]:
    """Every torch built-in schedule on `instance`: validated schedules, or the reason for each other.

    A reason starting with "needs" means the schedule does not fit the instance (like a heuristic's
    "n/a"); any other reason is a failure.
    """
    require_torch()
    results = []
    for name in TORCH_SCHEDULES:
        try:
            results.append(TorchImport(f"torch:{name}", import_torch_schedule(name, instance), None))
        except (NotApplicable, ScheduleError) as error:
            reason = str(error).removeprefix(f"torch {name}: ")
            known = KNOWN_WRONG.get(name) if isinstance(error, ScheduleError) else None
            results.append(TorchImport(f"torch:{name}", None, reason, known))
    return results
