"""Handwritten schedules and pipesat's starting schedules, in one ordered table that everything reads.

A heuristic turns an instance into per-device op orders; the one simulator times them. Each heuristic
says what it needs (`requirement`), and `run_heuristic` refuses an instance it cannot serve with that
reason, which `compare` shows as "n/a: needs ...". Titles come from `models.names`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from pipesat.models import Instance, PipesatError, Schedule
from pipesat.solver.evaluate.simulator import simulate
from pipesat.solver.heuristics import memory_gated, one_at_a_time, periodic
from pipesat.solver.heuristics.block_optimal import block_optimal_orders, block_optimal_requirement
from pipesat.solver.heuristics.dual_pipe import (
    dual_pipe_orders,
    dual_pipe_requirement,
    dual_pipe_v_orders,
    dual_pipe_v_requirement,
)
from pipesat.solver.heuristics.fill_drain import gpipe_orders
from pipesat.solver.heuristics.heuristic import Heuristic, NotApplicable, Orders, StartingSchedule, UnknownSchedule
from pipesat.solver.heuristics.interleaved import (
    interleaved_orders,
    interleaved_overlap_orders,
    interleaved_requirement,
)
from pipesat.solver.heuristics.one_f_one_b import one_f_one_b_orders
from pipesat.solver.heuristics.pipe_offload import (
    every,
    every_other,
    first_chunk,
    needs_host_link,
    on_device_0,
    transfers,
)
from pipesat.solver.heuristics.requirements import first_unmet, needs_linear, needs_nothing
from pipesat.solver.heuristics.v_blocks import v_auto_orders, v_half_orders, v_min_orders
from pipesat.solver.heuristics.v_schedules import slot_orders, v_requirement, v_zb_offsets
from pipesat.solver.heuristics.zb_auto import zb_auto_orders, zb_auto_requirement
from pipesat.solver.heuristics.zb_v import zb_v_orders, zb_v_requirement
from pipesat.solver.heuristics.zero_bubble import zero_bubble_orders, zero_bubble_requirement


def _with_link(requirement: Callable[[Instance], str | None]) -> Callable[[Instance], str | None]:
    """An offload schedule's requirement: a host link, and what its base order needs."""
    return lambda instance: first_unmet(instance, needs_host_link, requirement)


SCHEDULES: tuple[Heuristic | StartingSchedule, ...] = (
    Heuristic("gpipe", needs_nothing, gpipe_orders),
    Heuristic("interleaved", interleaved_requirement, interleaved_orders),
    Heuristic("interleaved-overlap", interleaved_requirement, interleaved_overlap_orders),
    Heuristic("1f1b", needs_linear, one_f_one_b_orders),
    Heuristic("v-min", v_requirement, v_min_orders),
    Heuristic("v-half", v_requirement, v_half_orders),
    Heuristic("v-zb", v_requirement, partial(slot_orders, offsets=v_zb_offsets)),
    Heuristic("v-auto", v_requirement, v_auto_orders),
    Heuristic("block-optimal", block_optimal_requirement, block_optimal_orders),
    Heuristic("zb-auto", zb_auto_requirement, zb_auto_orders),
    Heuristic("zb-v", zb_v_requirement, zb_v_orders),
    Heuristic("dualpipe-v", dual_pipe_v_requirement, dual_pipe_v_orders),
    Heuristic("dualpipe", dual_pipe_requirement, dual_pipe_orders, bidirectional=True),
    Heuristic("zb-h1", zero_bubble_requirement, partial(zero_bubble_orders, factor=1)),
    Heuristic("zb-h2", zero_bubble_requirement, partial(zero_bubble_orders, factor=2)),
    # Offload schedules (docs/offload.md): a base order above with transfers on the host link.
    Heuristic("pipeoffload-full-v", _with_link(v_requirement), v_half_orders, transfers=transfers(every)),
    Heuristic("pipeoffload-selective-v", _with_link(v_requirement), v_half_orders, transfers=transfers(first_chunk)),
    Heuristic("pipeoffload-full-1f1b", _with_link(needs_linear), one_f_one_b_orders, transfers=transfers(every)),
    Heuristic(
        "pipeoffload-selective-1f1b", _with_link(needs_linear), one_f_one_b_orders, transfers=transfers(every_other)
    ),
    Heuristic(
        "offload-device0-1f1b", _with_link(needs_linear), one_f_one_b_orders, transfers=transfers(on_device_0, False)
    ),
    Heuristic("offload-device0-v", _with_link(v_requirement), v_half_orders, transfers=transfers(on_device_0, False)),
    StartingSchedule(one_at_a_time.NAME),
    StartingSchedule(periodic.NAME),
    StartingSchedule(memory_gated.NAME),
)
"""Every schedule pipesat makes without a search, in the one order they are listed and tried.

The handwritten schedules come in this order wherever they are listed (`compare`'s rows of equal
value, `pipesat schedule`'s help, the names an unknown name is told to choose from, the Pareto
table) and are tried in it. The starting schedules (one-at-a-time, periodic, memory-gated) are not handwritten:
they are never listed with them, and the solver makes them itself, after the handwritten ones.

The order also breaks ties for the best starting schedule (the best handwritten schedule a solve
reports): the lowest value wins, values equal within `models.tolerance` count as equal; among those
the lowest peak memory; among those the one earlier here (schedules given to the solve come after
the handwritten ones, before the starting ones). ZB-auto and ZB-H1 tie on both on the ZB paper's
1.5B model (p = 8, m = 24) at the 1F1B peak: ZB-auto is the one named.
"""

_BY_NAME = {entry.name: entry for entry in SCHEDULES if isinstance(entry, Heuristic)}


def _zb_auto_at(factor: float) -> Callable[[Instance], Orders]:
    """ZB-auto's orders under `factor` times the 1F1B peak, whatever the instance's own limit."""
    return lambda instance: zb_auto_orders(instance.with_limit(factor * instance.one_f_one_b_peak()))


ALIASES: dict[str, Heuristic] = {
    # The ZB paper's names for ZB-auto under p and 2p microbatches of activations (1x and 2x).
    "zb-1p": Heuristic("zb-1p", zb_auto_requirement, _zb_auto_at(1.0)),
    "zb-2p": Heuristic("zb-2p", zb_auto_requirement, _zb_auto_at(2.0)),
    # torch.distributed.pipelining's class names, for the schedules pipesat makes the same way.
    "schedulegpipe": _BY_NAME["gpipe"],
    "schedule1f1b": _BY_NAME["1f1b"],
    "scheduleinterleaved1f1b": _BY_NAME["interleaved"],
    "interleaved1f1b": _BY_NAME["interleaved"],
    "schedulezbvzerobubble": _BY_NAME["zb-v"],
    "scheduledualpipev": _BY_NAME["dualpipe-v"],
    "dualpipev": _BY_NAME["dualpipe-v"],
    "zbvzerobubble": _BY_NAME["zb-v"],
}
"""Other names `pipesat schedule` takes; they are not listed or tried with the handwritten schedules."""


def all_heuristics() -> list[Heuristic]:
    """The handwritten schedules, in table order.

    Returns
    -------
    list[Heuristic]
        Each with its `name` and `title`.
    """
    return list(_BY_NAME.values())


def get_heuristic(name: str) -> Heuristic:
    """The handwritten schedule called `name` or one of its `ALIASES` (any case); `UnknownSchedule` lists
    the names there are."""
    key = name.strip().lower()
    found = _BY_NAME.get(key) or ALIASES.get(key)
    if found is None:
        raise UnknownSchedule(
            f"unknown schedule {name!r}; choose one of {', '.join(_BY_NAME)} (or zb-1p, zb-2p, torch's class names)"
        )
    return found


def run_heuristic(name: str, instance: Instance) -> Schedule:
    """The named heuristic's schedule for `instance`, timed by the simulator (not yet validated).

    Raises `NotApplicable` with the heuristic's reason when it does not serve the instance.

    Parameters
    ----------
    name
        A handwritten schedule's name (`all_heuristics`: `1f1b`, `zb-h1`, `interleaved`, ...).
    instance
        What is scheduled; heuristics that take a memory limit (ZB-auto, V-auto) take its limit.

    Returns
    -------
    Schedule
        The schedule, timed by the simulator.

    Raises
    ------
    UnknownSchedule
        A name that is not a handwritten schedule's.
    NotApplicable
        The heuristic does not serve the instance (its reason).
    """
    heuristic = get_heuristic(name)
    reason = heuristic.unmet(instance)
    if reason is not None:
        raise NotApplicable(f"{heuristic.title}: {reason}")
    orders = heuristic.orders(instance)
    plan = None if heuristic.transfers is None else heuristic.transfers(instance, orders)
    return simulate(
        instance,
        orders,
        name=heuristic.name,
        source={"kind": "heuristic", "name": heuristic.name},
        links=() if plan is None else plan.links,
        waits=None if plan is None else plan.waits,
    )


@dataclass(frozen=True)
class Attempt:
    """One handwritten schedule tried on an instance: its schedule (not yet validated), or the error
    that stopped it (`NotApplicable` when it does not serve the instance)."""

    heuristic: Heuristic
    schedule: Schedule | None = None
    error: PipesatError | None = None


def try_every_heuristic(instance: Instance, offload: bool = True) -> list[Attempt]:
    """Every handwritten schedule on `instance`, in table order, refusals and failures included (the
    offload schedules only with `offload`)."""
    attempts = []
    for heuristic in all_heuristics():
        if heuristic.offloads and not offload:
            continue
        try:
            attempts.append(Attempt(heuristic, schedule=run_heuristic(heuristic.name, instance)))
        except PipesatError as error:
            attempts.append(Attempt(heuristic, error=error))
    return attempts


def handwritten_schedules(instance: Instance, offload: bool = False) -> list[tuple[str, Schedule]]:
    """(name, schedule) of every handwritten schedule that serves `instance`, in table order (not yet
    validated); the offload schedules only with `offload` (a solve that may not offload cannot start
    from them)."""
    return [
        (attempt.heuristic.name, attempt.schedule)
        for attempt in try_every_heuristic(instance, offload)
        if attempt.schedule is not None
    ]
