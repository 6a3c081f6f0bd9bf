"""Offload everything: the one-at-a-time order with every (stage, microbatch) offloaded right after
its F and reloaded just before its B (docs/offload.md).

It is to a solve that may offload what the one-at-a-time schedule is to one that may not: it meets
every limit down to the smallest one (`solver.evaluate.bounds.least_offload_limits`), so the search
has a start under any limit the bounds do not rule out. Each F waits for the offload issued before it on its device (the room it
needs), and each reload for the op before its B on the device (so that it holds its memory only
then).
"""

from __future__ import annotations

from collections.abc import Sequence

from pipesat.models import Instance, Kind, OpKey, Schedule
from pipesat.models.ops import offload_amount
from pipesat.solver.evaluate.simulator import TransferPlan, simulate
from pipesat.solver.heuristics.one_at_a_time import one_at_a_time_orders

NAME = "one-at-a-time, offloaded"


def offload_everything(instance: Instance, orders: Sequence[Sequence[OpKey]]) -> TransferPlan:
    """The transfers that offload every (stage, microbatch) whose offload moves anything, issued in
    the devices' `orders` (see the module notes)."""
    moves = {s for s in range(instance.num_stages) if offload_amount(instance, s) > 0}
    links: list[list[OpKey]] = [[] for _ in orders]
    waits: dict[OpKey, list[OpKey]] = {}
    for device, order in enumerate(orders):
        issued: OpKey | None = None
        for i, (kind, s, j) in enumerate(order):
            if kind == Kind.F and issued is not None:
                waits[OpKey(kind, s, j)] = [issued]
            if s not in moves or kind not in (Kind.F, Kind.B):
                continue
            if kind == Kind.F:
                issued = OpKey(Kind.O, s, j)
                links[device].append(issued)
            else:
                reload = OpKey(Kind.R, s, j)
                links[device].append(reload)
                if i > 0:
                    waits[reload] = [order[i - 1]]
    return TransferPlan(links, waits)


def offloaded_one_at_a_time(instance: Instance, split: bool) -> Schedule:
    """The one-at-a-time schedule with everything offloaded, timed."""
    orders = one_at_a_time_orders(instance, split)
    plan = offload_everything(instance, orders)
    return simulate(instance, orders, NAME, links=plan.links, waits=plan.waits)
