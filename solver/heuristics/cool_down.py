"""Pack a split-backward schedule's cool-down: each device's Ws after its last F moved into the gaps.

An order taken from a repeated building block keeps, in the cool-down, the Ws at their steady-state
places: a W right before a backward that another device waits for delays the whole drain. Here each
device's Ws after its last forward are taken out, the orders are timed (the simulator), and each W
goes back into the first gap before one of the device's backwards that it fits whole, the oldest
first; the rest run at the end. A W that fits a gap moves nothing else, so the backwards keep their
times. No device allocates after its last forward: its peak cannot rise.
"""

from __future__ import annotations

from collections import deque

from pipesat.models import Instance, Kind, OpKey, op_duration
from pipesat.models.tolerance import fits
from pipesat.solver.evaluate.simulator import simulate
from pipesat.solver.heuristics.heuristic import Orders


def pack_cool_down(instance: Instance, orders: Orders) -> Orders:
    """`orders` with each device's cool-down Ws moved into the gaps its backwards leave (module notes)."""
    moved: Orders = []
    for order in orders:
        last_f = max((i for i, key in enumerate(order) if key.kind == Kind.F), default=-1)
        head, tail = order[: last_f + 1], order[last_f + 1 :]
        moved.append(head + [key for key in tail if key.kind != Kind.W] + [key for key in tail if key.kind == Kind.W])
    timed = {op.key: op for op in simulate(instance, moved).ops}
    packed: Orders = []
    for order in moved:
        last_f = max((i for i, key in enumerate(order) if key.kind == Kind.F), default=-1)
        out = order[: last_f + 1]
        placed = set(out)
        cursor = timed[out[-1]].end if out else 0.0
        pending: deque[OpKey] = deque(key for key in order[last_f + 1 :] if key.kind == Kind.W)
        for key in order[last_f + 1 :]:
            if key.kind == Kind.W:
                continue
            start = timed[key].start
            while pending and OpKey(Kind.B, pending[0].stage, pending[0].microbatch) in placed:
                length = op_duration(instance, Kind.W, pending[0].stage, True)
                if not fits(cursor + length, start):
                    break
                out.append(pending.popleft())
                cursor += length
            out.append(key)
            placed.add(key)
            cursor = max(cursor, timed[key].end)
        out.extend(pending)
        packed.append(out)
    return packed
