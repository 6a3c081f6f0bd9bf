"""Placements: the device each stage runs on, from a placement's name or an explicit stage-to-device list."""

from __future__ import annotations

from typing import Any, Literal, get_args

from pipesat.models.errors import InstanceError

Placement = Literal["linear", "interleaved", "vshape", "bidirectional"]
"""A named placement (docs/design.md, placement); `placement_devices` gives its stage-to-device list."""
PLACEMENTS: tuple[Placement, ...] = get_args(Placement)
"""Every named placement, in that order (a V's before a bidirectional one's: `Instance.placement_name`)."""


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


def parse_placement(value: Any, p: int, v: int) -> tuple[int, ...]:
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
