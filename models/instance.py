"""The instance: what is being scheduled (devices, stages, microbatches, op times, memory).

An `Instance` is always fully normalised: per-stage lists of the right length, an explicit
stage-to-device placement and an absolute memory limit. `Instance.from_dict` accepts the looser
file form (scalars for lists, the earlier tool's `num_stages`/`num_batches` keys, a relative
`"0.5x"` memory limit) and rejects anything malformed with one `InstanceError` line.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pipesat.models.errors import InstanceError
from pipesat.models.limits import check_work
from pipesat.models.tolerance import fits
from pipesat.models.units import MEMORY_UNITS, TIME_UNITS, check_unit, memory_in

PLACEMENTS = ("linear", "interleaved", "vshape", "bidirectional")
# The largest total of times (or of memory) an instance may add up to: far beyond any real pipeline,
# and far enough below the largest float (1.8e308) that no sum, product or ratio pipesat computes overflows.
MAX_TOTAL = 1e100

# Keys an instance file may hold. Aliases keep the earlier tool's config files loading unchanged.
ALIASES = {"num_stages": "num_devices", "num_batches": "num_microbatches"}
KNOWN_KEYS = (
    "num_devices",
    "num_microbatches",
    "chunks",
    "placement",
    "forward_times",
    "backward_times",
    "weight_times",
    "forward_comm_times",
    "backward_comm_times",
    "p2p_time",
    "activation_memory",
    "weight_memory",
    "memory_limit",
    "time_unit",
    "memory_unit",
    "name",
    "description",
    "output_file",
    "metadata",
    *ALIASES,
)


def placement_devices(placement: str, num_devices: int, chunks: int) -> tuple[int, ...]:
    """Stage-to-device list of a named placement: linear, interleaved, vshape or bidirectional (docs/design.md,
    placement). A bidirectional placement puts its stages where a V does: stage s < p on device s, the
    mirrored replica's stage s - p on device 2p - 1 - s."""
    p, v = num_devices, chunks
    if placement == "linear":
        if v != 1:
            raise InstanceError(
                f"placement 'linear' needs chunks 1, got {v}; use 'interleaved' or 'vshape' for chunks > 1"
            )
        return tuple(range(p))
    if placement == "interleaved":
        return tuple(s % p for s in range(p * v))
    if placement in ("vshape", "bidirectional"):
        if v != 2:
            raise InstanceError(f"placement {placement!r} needs chunks 2, got {v}; set chunks: 2")
        return tuple(s if s < p else 2 * p - 1 - s for s in range(2 * p))
    raise InstanceError(
        f"unknown placement {placement!r}; use one of {', '.join(PLACEMENTS)} or an explicit stage-to-device list"
    )


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

    def with_limit(self, limit: float | Sequence[float] | None) -> Instance:
        """A copy under `limit`: one number for every device, one per device, or None for none."""
        if limit is None:
            return dataclasses.replace(self, memory_limit=None)
        if isinstance(limit, (int, float)):
            return dataclasses.replace(self, memory_limit=(float(limit),) * self.num_devices)
        if len(limit) != self.num_devices:
            raise InstanceError(f"{len(limit)} memory limits for {self.num_devices} devices; give one per device")
        return dataclasses.replace(self, memory_limit=tuple(float(value) for value in limit))

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
        data = _canonical_keys(raw)

        p = _positive_int(data, "num_devices", required=True)
        m = _positive_int(data, "num_microbatches", required=True)
        placement_raw = data.get("placement")
        chunks_default = 1
        if isinstance(placement_raw, (list, tuple)) and len(placement_raw) % p == 0:
            chunks_default = len(placement_raw) // p
        v = _positive_int(data, "chunks", default=chunks_default)
        check_work(p, v, m, kinds=2 if data.get("weight_times") is None else 3)
        placement = _placement(placement_raw, p, v)
        num_stages = p * v
        bidirectional = isinstance(placement_raw, str) and placement_raw.strip().lower() == "bidirectional"
        if bidirectional:
            data = _mirrored(data, p, m)

        # A number given for every stage is one device's share of the model (its linear cut), so each
        # of a device's v stages gets a v-th of it: the same model at every placement. A bidirectional
        # device's two stages are each a whole share (one copy of it each way).
        share = 1 if bidirectional else v
        forward = _per_stage(data, "forward_times", num_stages, share, default=1.0, positive=True)
        if data.get("backward_times") is None:
            _check_total("the default backward_times (twice forward_times)", 2 * sum(forward))
        weight = None if data.get("weight_times") is None else _per_stage(data, "weight_times", num_stages, share)
        default_backward = None if data.get("backward_times") is not None else _default_backward(forward, weight)
        backward = _per_stage(data, "backward_times", num_stages, share, default=default_backward, positive=True)
        p2p = _number(data, "p2p_time", default=0.0)
        # Default memory unit: one microbatch of a device's activations.
        activation = _per_stage(data, "activation_memory", num_stages, share, default=1.0)
        weight_memory_default = [a / 2 for a in activation] if weight is not None else [0.0] * num_stages
        weight_memory = _per_stage(data, "weight_memory", num_stages, share, default=weight_memory_default)
        if weight is None and any(w > 0 for w in weight_memory):
            raise InstanceError("weight_memory needs weight_times (a split backward); add weight_times or drop it")
        for s, (a, w) in enumerate(zip(activation, weight_memory, strict=True)):
            if w > a:
                raise InstanceError(
                    f"weight_memory[{s}] = {w:g} exceeds activation_memory[{s}] = {a:g}; W frees part of what F allocated"
                )

        forward_comm = _communication(data, "forward_comm_times", "forward_times", forward, share)
        backward_comm = _communication(data, "backward_comm_times", "backward_times", backward, share)
        deps = 3 * num_stages * m  # at most one dependency per op, each waiting p2p at most once
        _check_total("the total op time", m * (sum(forward) + sum(backward) + sum(weight or ())) + deps * p2p)
        _check_total("the total activation memory", m * sum(activation))
        name = data.get("name") or ""
        if not isinstance(name, str):
            raise InstanceError(f"name must be a string, got {name!r}")
        metadata = data.get("metadata") or {}
        if not isinstance(metadata, dict):
            raise InstanceError("metadata must be a mapping")

        time_unit = check_unit(
            "time_unit", data.get("time_unit", _metadata_unit(metadata, "time_unit", TIME_UNITS)), TIME_UNITS
        )
        memory_unit = check_unit(
            "memory_unit", data.get("memory_unit", _metadata_unit(metadata, "memory_unit", MEMORY_UNITS)), MEMORY_UNITS
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
        )
        output_file = data.get("output_file")
        if output_file is not None and not isinstance(output_file, str):
            raise InstanceError(f"output_file must be a file name, got {output_file!r}")
        limit = parse_memory_limit(data.get("memory_limit"), instance)
        return dataclasses.replace(instance, memory_limit=limit, output_file=output_file)


PER_STAGE_KEYS = (
    "forward_times",
    "backward_times",
    "weight_times",
    "forward_comm_times",
    "backward_comm_times",
    "activation_memory",
    "weight_memory",
)


def _mirrored(data: dict[str, Any], p: int, m: int) -> dict[str, Any]:
    """A bidirectional instance's data with each per-stage list of the p model stages written for both
    copies (stage p + i a copy of stage i); a list of all 2p stages must already be one."""
    if m % 2:
        raise InstanceError(
            f"placement 'bidirectional' runs half the microbatches each way; num_microbatches {m} is odd, give an even number"
        )
    mirrored = dict(data)
    for key in PER_STAGE_KEYS:
        value = data.get(key)
        if not isinstance(value, (list, tuple)):
            continue
        if len(value) == p:
            mirrored[key] = [*value, *value]
        elif len(value) == 2 * p and list(value[:p]) != list(value[p:]):
            raise InstanceError(
                f"{key} differs between the two copies of a bidirectional placement (stage p + i copies stage i); "
                f"give the {p} stages of one copy"
            )
    return mirrored


def _communication(
    data: dict[str, Any], key: str, whole_key: str, whole: list[float], chunks: int
) -> tuple[float, ...] | None:
    """The communication part of each stage's op, None when not given; it is part of the op's time."""
    if data.get(key) is None:
        return None
    parts = _per_stage(data, key, len(whole), chunks)
    for s, (part, total) in enumerate(zip(parts, whole, strict=True)):
        if part > total:
            raise InstanceError(
                f"{key}[{s}] = {part:g} exceeds {whole_key}[{s}] = {total:g}; the communication is part of the op's "
                "time, so give it as at most that"
            )
    return tuple(parts)


def _metadata_unit(metadata: dict, key: str, known: dict[str, float]) -> str:
    """A unit the earlier tool kept in metadata (free-form there): used when it names a known unit,
    ignored when it is a description."""
    unit = metadata.get(key)
    return unit if isinstance(unit, str) and unit in known else ""


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
    limit = converted if converted is not None else _as_number("memory_limit", value)
    if limit <= 0:
        raise InstanceError(f"memory_limit must be positive, got {limit:g}")
    return limit


def _limit_for_file(limits: tuple[float, ...] | None) -> float | list[float] | None:
    """A limit as instance files write it: one number when every device has the same."""
    if limits is None:
        return None
    return limits[0] if len(set(limits)) == 1 else list(limits)


def _canonical_keys(raw: dict[str, Any]) -> dict[str, Any]:
    data: dict[str, Any] = {}
    given_as: dict[str, str] = {}
    for key, value in raw.items():
        if key not in KNOWN_KEYS:
            close = difflib.get_close_matches(str(key), KNOWN_KEYS, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else f"; known keys: {', '.join(KNOWN_KEYS)}"
            raise InstanceError(f"unknown key {key!r}{hint}")
        canonical = ALIASES.get(key, key)
        if canonical in data and data[canonical] != value:
            raise InstanceError(
                f"{key!r} and {given_as[canonical]!r} disagree ({value!r} vs {data[canonical]!r}); give one"
            )
        data[canonical] = value
        given_as[canonical] = key
    return data


def _as_number(key: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        if isinstance(value, str):
            try:
                value = float(value)
            except ValueError:
                raise InstanceError(f"{key} must be a number, got {value!r}") from None
        else:
            raise InstanceError(f"{key} must be a number, got {value!r}")
    try:
        number = float(value)
    except OverflowError:
        number = math.inf
    if not math.isfinite(number):
        raise InstanceError(f"{key} must be a finite number, got {_short(value)}")
    return number


def _default_backward(forward: list[float], weight: list[float] | None) -> list[float]:
    """Without backward_times the whole backward takes twice the forward; with weight_times, B is what
    the weight gradient leaves of it (B + W = 2F), so giving W alone splits the same backward."""
    if weight is None:
        return [2 * f for f in forward]
    for s, (f, w) in enumerate(zip(forward, weight, strict=True)):
        if w >= 2 * f:
            raise InstanceError(
                f"weight_times[{s}] = {w:g} leaves nothing of the whole backward (twice forward_times, {2 * f:g}) "
                "for B; give backward_times too"
            )
    return [2 * f - w for f, w in zip(forward, weight, strict=True)]


def _check_total(what: str, total: float) -> None:
    """Refuse numbers whose sums overflow: every makespan, span and peak is at most such a sum."""
    if not math.isfinite(total) or total > MAX_TOTAL:
        raise InstanceError(f"{what} overflows (more than {MAX_TOTAL:g}); give the times and memory in larger units")


def _short(value: Any) -> str:
    """A value for a message, cut short when its text is long (a 400-digit number)."""
    text = repr(value)
    return text if len(text) <= 40 else text[:20] + "..." + f" ({len(text)} characters)"


def _number(data: dict[str, Any], key: str, default: float) -> float:
    value = data.get(key)
    if value is None:
        return default
    number = _as_number(key, value)
    if number < 0:
        raise InstanceError(f"{key} must not be negative, got {number:g}")
    return number


def _positive_int(data: dict[str, Any], key: str, required: bool = False, default: int = 1) -> int:
    value = data.get(key)
    if value is None:
        if required:
            raise InstanceError(f"missing {key}: give the number of {key.removeprefix('num_')}")
        return default
    whole = isinstance(value, int) or (isinstance(value, float) and math.isfinite(value) and value == int(value))
    if isinstance(value, bool) or not whole:
        raise InstanceError(f"{key} must be a whole number, got {value!r}")
    if value < 1:
        raise InstanceError(f"{key} must be at least 1, got {int(value)}")
    return int(value)


def _placement(value: Any, p: int, v: int) -> tuple[int, ...]:
    if value is None:
        return placement_devices("linear" if v == 1 else "interleaved", p, v)
    if isinstance(value, str):
        return placement_devices(value.strip().lower(), p, v)
    if not isinstance(value, (list, tuple)):
        raise InstanceError(f"placement must be a name ({', '.join(PLACEMENTS)}) or a stage-to-device list")
    if len(value) != p * v:
        raise InstanceError(f"placement lists {len(value)} stages but num_devices x chunks = {p} x {v} = {p * v}")
    devices = []
    for s, d in enumerate(value):
        if isinstance(d, bool) or not isinstance(d, int) or not 0 <= d < p:
            raise InstanceError(f"placement[{s}] = {d!r} is not a device in 0..{p - 1}")
        devices.append(d)
    for d in range(p):
        if devices.count(d) != v:
            raise InstanceError(
                f"placement puts {devices.count(d)} stages on device {d}; every device needs chunks = {v}"
            )
    return tuple(devices)


def _per_stage(
    data: dict[str, Any],
    key: str,
    num_stages: int,
    chunks: int,
    default: float | list[float] | None = None,
    positive: bool = False,
) -> list[float]:
    """One value per stage: a list as given, or one number split evenly over each device's `chunks` stages."""
    value = data.get(key)
    if value is None:
        if default is None:
            raise InstanceError(f"missing {key}: give one number per stage or one number for all stages")
        value = default
    if isinstance(value, (list, tuple)):
        if len(value) == 0:
            raise InstanceError(f"{key} is an empty list; give {num_stages} numbers, one per stage")
        if len(value) != num_stages:
            per_device = num_stages // chunks
            recut = (
                f"; one number (a device's share, split over its {chunks} chunks) also works"
                if chunks > 1 and len(value) == per_device
                else ""
            )
            raise InstanceError(
                f"{key} has {len(value)} values but there are {num_stages} stages; give one per stage{recut}"
            )
        values = [_as_number(f"{key}[{i}]", x) for i, x in enumerate(value)]
    else:
        values = [_as_number(key, value) / chunks] * num_stages
    for i, x in enumerate(values):
        if x < 0 or (positive and x == 0):
            bound = "positive" if positive else "non-negative"
            where = f"{key}[{i}]" if isinstance(value, (list, tuple)) else key
            shown = x if isinstance(value, (list, tuple)) else x * chunks
            raise InstanceError(f"{where} = {shown:g} must be {bound}")
    return values
