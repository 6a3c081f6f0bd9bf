"""The least-memory schedule: one microbatch at a time through the whole pipeline.

It holds at most one microbatch's activations of each stage, the smallest peak any schedule can have
(`solver.evaluate.bounds.minimum_memory_limit`), so it fits every feasible memory limit. The solver uses it as
the starting point when no heuristic fits a tight limit, and as the answer to a solve that minimizes memory
when no time cap rules it out.
"""

from __future__ import annotations

from pipesat.models import Instance, Kind, OpKey

NAME = "one-at-a-time"


def one_at_a_time_orders(instance: Instance, split: bool) -> list[list[OpKey]]:
    """Per-device orders that run microbatch j's forwards, backwards (each W right after its B), then j + 1."""
    orders: list[list[OpKey]] = [[] for _ in range(instance.num_devices)]
    for j in range(instance.num_microbatches):
        stages = instance.route(j)
        for s in stages:
            orders[instance.placement[s]].append(OpKey(Kind.F, s, j))
        for s in reversed(stages):
            orders[instance.placement[s]].append(OpKey(Kind.B, s, j))
            if split:
                orders[instance.placement[s]].append(OpKey(Kind.W, s, j))
    return orders
