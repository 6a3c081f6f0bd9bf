"""Reusable requirement checks: each returns None when met, else a reason starting with "needs"."""

from __future__ import annotations

from pipesat.models import Instance
from pipesat.models.placement import placement_devices


def needs_nothing(instance: Instance) -> str | None:
    """Any instance will do (GPipe)."""
    return None


def needs_linear(instance: Instance) -> str | None:
    if instance.chunks != 1:
        return "needs one stage per device (chunks 1, linear placement)"
    return None


def needs_split_backward(instance: Instance) -> str | None:
    if not instance.split_backward:
        return "needs a split backward (weight_times)"
    return None


def first_unmet(instance: Instance, *checks) -> str | None:
    """The first unmet requirement among `checks`, or None."""
    for check in checks:
        reason = check(instance)
        if reason is not None:
            return reason
    return None


def needs_interleaved(instance: Instance) -> str | None:
    interleaved = instance.placement == placement_devices("interleaved", instance.num_devices, instance.chunks)
    if instance.chunks < 2 or not interleaved:
        return "needs chunks >= 2 with interleaved placement"
    return None


def needs_microbatches_divisible_by_devices(instance: Instance) -> str | None:
    if instance.num_microbatches % instance.num_devices != 0:
        return f"needs the number of microbatches divisible by the number of devices ({instance.num_devices})"
    return None


def needs_bidirectional(instance: Instance) -> str | None:
    if not instance.bidirectional:
        return "needs chunks 2 with bidirectional placement"
    return None


def needs_vshape(instance: Instance) -> str | None:
    # Compared with the list itself: with one device the V and interleaved placements coincide.
    vshape = instance.chunks == 2 and instance.placement == placement_devices("vshape", instance.num_devices, 2)
    if not vshape:
        return "needs chunks 2 with vshape placement"
    return None
