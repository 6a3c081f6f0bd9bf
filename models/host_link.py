"""The host link of an instance, read from the looser file form: its bandwidth in each direction, the
part of a stage's activations an offload moves, and the host memory behind it (docs/offload.md).

`host_link_bandwidth` is in the instance's memory unit per time unit (a number), or written with
units as `"25GB/s"` when the instance names both its units. `offload_fraction` is the part of a
stage's activation memory (M_B) that an offload copies to the host, in [0, 1] (Megatron-LM's activation
offload fraction); 1 without it. `host_memory` is what a device's host may hold of its offloaded
activations, in the instance's memory unit (a number) or with units (`"512GiB"`); it must hold at
least one (stage, microbatch)'s offload (docs/offload.md: what a schedule's host holds at once stays
within it). Each refuses what is malformed with one
`InstanceError` line.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from pipesat.models.errors import InstanceError, OptionError
from pipesat.models.instance_fields import as_number
from pipesat.models.objective import Minimize, Objective
from pipesat.models.units import TIME_UNITS, memory_in

_PER_SECOND = "/s"


def host_link_bandwidth(data: dict[str, Any], time_unit: str, memory_unit: str) -> float | None:
    """The link's bandwidth per direction (memory units per time unit), or None without a link."""
    value = data.get("host_link_bandwidth")
    if value is None:
        return None
    if isinstance(value, str) and value.strip().endswith(_PER_SECOND):
        amount = memory_in(value.strip()[: -len(_PER_SECOND)], memory_unit, "host_link_bandwidth")
        if amount is None:
            raise InstanceError(f"host_link_bandwidth {value!r} is not an amount per second such as '25GB/s'")
        if not time_unit:
            raise InstanceError(
                f"host_link_bandwidth {value!r} is per second but the instance's times have no unit; "
                "give time_unit in the instance (ms, s, ...) or a plain number"
            )
        bandwidth = amount * TIME_UNITS[time_unit]
    else:
        bandwidth = as_number("host_link_bandwidth", value)
    if not (math.isfinite(bandwidth) and bandwidth > 0):
        raise InstanceError(
            f"host_link_bandwidth must be positive (memory units per time unit, or like '25GB/s'), got {value!r}"
        )
    return bandwidth


def offload_fraction(data: dict[str, Any]) -> float:
    """The part of a stage's activation memory an offload moves: 1 without the key."""
    value = data.get("offload_fraction")
    if value is None:
        return 1.0
    fraction = as_number("offload_fraction", value)
    if not 0 <= fraction <= 1:
        raise InstanceError(f"offload_fraction must be in [0, 1] (the part of M_B offloaded), got {fraction:g}")
    return fraction


def check_offload(bandwidth: float | None, objective: Objective | str, minimize: Minimize | str) -> None:
    """A solve may offload only over a host link (its `bandwidth`, None without one), and decides
    offloads for the least makespan only (the max span's re-timing and the memory minimisation do
    not move transfers)."""
    if bandwidth is None:
        raise OptionError("offload needs a host link: give the instance a `host_link_bandwidth`")
    if objective != Objective.MAKESPAN or minimize != Minimize.TIME:
        raise OptionError("offload is decided for the least makespan only; drop the objective span or memory")


def host_memory(data: dict[str, Any], memory_unit: str, offloads: Sequence[float]) -> float | None:
    """What a device's host may hold of its offloaded activations (memory units), or None without the
    key (as large as needed). `offloads` are what one offload of each stage moves: a host that cannot
    hold the largest of them is refused."""
    value = data.get("host_memory")
    if value is None:
        return None
    amount = memory_in(value.strip(), memory_unit, "host_memory") if isinstance(value, str) else None
    memory = as_number("host_memory", value) if amount is None else amount
    if not (math.isfinite(memory) and memory > 0):
        raise InstanceError(f"host_memory must be positive (memory units, or like '512GiB'), got {value!r}")
    largest = max(offloads, default=0.0)
    if memory < largest:
        stage = list(offloads).index(largest)
        raise InstanceError(
            f"host_memory {value!r} is less than one microbatch's offloaded activations of stage {stage} "
            f"({largest:g}{memory_unit and ' ' + memory_unit}); give at least that, or leave host_memory out"
        )
    return memory
