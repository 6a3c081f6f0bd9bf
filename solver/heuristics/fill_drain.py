"""GPipe (fill-drain): every forward, then every backward."""

from __future__ import annotations

from models import Instance
from solver.heuristics import Heuristic, Orders, register


def gpipe_orders(instance: Instance) -> Orders:
    """Per device: forwards of its stages by (stage, microbatch), then whole backwards in reverse stage order.

    W is fused into B: GPipe predates the split backward.
    """
    m = instance.num_microbatches
    orders: Orders = []
    for device in range(instance.num_devices):
        stages = instance.stages_of(device)
        forwards = [("F", s, j) for s in stages for j in range(m)]
        backwards = [("B", s, j) for s in reversed(stages) for j in range(m)]
        orders.append(forwards + backwards)
    return orders


register(Heuristic("gpipe", "GPipe", lambda instance: None, gpipe_orders))
