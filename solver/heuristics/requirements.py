"""Reusable requirement checks: each returns None when met, else a reason starting with "needs"."""

from __future__ import annotations

from models import Instance


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
