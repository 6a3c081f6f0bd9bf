"""ZB-V: the zero-bubble V-shape schedule of the ZB paper (two chunks per device, split backward).

Device r holds chunk 0 = stage r and chunk 1 = stage 2p-1-r. Its order (docs/reference.md, handwritten orders): a warm-up of
chunk-0 forwards, then alternating forwards, then forward/backward/weight triples of chunk 1; a steady
state that cycles through both chunks; a cool-down that drains the backwards and finally the Ws.
The peak is p microbatches of 1F1B activation and the bubble is near zero when F = B = W.
"""

from __future__ import annotations

from models import Instance, OpKey
from solver.heuristics.heuristic import Orders
from solver.heuristics.requirements import first_unmet, needs_split_backward, needs_vshape


def needs_enough_microbatches(instance: Instance) -> str | None:
    """ZB-V's warm-up runs 2p-1 chunk-0 forwards on device 0 before its first chunk-1 forward."""
    least = 2 * instance.num_devices - 1
    if instance.num_microbatches < least:
        return f"needs at least 2p-1 = {least} microbatches, got {instance.num_microbatches}"
    return None


def zb_v_requirement(instance: Instance) -> str | None:
    return first_unmet(instance, needs_vshape, needs_split_backward, needs_enough_microbatches)


def zb_v_orders(instance: Instance) -> Orders:
    """Per-device orders of ZB-V (needs m >= 2p-1; see the module docstring)."""
    p, m = instance.num_devices, instance.num_microbatches
    return [_device_order(p, m, rank) for rank in range(p)]


def _device_order(p: int, m: int, rank: int) -> list[OpKey]:
    stage = (rank, 2 * p - 1 - rank)  # chunk 0, chunk 1
    done = {(kind, chunk): 0 for kind in "FBW" for chunk in (0, 1)}
    order: list[OpKey] = []

    def put(kind: str, chunk: int) -> None:
        order.append((kind, stage[chunk], done[kind, chunk]))
        done[kind, chunk] += 1

    for _ in range(2 * (p - rank) - 1):
        put("F", 0)
    for _ in range(rank):
        put("F", 1)
        put("F", 0)
    for _ in range(p - rank):
        put("F", 1)
        put("B", 1)
        put("W", 1)
    # Steady state: m - p rounds leave exactly the p chunk-0 and r chunk-1 backwards of the cool-down.
    for _ in range(m - p):
        if done["F", 0] < m:
            put("F", 0)
        put("B", 0)
        put("W", 0)
        put("F", 1)
        put("B", 1)
        put("W", 1)
    for _ in range(rank):
        put("B", 0)
        put("B", 1)
    for _ in range(p - rank):
        put("B", 0)
        put("W", 0)
    for chunk in (1, 0):
        while done["W", chunk] < m:
            put("W", chunk)
    return order
