"""1F1B (one forward, one backward) with the whole backward as one op."""

from __future__ import annotations

from pipesat.models import Instance, Kind, OpKey
from pipesat.solver.heuristics.heuristic import Orders


def one_f_one_b_orders(instance: Instance) -> Orders:
    """Rank r: min(p-1-r, m) warm-up forwards, then (F, B) pairs while forwards remain, then the rest of B."""
    p, m = instance.num_devices, instance.num_microbatches
    orders: Orders = []
    for rank in range(p):
        warmup = min(p - 1 - rank, m)
        order = [OpKey(Kind.F, rank, j) for j in range(warmup)]
        for j in range(warmup, m):
            order += [OpKey(Kind.F, rank, j), OpKey(Kind.B, rank, j - warmup)]
        order += [OpKey(Kind.B, rank, j) for j in range(m - warmup, m)]
        orders.append(order)
    return orders
