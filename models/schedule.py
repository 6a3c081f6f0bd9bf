"""The schedule: a timed solution of an instance, and its JSON file form (`pipesat-schedule/1`)."""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, NamedTuple

from pipesat.models.errors import InstanceError, ScheduleError
from pipesat.models.instance import Instance
from pipesat.models.ops import KINDS, TRANSFER_KINDS, Kind, OpKey, Pair, Step, op_label, pair_error

FORMAT = "pipesat-schedule/1"


class Op(NamedTuple):
    """One unit of work on a device, with its start and end time."""

    kind: Kind
    stage: int
    microbatch: int
    device: int
    start: float
    end: float

    @property
    def key(self) -> OpKey:
        return OpKey(self.kind, self.stage, self.microbatch)

    def label(self) -> str:
        """`F(stage 2, mb 5)`: how messages name an op."""
        return op_label(self.key)


@dataclass(frozen=True)
class Schedule:
    """Timed ops of an instance. `name` says which schedule it is; `source` how it was made.

    `ops` are the compute ops (F, B, W) that devices run one at a time; `transfers` the offloads and
    reloads (kinds O and R) that run on the devices' host links beside them (docs/offload.md), none
    in a schedule that offloads nothing."""

    instance: Instance
    ops: tuple[Op, ...]
    name: str = ""
    source: dict[str, Any] = field(default_factory=dict, compare=False)
    transfers: tuple[Op, ...] = ()

    def __repr__(self) -> str:
        """One short line (the ops are the file's: `to_dict`), so that a result holding a schedule prints short."""
        return f"<Schedule {self.name!r}: {len(self.ops)} ops of {self.instance!r}>"

    @cached_property
    def split_backward(self) -> bool:
        """Whether B and W are separate ops; without W ops every B is the whole backward."""
        return any(op.kind == Kind.W for op in self.ops)

    def orders(self) -> list[list[Step]]:
        """Per-device steps in execution order (by start, then end): ops, and overlapped pairs.

        The ops of a pair share one interval: an F and a B (with the B's W when it is inside) that
        start and end together on a device, for a positive time, are read back as a `Pair`.
        """
        per_device: list[list[Op]] = [[] for _ in range(self.instance.num_devices)]
        for op in self.ops:
            per_device[op.device].append(op)
        return [_steps(sorted(ops, key=lambda o: (o.start, o.end, KINDS.index(o.kind)))) for ops in per_device]

    @cached_property
    def pairs(self) -> tuple[Pair, ...]:
        """The overlapped pairs, device by device in time order."""
        return tuple(step for steps in self.orders() for step in steps if isinstance(step, Pair))

    @property
    def has_pairs(self) -> bool:
        """Whether any ops run as overlapped pairs."""
        return bool(self.pairs)

    def with_source(self, name: str | None = None, **source: Any) -> Schedule:
        renamed = self.name if name is None else name
        return Schedule(self.instance, self.ops, renamed, {**self.source, **source}, self.transfers)

    def to_dict(self, metrics: dict[str, Any] | None = None) -> dict[str, Any]:
        data = {
            "format": FORMAT,
            "name": self.name,
            "instance": self.instance.to_dict(),
            "ops": [op._asdict() for op in self.ops],
            "metrics": metrics or {},
            "source": self.source,
        }
        if self.transfers:
            data["transfers"] = [op._asdict() for op in self.transfers]
        return data

    @classmethod
    def from_dict(cls, data: Any) -> Schedule:
        """Parse a schedule file's mapping; the ops are checked for form here, for validity by the validator."""
        if not isinstance(data, dict):
            raise ScheduleError("a schedule file must hold a JSON object")
        if data.get("format") != FORMAT:
            raise ScheduleError(f"not a pipesat schedule: 'format' is {data.get('format')!r}, expected {FORMAT!r}")
        try:
            instance = Instance.from_dict(data.get("instance"))
        except InstanceError as error:
            raise ScheduleError(f"the schedule's instance is invalid: {error}") from None
        raw_ops = data.get("ops")
        if not isinstance(raw_ops, list):
            raise ScheduleError("'ops' must be a list of ops")
        name = data.get("name") or ""
        if not isinstance(name, str):
            raise ScheduleError(f"'name' must be a string, got {name!r}")
        source = data.get("source") or {}
        if not isinstance(source, dict):
            raise ScheduleError(f"'source' must be an object saying what made the schedule, got {source!r}")
        raw_transfers = data.get("transfers") or []
        if not isinstance(raw_transfers, list):
            raise ScheduleError("'transfers' must be a list of offloads and reloads")
        ops = tuple(_parse_op(i, raw) for i, raw in enumerate(raw_ops))
        transfers = tuple(_parse_op(i, raw, "transfers", TRANSFER_KINDS) for i, raw in enumerate(raw_transfers))
        return cls(instance, ops, name, dict(source), transfers)


def _steps(ops: list[Op]) -> list[Step]:
    """Ops of one device in time order -> steps: ops sharing one positive interval that are an F and
    a B (and that B's W) become a pair; anything else stays as single ops."""
    steps: list[Step] = []
    for (start, end), together in itertools.groupby(ops, key=lambda op: (op.start, op.end)):
        group = list(together)
        pair = _as_pair(group) if end > start else None
        steps.extend([pair] if pair is not None else [op.key for op in group])
    return steps


def _as_pair(group: list[Op]) -> Pair | None:
    """The pair these ops (sorted F, B, W) form, or None when they are not one."""
    if len(group) not in (2, 3):
        return None
    pair = Pair(group[0].key, group[1].key, with_weight=len(group) == 3)
    return pair if pair.op_keys() == tuple(op.key for op in group) and pair_error(pair) is None else None


def _parse_op(index: int, raw: Any, where: str = "ops", kinds: tuple[Kind, ...] = KINDS) -> Op:
    if not isinstance(raw, dict):
        raise ScheduleError(f"{where}[{index}] must be an object with kind, stage, microbatch, device, start, end")
    missing = [key for key in Op._fields if key not in raw]
    if missing:
        raise ScheduleError(f"{where}[{index}] lacks {', '.join(missing)}")
    kind = raw["kind"]
    if kind not in kinds:
        raise ScheduleError(f"{where}[{index}]: kind {kind!r} is not one of {', '.join(kinds)}")
    ints = []
    for key in ("stage", "microbatch", "device"):
        value = raw[key]
        if isinstance(value, bool) or not isinstance(value, int):
            raise ScheduleError(f"{where}[{index}]: {key} must be a whole number, got {value!r}")
        ints.append(value)
    times = []
    for key in ("start", "end"):
        value = raw[key]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise ScheduleError(f"{where}[{index}]: {key} must be a finite number, got {value!r}")
        times.append(float(value))
    return Op(Kind(kind), ints[0], ints[1], ints[2], times[0], times[1])
