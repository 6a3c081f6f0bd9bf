"""The schedules a plan may use (`training.schedules`, or the option of its name): which names it takes, which
placements each runs, and the handwritten schedules of a configuration the restriction allows.

A restriction names handwritten schedules as `pipesat schedule` knows them (`1f1b`, `interleaved`,
`zb-h1`, ...), `cp-sat` for the solver's search (from the allowed schedules: it runs no placement
they do not), and pipesat's starting schedules (one-at-a-time, periodic, memory-gated), which the
plan otherwise falls back on where no handwritten schedule fits.
None (the default) allows them all: the plan as it is without the key.
"""

from __future__ import annotations

from pipesat.models import Instance, Schedule
from pipesat.models.placement import PLACEMENTS
from pipesat.solver.heuristics import all_heuristics, memory_gated, one_at_a_time, periodic
from pipesat.solver.plan.offload import FAMILIES

SEARCH = "cp-sat"
"""The name that allows the solver's search (CP-SAT from every allowed schedule)."""
STARTS = (one_at_a_time.NAME, periodic.NAME, memory_gated.NAME)
"""pipesat's own starting schedules, which the plan falls back on where no handwritten one fits."""
HANDWRITTEN = tuple(
    heuristic.name for heuristic in all_heuristics() if not heuristic.offloads or heuristic.name in FAMILIES.values()
)
"""The handwritten schedules a plan runs; PipeOffload's only in a configuration that offloads
(`training.offload`, `offload.family_schedules`), the device-0 baselines not at all."""
SCHEDULE_NAMES = (*HANDWRITTEN, SEARCH, *STARTS)
"""Every name `training.schedules` takes, in the order they are listed."""

_VSHAPE = ("v-min", "v-half", "v-zb", "v-auto", "block-optimal", "zb-v", "dualpipe-v")
RUNS_ON: dict[str, tuple[str, ...]] = {
    **{name: ("linear",) for name in ("1f1b", "zb-auto", "zb-h1", "zb-h2")},
    **{name: ("interleaved",) for name in ("interleaved", "interleaved-overlap")},
    **{name: ("vshape",) for name in _VSHAPE},
    **{name: (placement,) for (_, placement), name in FAMILIES.items()},
    "dualpipe": ("bidirectional",),
    SEARCH: (),
}
"""The placements each handwritten schedule runs (its requirement's first check); GPipe and the
starting schedules run every placement. The search starts from the allowed schedules, so it adds none."""


def placements_of(name: str) -> tuple[str, ...]:
    """The placements the schedule `name` (of `SCHEDULE_NAMES`) runs."""
    return RUNS_ON.get(name, PLACEMENTS)


def allows(schedules: tuple[str, ...] | None, name: str) -> bool:
    """Whether the restriction `schedules` (None: none) allows the schedule `name`."""
    return schedules is None or name in schedules


def runs_placement(schedules: tuple[str, ...] | None, placement: str) -> bool:
    """Whether a schedule the restriction allows runs a pipeline of `placement`."""
    return schedules is None or any(placement in placements_of(name) for name in schedules)


def allowed_handwritten(
    schedules: tuple[str, ...] | None, found: list[tuple[str, Schedule]]
) -> tuple[list[tuple[str, Schedule]], list[tuple[str, Schedule]]]:
    """The (name, schedule) pairs of `found` (`heuristics.handwritten_schedules`) that the restriction
    `schedules` allows, and those it does not, each in table order."""
    allowed = [(name, schedule) for name, schedule in found if allows(schedules, name)]
    return allowed, [(name, schedule) for name, schedule in found if not allows(schedules, name)]


def unmet_text(schedules: tuple[str, ...], instance: Instance) -> str:
    """Why none of the allowed handwritten schedules serves `instance` ('' when one does, or when a
    start, which serves every instance, is allowed)."""
    reasons = []
    for heuristic in all_heuristics():
        if heuristic.name not in schedules:
            continue
        reason = heuristic.unmet(instance)
        if reason is None:
            return ""
        reasons.append(f"{heuristic.title} {reason}")
    if any(name in STARTS for name in schedules):
        return ""
    return "no schedule of training.schedules runs it: " + "; ".join(reasons)
