"""An instance's fields read from the looser file form: its keys (and the earlier tool's aliases), whole
numbers, numbers, per-stage lists (a scalar for all), a bidirectional instance's two copies, the
communication parts, the default backward and the overflow guard. Each refuses what is malformed with
one `InstanceError` line; `Instance.from_dict` puts them together."""

from __future__ import annotations

import math
from typing import Any

from pipesat.models.errors import InstanceError, did_you_mean

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
    "host_link_bandwidth",
    "offload_fraction",
    "host_memory",
    "time_unit",
    "memory_unit",
    "name",
    "description",
    "output_file",
    "metadata",
    *ALIASES,
)
PER_STAGE_KEYS = (
    "forward_times",
    "backward_times",
    "weight_times",
    "forward_comm_times",
    "backward_comm_times",
    "activation_memory",
    "weight_memory",
)


def canonical_keys(raw: dict[str, Any]) -> dict[str, Any]:
    data: dict[str, Any] = {}
    given_as: dict[str, str] = {}
    for key, value in raw.items():
        if key not in KNOWN_KEYS:
            hint = did_you_mean(key, KNOWN_KEYS) or f"; known keys: {', '.join(KNOWN_KEYS)}"
            raise InstanceError(f"unknown key {key!r}{hint}")
        canonical = ALIASES.get(key, key)
        if canonical in data and data[canonical] != value:
            raise InstanceError(
                f"{key!r} and {given_as[canonical]!r} disagree ({value!r} vs {data[canonical]!r}); give one"
            )
        data[canonical] = value
        given_as[canonical] = key
    return data


def positive_int(data: dict[str, Any], key: str, required: bool = False, default: int = 1) -> int:
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


def non_negative_number(data: dict[str, Any], key: str, default: float) -> float:
    value = data.get(key)
    if value is None:
        return default
    number = as_number(key, value)
    if number < 0:
        raise InstanceError(f"{key} must not be negative, got {number:g}")
    return number


def as_number(key: str, value: Any) -> float:
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


def _short(value: Any) -> str:
    """A value for a message, cut short when its text is long (a 400-digit number)."""
    text = repr(value)
    return text if len(text) <= 40 else text[:20] + "..." + f" ({len(text)} characters)"


def per_stage(
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
        values = [as_number(f"{key}[{i}]", x) for i, x in enumerate(value)]
    else:
        values = [as_number(key, value) / chunks] * num_stages
    for i, x in enumerate(values):
        if x < 0 or (positive and x == 0):
            bound = "positive" if positive else "non-negative"
            where = f"{key}[{i}]" if isinstance(value, (list, tuple)) else key
            shown = x if isinstance(value, (list, tuple)) else x * chunks
            raise InstanceError(f"{where} = {shown:g} must be {bound}")
    return values


def default_backward_times(forward: list[float], weight: list[float] | None) -> list[float]:
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


def communication_times(
    data: dict[str, Any], key: str, whole_key: str, whole: list[float], chunks: int
) -> tuple[float, ...] | None:
    """The communication part of each stage's op, None when not given; it is part of the op's time."""
    if data.get(key) is None:
        return None
    parts = per_stage(data, key, len(whole), chunks)
    for s, (part, total) in enumerate(zip(parts, whole, strict=True)):
        if part > total:
            raise InstanceError(
                f"{key}[{s}] = {part:g} exceeds {whole_key}[{s}] = {total:g}; the communication is part of the op's "
                "time, so give it as at most that"
            )
    return tuple(parts)


def mirror_stages(data: dict[str, Any], p: int, m: int) -> dict[str, Any]:
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


def metadata_unit(metadata: dict, key: str, known: dict[str, float]) -> str:
    """A unit the earlier tool kept in metadata (free-form there): used when it names a known unit,
    ignored when it is a description."""
    unit = metadata.get(key)
    return unit if isinstance(unit, str) and unit in known else ""


def check_total(what: str, total: float) -> None:
    """Refuse numbers whose sums overflow: every makespan, span and peak is at most such a sum."""
    if not math.isfinite(total) or total > MAX_TOTAL:
        raise InstanceError(f"{what} overflows (more than {MAX_TOTAL:g}); give the times and memory in larger units")
