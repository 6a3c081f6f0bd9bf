"""ZB-H1 and ZB-H2 (Zero Bubble Pipeline Parallelism): 1F1B with the weight backward W split off and delayed.

Rank r runs `c(p-1-r)` warm-up forwards (capped at m), then per microbatch a forward (while any
remain) and a backward B, plus one W once more than `c·r` Bs are done, so W lags B by c·r
microbatches; the remaining Ws close. c = 1 (ZB-H1) keeps 1F1B's peak p·M_B and cuts its bubble to
(p-1)(F+B-W); c = 2 (ZB-H2) spends peak (2p-1)·M_B to fill the warm-up and cool-down with work.
"""

from __future__ import annotations

from pipesat.models import Instance, Kind, OpKey
from pipesat.solver.heuristics.heuristic import Orders
from pipesat.solver.heuristics.requirements import first_unmet, needs_linear, needs_split_backward


def zero_bubble_orders(instance: Instance, factor: int) -> Orders:
    """Per-device orders of ZB-H1 (`factor` 1) or ZB-H2 (`factor` 2)."""
    p, m = instance.num_devices, instance.num_microbatches
    orders: Orders = []
    for rank in range(p):
        warmup = min(factor * (p - 1 - rank), m)
        lag = factor * rank
        order: list[OpKey] = [OpKey(Kind.F, rank, j) for j in range(warmup)]
        forwards, weights = warmup, 0
        for j in range(m):
            if forwards < m:
                order.append(OpKey(Kind.F, rank, forwards))
                forwards += 1
            order.append(OpKey(Kind.B, rank, j))
            if j + 1 > lag:
                order.append(OpKey(Kind.W, rank, weights))
                weights += 1
        order += [OpKey(Kind.W, rank, k) for k in range(weights, m)]
        orders.append(order)
    return orders


def zero_bubble_requirement(instance: Instance) -> str | None:
    return first_unmet(instance, needs_linear, needs_split_backward)
