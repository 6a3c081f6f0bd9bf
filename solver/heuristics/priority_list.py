"""A list schedule that takes its priorities from an order (a building block's, unrolled).

An unrolled block's order keeps the steady state's interleaving in the warm-up and the cool-down,
where half the ops are missing: a device waits for the backward its order names next although
another backward or a W of its own is ready. Here, in time order, each device runs as soon as it is
free the ready op (its input there) that comes first in the given order, except that a forward
keeps its place: it runs only after every op before it in the order. So only frees (backwards and
Ws) move ahead, and a device holds, at each forward's start, no more than the order holds there:
the peak cannot rise, and an order that runs does not deadlock here either. The result is a new
order for the simulator; the times here follow its as-soon-as-possible rule.
"""

from __future__ import annotations

from pipesat.models import Instance, Kind, OpKey, op_duration
from pipesat.models.ops import input_ready
from pipesat.solver.heuristics.heuristic import Orders


def priority_orders(instance: Instance, orders: Orders) -> Orders:
    """Per-device orders of the list schedule whose priorities are `orders` (module notes)."""
    devices = range(instance.num_devices)
    pending = [list(order) for order in orders]
    out: Orders = [[] for _ in devices]
    end: dict[OpKey, float] = {}
    free_at = [0.0] * len(pending)
    while any(pending):
        best: tuple[float, int, int] | None = None  # (start, device, index in its pending ops)
        for device in devices:
            choice = _next(instance, pending[device], end, free_at[device])
            if choice is not None and (best is None or choice[0] < best[0]):
                best = (choice[0], device, choice[1])
        assert best is not None, "the orders deadlock"  # they do not: `block_optimal` simulated them first
        start, device, index = best
        key = pending[device].pop(index)
        end[key] = free_at[device] = start + op_duration(instance, key.kind, key.stage, True)
        out[device].append(key)
    return out


def _next(instance: Instance, pending: list[OpKey], end: dict[OpKey, float], free: float) -> tuple[float, int] | None:
    """(start, index) of the op a device runs next: of those whose input is placed, before its next
    forward in the order (or that forward when it is next), the first among the ones that can start
    earliest (at `free` if any is ready by then)."""
    chosen: tuple[float, int] | None = None
    for index, key in enumerate(pending):
        if key.kind == Kind.F and index > 0:  # a forward waits for every op before it
            break
        ready = input_ready(key, instance, end)
        if ready is not None:
            start = max(free, ready)
            if start <= free:
                return start, index
            if chosen is None or start < chosen[0]:
                chosen = (start, index)
        if key.kind == Kind.F:
            break
    return chosen
