"""A starting schedule for 1F1B and interleaved pipelines under a memory limit: their op sequences, gated by memory.

Megatron's interleaved 1F1B keeps `2(p - r - 1) + (v - 1)p` forwards in flight on rank r before its
first backward, whatever the memory; below that peak its fixed order cannot run, and fewer warm-up
forwards in the same order stall every steady-state step (Llama 3 405B's t8 p16 v8 layout, 2 fewer:
37% slower). Here each rank keeps Megatron's sequence of forwards and its sequence of backwards (on
a linear pipeline, with one chunk, 1F1B's: microbatches in order) but not their interleaving: a list
scheduler, in time order, lets each rank run its next backward as soon as it can, and otherwise its
next forward as soon as it can when its activations fit the limit (each W right after its B). A
rank whose next forward does not fit waits for a backward to free memory. When no rank can go on (a
limit so tight that a forward the next backward needs never fits) there is no such schedule. Its
times follow the simulator's as-soon-as-possible rule; the schedule that leaves it is timed by the
simulator.

Measured on that 405B layout (`bench_cost_model`'s instance, 65.3 GiB budgets): 11,594 ms at a
65.05 GiB peak, where Megatron's order needs 70.0 GiB (11,250 ms) and the periodic start fits at
13,385 ms. On linear pipelines below the 1F1B peak it keeps as many microbatches in flight as fit:
the ZB paper's 1.5B model, p = 8, m = 32 at 0.5x, 2794.5 against the periodic start's 2908 (a 60 s
solve from the periodic start had ended at 2805.6; from this one, 2770.3). It is not better
everywhere (it runs backwards eagerly, which can delay a forward another rank waits on), so the
solver takes it as one more start.
"""

from __future__ import annotations

import math

from pipesat.models import Instance, OpKey, Schedule, op_duration
from pipesat.models.instance import placement_devices
from pipesat.models.ops import input_ready, memory_change
from pipesat.models.tolerance import fits
from pipesat.solver.evaluate.simulator import simulate
from pipesat.solver.heuristics.interleaved import interleaved_requirement, megatron_sequences

NAME = "memory-gated"


def memory_gated_schedule(instance: Instance, split: bool) -> Schedule | None:
    """The memory-gated schedule (module notes), or None: neither a linear pipeline nor an interleaved
    one Megatron's order serves, or no rank can go on under the limit."""
    linear = instance.placement == placement_devices("linear", instance.num_devices, 1)
    if instance.bidirectional or (not linear and interleaved_requirement(instance) is not None):
        return None
    orders = _gated_orders(instance, split)
    return None if orders is None else simulate(instance, orders, NAME)


def _gated_orders(instance: Instance, split: bool) -> list[list[OpKey]] | None:
    p = instance.num_devices
    limits = instance.memory_limit or (math.inf,) * p
    sequences = [megatron_sequences(instance, rank) for rank in range(p)]
    done = [[0, 0] for _ in range(p)]  # forwards and backwards each rank has run
    held = [0.0] * p
    free_at = [0.0] * p
    end: dict[OpKey, float] = {}
    orders: list[list[OpKey]] = [[] for _ in range(p)]

    for _ in range(2 * sum(len(forwards) for forwards, _ in sequences)):
        chosen: tuple[float, int, int, OpKey] | None = None  # start, backward first, rank, op
        for rank, (forwards, backwards) in enumerate(sequences):
            ran_forwards, ran_backwards = done[rank]
            options = []
            if ran_backwards < len(backwards):
                options.append((0, backwards[ran_backwards]))
            if ran_forwards < len(forwards):
                forward = forwards[ran_forwards]
                if fits(held[rank] + instance.activation_memory[forward.stage], limits[rank]):
                    options.append((1, forward))
            for order, key in options:
                at = input_ready(key, instance, end)
                if at is not None and (chosen is None or (max(free_at[rank], at), order, rank) < chosen[:3]):
                    chosen = (max(free_at[rank], at), order, rank, key)
        if chosen is None:
            return None
        start, _, rank, key = chosen
        steps = [key] + ([OpKey("W", key.stage, key.microbatch)] if split and key.kind == "B" else [])
        for step in steps:
            start += op_duration(instance, step.kind, step.stage, split)
            end[step] = start
            held[rank] += memory_change(instance, step.kind, step.stage, split)
            orders[rank].append(step)
        free_at[rank] = start
        done[rank][key.kind == "B"] += 1
    return orders
