"""GPipe (fill-drain): every forward, then every backward."""

from __future__ import annotations

from pipesat.models import Instance, Kind, OpKey
from pipesat.solver.heuristics.heuristic import Orders


def gpipe_orders(instance: Instance) -> Orders:
    """Per device: forwards of its stages by (stage, microbatch), then whole backwards in reverse stage order.

    W is fused into B: GPipe predates the split backward. Any placement works (no requirement): with
    several stages per device this is the looped breadth-first fill-drain, which
    still holds all m microbatches of every stage at its peak and never deadlocks, because every
    device runs its forwards in stage order before any backward and its backwards in reverse stage order.
    """
    m = instance.num_microbatches
    orders: Orders = []
    for device in range(instance.num_devices):
        stages = instance.stages_of(device)
        forwards = [OpKey(Kind.F, s, j) for s in stages for j in range(m)]
        backwards = [OpKey(Kind.B, s, j) for s in reversed(stages) for j in range(m)]
        orders.append(forwards + backwards)
    return orders
