"""Handwritten schedules: one module per family, one registry that the CLI and the solver read.

A heuristic turns an instance into per-device op orders; the one simulator times them. Each heuristic
says what it needs (`requirement`), and `run_heuristic` refuses an instance it cannot serve with that
reason, which `compare` shows as "n/a: needs ...".
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from models import Instance, OpKey, PipesatError, Schedule
from solver.evaluate.simulator import simulate

Orders = list[list[OpKey]]


class NotApplicable(PipesatError):
    """The heuristic cannot serve this instance; the message is the reason, starting with "needs"."""


@dataclass(frozen=True)
class Heuristic:
    """A named handwritten schedule.

    `requirement(instance)` returns None when the heuristic applies, else a reason such as
    "needs a split backward (weight_times)". `orders(instance)` builds the per-device op orders.
    """

    name: str
    title: str
    requirement: Callable[[Instance], str | None]
    orders: Callable[[Instance], Orders]


REGISTRY: dict[str, Heuristic] = {}


def register(heuristic: Heuristic) -> Heuristic:
    REGISTRY[heuristic.name] = heuristic
    return heuristic


def run_heuristic(name: str, instance: Instance) -> Schedule:
    """The named heuristic's schedule for `instance`, timed by the simulator (not yet validated)."""
    heuristic = get_heuristic(name)
    reason = heuristic.requirement(instance)
    if reason is not None:
        raise NotApplicable(f"{heuristic.title}: {reason}")
    orders = heuristic.orders(instance)
    return simulate(instance, orders, name=heuristic.name, source={"kind": "heuristic", "name": heuristic.name})


def get_heuristic(name: str) -> Heuristic:
    _load_families()
    key = name.strip().lower()
    if key not in REGISTRY:
        raise NotApplicable(f"unknown schedule {name!r}; choose one of {', '.join(REGISTRY)}")
    return REGISTRY[key]


def all_heuristics() -> list[Heuristic]:
    _load_families()
    return list(REGISTRY.values())


def _load_families() -> None:
    # Importing a family module registers its heuristics.
    from solver.heuristics import fill_drain, interleaved, one_f_one_b, v_schedules, zb_auto, zb_v, zero_bubble  # noqa: F401
