"""The instance: what is being scheduled (devices, stages, microbatches, op times, memory).

An `Instance` is always fully normalised: per-stage lists of the right length, an explicit
stage-to-device placement and an absolute memory limit. `Instance.from_dict` accepts the looser
file form (scalars for lists, the earlier tool's `num_stages`/`num_batches` keys, a relative
`"0.5x"` memory limit) and rejects anything malformed with one `InstanceError` line.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pipesat.models.errors import InstanceError
from pipesat.models.host_link import host_link_bandwidth, host_memory, offload_fraction
from pipesat.models.instance_fields import (
    PER_STAGE_KEYS,
    as_number,
    canonical_keys,
    check_total,
    communication_times,
    default_backward_times,
    metadata_unit,
    mirror_stages,
    non_negative_number,
    per_stage,
    positive_int,
)
from pipesat.models.limits import check_work
from pipesat.models.placement import PLACEMENTS, parse_placement, placement_devices
from pipesat.models.tolerance import fits
from pipesat.models.units import MEMORY_UNITS, TIME_UNITS, check_unit, memory_in


@dataclass(frozen=True)
class Instance:
    """A normalised pipeline scheduling instance.

    Stage `s` runs on device `placement[s]`. Without `weight_times` the backward is not split and
    `backward_times` is the whole backward. Memory follows docs/memory-model.md: F(s, j) allocates
    `activation_memory[s]` at its start, B frees `activation_memory[s] - weight_memory[s]` at its end
    and W frees `weight_memory[s]` at its end.

    `forward_comm_times` and `backward_comm_times` (None without them) are the communication parts
    of F and of B, the expert all-to-all of a MoE layer, included in `forward_times` and
    `backward_times`: they change nothing for an op alone and only shorten overlapped pairs
    (`models.ops.pair_duration`).

    `host_link_bandwidth` (None without one) is each device's link to host memory, per direction,
    over which a schedule may offload `offload_fraction` of a stage's activations after its F and
    reload them before its B (docs/offload.md, `models.host_link`). `host_memory` (None: as large as
    needed) is what a device's host may hold of them at once (from an offload's start to its reload's end).

    A `bidirectional` instance (DualPipe's placement) holds two copies of a p-stage model: stages
    0..p-1 on devices 0..p-1 and the mirrored replica's stages p..2p-1 on devices p-1..0 (stage p + i
    is a copy of stage i). The first half of the microbatches runs down the first copy, the second
    half down the replica (`route`); every other instance's microbatches pass every stage.
    """

    num_devices: int
    num_microbatches: int
    chunks: int
    placement: tuple[int, ...]
    forward_times: tuple[float, ...]
    backward_times: tuple[float, ...]
    weight_times: tuple[float, ...] | None
    p2p_time: float
    activation_memory: tuple[float, ...]
    weight_memory: tuple[float, ...]
    memory_limit: tuple[float, ...] | None = None
    forward_comm_times: tuple[float, ...] | None = None
    backward_comm_times: tuple[float, ...] | None = None
    time_unit: str = ""
    memory_unit: str = ""
    name: str = ""
    metadata: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)
    # The earlier tool's picture name; kept for the CLI, not part of the normalised instance.
    output_file: str | None = field(default=None, compare=False)
    bidirectional: bool = False
    host_link_bandwidth: float | None = None
    offload_fraction: float = 1.0
    host_memory: float | None = None

    def __repr__(self) -> str:
        """One short line (the per-stage lists and the metadata are the file's: `to_dict`)."""
        name = f" {self.name!r}" if self.name else ""
        limit = "" if self.memory_limit is None else f", limit {max(self.memory_limit):g}{self.memory_unit}"
        return (
            f"<Instance{name}: p={self.num_devices} v={self.chunks} m={self.num_microbatches} "
            f"{self.placement_name()}{limit}>"
        )

    @property
    def num_stages(self) -> int:
        return self.num_devices * self.chunks

    def route(self, microbatch: int) -> range:
        """The stages `microbatch` passes, in order: every stage, or one copy's of a bidirectional instance."""
        if not self.bidirectional:
            return range(self.num_stages)
        p = self.num_devices
        return range(0, p) if microbatch < self.num_microbatches // 2 else range(p, 2 * p)

    def microbatches_at(self, stage: int) -> range:
        """The microbatches that pass `stage`: all, or one half of a bidirectional instance's."""
        if not self.bidirectional:
            return range(self.num_microbatches)
        half = self.num_microbatches // 2
        return range(0, half) if stage < self.num_devices else range(half, self.num_microbatches)

    def route_at(self, stage: int) -> range:
        """The route through `stage` (each stage is on one)."""
        return self.route(self.microbatches_at(stage).start)

    @property
    def stage_microbatches(self) -> int:
        """How many microbatches pass each stage: all, or half of a bidirectional instance's."""
        return len(self.microbatches_at(0))

    def routes(self) -> list[range]:
        """The distinct routes: one, or a bidirectional instance's two (down each copy)."""
        return [self.route(0), self.route(self.num_microbatches - 1)] if self.bidirectional else [self.route(0)]

    def route_stages(self, device: int) -> list[list[int]]:
        """`device`'s stages on each route that passes it, in stage order (along the route): one list
        of them all, or a bidirectional device's stage of each copy."""
        stages = self.stages_of(device)
        return [on_route for route in self.routes() if (on_route := [s for s in stages if s in route])]

    def limit_of(self, device: int) -> float | None:
        """The memory limit of `device`, or None without one."""
        return None if self.memory_limit is None else self.memory_limit[device]

    def with_limit(self, limit: Any) -> Instance:
        """A copy under `limit`, written as an instance file writes `memory_limit`.

        Parameters
        ----------
        limit
            One limit for every device or a list of one per device (or comma-separated text); each
            a number in the instance's `memory_unit`, an amount with a unit (`"20GiB"`) or a factor
            of the 1F1B peak (`"0.5x"`); None for no limit.

        Returns
        -------
        Instance
            The same instance with its absolute per-device limits.

        Raises
        ------
        InstanceError
            A limit that is not one of those, not positive, or a list of the wrong length.
        """
        return dataclasses.replace(self, memory_limit=parse_memory_limit(limit, self))

    def over_limit(self, peaks: Sequence[float]) -> list[int]:
        """The devices whose peak memory (one per device) does not fit their limit (`models.tolerance.fits`)."""
        if self.memory_limit is None:
            return []
        return [
            d for d, (peak, limit) in enumerate(zip(peaks, self.memory_limit, strict=True)) if not fits(peak, limit)
        ]

    @property
    def split_backward(self) -> bool:
        """Whether the instance has separate W times (so B and W can be scheduled apart)."""
        return self.weight_times is not None

    @property
    def has_communication(self) -> bool:
        """Whether F or B ops carry a communication part that an overlapped pair can hide."""
        return any(any(times) for times in (self.forward_comm_times, self.backward_comm_times) if times is not None)

    def stages_of(self, device: int) -> list[int]:
        """The stages placed on `device`, in stage order."""
        return [s for s, d in enumerate(self.placement) if d == device]

    def placement_name(self) -> str:
        """`linear`, `interleaved`, `vshape` or `bidirectional` when the placement is one of those, else `custom`."""
        if self.bidirectional:
            return "bidirectional"
        for name in PLACEMENTS:  # a bidirectional list is a V's: vshape, which comes first
            try:
                if placement_devices(name, self.num_devices, self.chunks) == self.placement:
                    return name
            except InstanceError:
                continue
        return "custom"

    def one_f_one_b_peak(self) -> float:
        """The memory reference `1x` of relative limits: the peak of 1F1B on the same model cut linearly.

        The model's stages in order, v consecutive ones per device (device k holds stages kv..kv+v-1),
        run as 1F1B: device k holds `min(p - k, m)` microbatches of those stages' activations. It does
        not depend on the placement, so `0.5x` is the same budget for every placement of one model; with
        one stage per device it is 1F1B's own peak.
        """
        p, m = self.num_devices, self.num_microbatches
        shares = self.device_shares(self.activation_memory)
        return max(min(p - k, m) * shares[k] for k in range(p))

    def device_shares(self, values: tuple[float, ...]) -> list[float]:
        """Each device's share of a per-stage quantity of the model in its linear cut: device k's sum
        of stages kv..kv+v-1, or stage k of a bidirectional instance (its replica is a copy)."""
        p, v = self.num_devices, self.chunks
        if self.bidirectional:
            return list(values[:p])
        return [sum(values[k * v : (k + 1) * v]) for k in range(p)]

    def at_placement(self, placement: str, chunks: int | None = None) -> Instance:
        """The same model cut for another named placement: `chunks` stages per device (default: 1 for
        linear, else this cut's chunks, or 2 from a linear cut).

        The model is the stages in order. With the same chunks only the placement changes; otherwise
        each device's share of the linear cut (`device_shares`, exactly) is split evenly over the new
        chunks, as one number in a file is (docs/design.md, one model, any placement); a bidirectional
        cut holds the shares twice, one copy each way. The memory limit stays: it is in absolute units,
        and `1x` does not depend on the cut.
        """
        v, p = self.chunks, self.num_devices
        bidirectional = placement == "bidirectional"
        new_chunks = chunks if chunks is not None else 1 if placement == "linear" else (v if v > 1 else 2)

        def recut(values: tuple[float, ...] | None) -> list[float] | None:
            if values is None or (new_chunks == v and bidirectional == self.bidirectional):
                return None if values is None else list(values)
            shares = self.device_shares(values)
            if bidirectional:
                return shares + shares
            return [shares[s // new_chunks] / new_chunks for s in range(p * new_chunks)]

        data = self.to_dict() | {key: recut(getattr(self, key)) for key in PER_STAGE_KEYS}
        data |= {"chunks": new_chunks, "placement": placement}
        return Instance.from_dict({key: value for key, value in data.items() if value is not None})

    def with_changes(self, **changes: Any) -> Instance:
        """A copy with some normalised fields replaced, validated again."""
        data = self.to_dict()
        data.update(changes)
        return Instance.from_dict(data)

    def to_dict(self) -> dict[str, Any]:
        """The fully normalised form written inside schedule files."""
        data: dict[str, Any] = {
            "name": self.name,
            "num_devices": self.num_devices,
            "num_microbatches": self.num_microbatches,
            "chunks": self.chunks,
            "placement": "bidirectional" if self.bidirectional else list(self.placement),
            "forward_times": list(self.forward_times),
            "backward_times": list(self.backward_times),
            "weight_times": None if self.weight_times is None else list(self.weight_times),
            "activation_memory": list(self.activation_memory),
            "weight_memory": list(self.weight_memory),
            "p2p_time": self.p2p_time,
            "memory_limit": _limit_for_file(self.memory_limit),
        }
        for key in ("forward_comm_times", "backward_comm_times"):
            times = getattr(self, key)
            if times is not None:
                data[key] = list(times)
        if self.host_link_bandwidth is not None:
            data["host_link_bandwidth"] = self.host_link_bandwidth
            data["offload_fraction"] = self.offload_fraction
        if self.host_memory is not None:
            data["host_memory"] = self.host_memory
        if self.time_unit:
            data["time_unit"] = self.time_unit
        if self.memory_unit:
            data["memory_unit"] = self.memory_unit
        if self.metadata:
            data["metadata"] = self.metadata
        return data

    @classmethod
    def from_dict(cls, raw: Any) -> Instance:
        """Validate and normalise an instance given as a mapping (a parsed file or CLI options)."""
        if not isinstance(raw, dict):
            raise InstanceError(f"an instance must be a mapping of keys to values, got {type(raw).__name__}")
        data = canonical_keys(raw)

        p = positive_int(data, "num_devices", required=True)
        m = positive_int(data, "num_microbatches", required=True)
        placement_raw = data.get("placement")
        chunks_default = 1
        if isinstance(placement_raw, (list, tuple)) and len(placement_raw) % p == 0:
            chunks_default = len(placement_raw) // p
        v = positive_int(data, "chunks", default=chunks_default)
        check_work(p, v, m, kinds=2 if data.get("weight_times") is None else 3)
        placement = parse_placement(placement_raw, p, v)
        num_stages = p * v
        bidirectional = isinstance(placement_raw, str) and placement_raw.strip().lower() == "bidirectional"
        if bidirectional:
            data = mirror_stages(data, p, m)

        # A number given for every stage is one device's share of the model (its linear cut), so each
        # of a device's v stages gets a v-th of it: the same model at every placement. A bidirectional
        # device's two stages are each a whole share (one copy of it each way).
        share = 1 if bidirectional else v
        forward = per_stage(data, "forward_times", num_stages, share, default=1.0, positive=True)
        if data.get("backward_times") is None:
            check_total("the default backward_times (twice forward_times)", 2 * sum(forward))
        weight = None if data.get("weight_times") is None else per_stage(data, "weight_times", num_stages, share)
        default_backward = None if data.get("backward_times") is not None else default_backward_times(forward, weight)
        backward = per_stage(data, "backward_times", num_stages, share, default=default_backward, positive=True)
        p2p = non_negative_number(data, "p2p_time", default=0.0)
        # Default memory unit: one microbatch of a device's activations.
        activation = per_stage(data, "activation_memory", num_stages, share, default=1.0)
        weight_memory_default = [a / 2 for a in activation] if weight is not None else [0.0] * num_stages
        weight_memory = per_stage(data, "weight_memory", num_stages, share, default=weight_memory_default)
        if weight is None and any(w > 0 for w in weight_memory):
            raise InstanceError("weight_memory needs weight_times (a split backward); add weight_times or drop it")
        for s, (a, w) in enumerate(zip(activation, weight_memory, strict=True)):
            if w > a:
                raise InstanceError(
                    f"weight_memory[{s}] = {w:g} exceeds activation_memory[{s}] = {a:g}; W frees part of what F allocated"
                )

        forward_comm = communication_times(data, "forward_comm_times", "forward_times", forward, share)
        backward_comm = communication_times(data, "backward_comm_times", "backward_times", backward, share)
        deps = 3 * num_stages * m  # at most one dependency per op, each waiting p2p at most once
        check_total("the total op time", m * (sum(forward) + sum(backward) + sum(weight or ())) + deps * p2p)
        check_total("the total activation memory", m * sum(activation))
        name = data.get("name") or ""
        if not isinstance(name, str):
            raise InstanceError(f"name must be a string, got {name!r}")
        metadata = data.get("metadata") or {}
        if not isinstance(metadata, dict):
            raise InstanceError("metadata must be a mapping")

        time_unit = check_unit(
            "time_unit", data.get("time_unit", metadata_unit(metadata, "time_unit", TIME_UNITS)), TIME_UNITS
        )
        memory_unit = check_unit(
            "memory_unit", data.get("memory_unit", metadata_unit(metadata, "memory_unit", MEMORY_UNITS)), MEMORY_UNITS
        )
        instance = cls(
            num_devices=p,
            num_microbatches=m,
            chunks=v,
            placement=placement,
            forward_times=tuple(forward),
            backward_times=tuple(backward),
            weight_times=None if weight is None else tuple(weight),
            p2p_time=p2p,
            activation_memory=tuple(activation),
            weight_memory=tuple(weight_memory),
            forward_comm_times=forward_comm,
            backward_comm_times=backward_comm,
            time_unit=time_unit,
            memory_unit=memory_unit,
            name=name,
            metadata=metadata,
            bidirectional=bidirectional,
            host_link_bandwidth=host_link_bandwidth(data, time_unit, memory_unit),
            offload_fraction=offload_fraction(data),
            host_memory=host_memory(data, memory_unit, [offload_fraction(data) * a for a in activation]),
        )
        output_file = data.get("output_file")
        if output_file is not None and not isinstance(output_file, str):
            raise InstanceError(f"output_file must be a file name, got {output_file!r}")
        limit = parse_memory_limit(data.get("memory_limit"), instance)
        return dataclasses.replace(instance, memory_limit=limit, output_file=output_file)


def parse_memory_limit(value: Any, instance: Instance) -> tuple[float, ...] | None:
    """Per-device absolute limits from one limit for every device or a list (or comma-separated text)
    of one per device; each a number in the instance's memory unit, an amount with a unit (`"12GiB"`,
    in the instance's `memory_unit`) or relative to the 1F1B peak (`"0.5x"`); None for none."""
    if value is None or (isinstance(value, str) and value.strip().lower() in ("", "none", "null")):
        return None
    if isinstance(value, str) and "," in value:
        value = [part.strip() for part in value.split(",")]
    if isinstance(value, (list, tuple)):
        if len(value) != instance.num_devices:
            raise InstanceError(
                f"memory_limit lists {len(value)} limits but there are {instance.num_devices} devices; "
                "give one per device, or one for all"
            )
        return tuple(parse_limit_value(item, instance) for item in value)
    return (parse_limit_value(value, instance),) * instance.num_devices


def parse_limit_value(value: Any, instance: Instance) -> float:
    """One limit: a number, an amount with a unit or a factor of the 1F1B peak (see `parse_memory_limit`)."""
    if isinstance(value, str) and value.strip().lower().endswith("x"):
        text = value.strip()[:-1]
        try:
            factor = float(text)
        except ValueError:
            raise InstanceError(
                f"memory_limit {value!r} is not a number, an amount like 12GiB or a relative limit like "
                "'0.5x' (of the 1F1B peak)"
            ) from None
        if not math.isfinite(factor) or factor <= 0:
            raise InstanceError(f"memory_limit {value!r} must be a positive factor such as '0.5x'")
        reference = instance.one_f_one_b_peak()
        if reference <= 0:
            raise InstanceError(
                f"memory_limit {value!r} is relative to the 1F1B peak, which is 0 here (no activation memory); "
                "give an absolute limit"
            )
        return factor * reference
    converted = memory_in(value, instance.memory_unit, "memory_limit") if isinstance(value, str) else None
    limit = converted if converted is not None else as_number("memory_limit", value)
    if limit <= 0:
        raise InstanceError(f"memory_limit must be positive, got {limit:g}")
    return limit


def _limit_for_file(limits: tuple[float, ...] | None) -> float | list[float] | None:
    """A limit as instance files write it: one number when every device has the same."""
    if limits is None:
        return None
    return limits[0] if len(set(limits)) == 1 else list(limits)
