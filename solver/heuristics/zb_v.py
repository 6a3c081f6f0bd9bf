"""ZB-V: the zero-bubble V-shape schedule of the ZB paper, placed greedily with the real times and p2p.

Device d holds chunk 0 = stage d and chunk 1 = stage 2p-1-d; the backward is split. The schedule is
built the way the ZB paper's authors build it (docs/reference.md, ZB-V), timing every op as it is
placed (it ends at the later of its device's last end and its dependency's end plus p2p across
devices, plus its own time) and counting each device's idle time after its first forward:

1. every device's first chunk-0 forward; then, from the last device up, warm-up chunk-0 forwards on
   devices 0..d while they end before device d+1's first chunk-1 forward arrives and leave memory
   for the rest of the warm-up, then device d's first chunk-1 forward;
2. more forwards, from the last device towards the first, until each device has at least as many
   forwards as the one before it and more chunk-1 forwards;
3. 2m rounds: each device runs one backward (chunk 0's when its input has arrived, else chunk 1's),
   then one forward (chunk 1's when its input has arrived, else chunk 0's); before each, pending Ws
   (first in, first out) fill the wait for the input when they fit in it, and one more W goes in when
   the wait is longer than the device can afford without becoming the device with the most idle
   time; a forward that would pass the memory limit first runs pending Ws;
4. the remaining Ws.

Four variants (whether the extra W may go before backwards, and before forwards) are each run, then
run again with the previous run's idle times as every device's allowance while that lowers the
largest idle time; the variant with the least largest idle time wins (the first on a tie). The
memory limit is the instance's, at least the 1F1B peak (`1x`): the warm-up needs that much. With
equal times and no p2p the result has the ZB paper's peak (p microbatches of 1F1B activation) and
no bubble in the steady state.

The greedy can get stuck on uneven stages (a device waiting for an op no one will place, as the
paper's code does). ZB-V is therefore the better, by max span, of the greedy's order and the
paper's handwritten order (`handwritten_orders`, which torch's ZBVZeroBubble also runs and which
always works with m >= 2p-1); on a tie, the greedy's.
"""

from __future__ import annotations

import itertools
from collections import deque
from dataclasses import dataclass, field

from pipesat.models import KINDS, Instance, Kind, OpKey, dependency, memory_change, op_duration
from pipesat.models.ops import input_ready
from pipesat.models.tolerance import fits
from pipesat.solver.evaluate.metrics import compute_metrics
from pipesat.solver.evaluate.simulator import simulate
from pipesat.solver.heuristics.heuristic import NotApplicable, Orders
from pipesat.solver.heuristics.requirements import first_unmet, needs_split_backward, needs_vshape


def needs_enough_microbatches(instance: Instance) -> str | None:
    """ZB-V's warm-up runs 2p-1 chunk-0 forwards on device 0 before its first chunk-1 forward."""
    least = 2 * instance.num_devices - 1
    if instance.num_microbatches < least:
        return f"needs at least 2p-1 = {least} microbatches, got {instance.num_microbatches}"
    return None


def zb_v_requirement(instance: Instance) -> str | None:
    return first_unmet(instance, needs_vshape, needs_split_backward, needs_enough_microbatches)


def zb_v_orders(instance: Instance) -> Orders:
    """Per-device orders of ZB-V: the greedy's or the handwritten one, whichever has the lower max span."""
    handwritten = handwritten_orders(instance)
    try:
        greedy = greedy_orders(instance)
    except NotApplicable:
        return handwritten
    spans = [compute_metrics(simulate(instance, orders)).max_span for orders in (greedy, handwritten)]
    return greedy if fits(spans[0], spans[1]) else handwritten


def greedy_orders(instance: Instance) -> Orders:
    """The greedy placement's orders (see the module notes); `NotApplicable` when it gets stuck."""
    best: _Run | None = None
    for fill_backward, fill_forward in itertools.product((True, False), repeat=2):
        run = _Run(instance, fill_forward, fill_backward).place()
        while True:
            retry = _Run(instance, fill_forward, fill_backward, allowance=run.idle).place()
            if not retry.largest_idle() < run.largest_idle():
                break
            run = retry
        if best is None or run.largest_idle() < best.largest_idle():
            best = run
    assert best is not None
    return best.orders


@dataclass
class _Run:
    """One greedy pass. `allowance`: a previous run's idle per device, which each device may reach."""

    instance: Instance
    fill_forward: bool
    fill_backward: bool
    allowance: list[float] | None = None
    orders: Orders = field(init=False)
    idle: list[float] = field(init=False)

    def __post_init__(self) -> None:
        p = self.instance.num_devices
        self.orders = [[] for _ in range(p)]
        self.idle = [0.0] * p
        self.free_at = [0.0] * p
        self.held = [0.0] * p
        self.done: dict[tuple[int, str, int], int] = {}
        self.end: dict[OpKey, float] = {}
        self.pending_w: list[deque[int]] = [deque() for _ in range(p)]
        reference = self.instance.one_f_one_b_peak()
        limits = self.instance.memory_limit or (reference,) * p
        self.limit = [max(limit, reference) for limit in limits]

    # --- the pieces of a device ---

    def stage(self, device: int, chunk: int) -> int:
        return device if chunk == 0 else 2 * self.instance.num_devices - 1 - device

    def count(self, device: int, kind: Kind, chunk: int) -> int:
        return self.done.get((device, kind, chunk), 0)

    def next_key(self, device: int, kind: Kind, chunk: int) -> OpKey:
        return OpKey(kind, self.stage(device, chunk), self.count(device, kind, chunk))

    def arrived(self, device: int, kind: Kind, chunk: int) -> float | None:
        """When the input of the device's next (kind, chunk) op is ready, or None while it is not placed."""
        return input_ready(self.next_key(device, kind, chunk), self.instance, self.end)

    def duration(self, kind: Kind, stage: int) -> float:
        return op_duration(self.instance, kind, stage, True)

    def put(self, device: int, kind: Kind, chunk: int) -> None:
        key = self.next_key(device, kind, chunk)
        if key.microbatch >= self.instance.num_microbatches:
            raise NotApplicable(f"ZB-V: device {device} ran out of {kind} ops while placing; {self.limit_hint()}")
        ready = self.arrived(device, kind, chunk)
        if ready is None:
            raise NotApplicable(f"ZB-V: device {device} would wait for an op never placed; {self.limit_hint()}")
        change = memory_change(self.instance, kind, key.stage, True)
        if not fits(self.held[device] + change, self.limit[device]):
            raise NotApplicable(f"ZB-V: the warm-up does not fit the memory limit; {self.limit_hint()}")
        earliest = self.free_at[device]
        start = max(earliest, ready)
        if self.count(device, Kind.F, 0) > 0:
            self.idle[device] += start - earliest
        self.end[key] = self.free_at[device] = start + self.duration(kind, key.stage)
        self.held[device] += change
        self.orders[device].append(key)
        self.done[(device, kind, chunk)] = key.microbatch + 1
        if kind == Kind.B:
            self.pending_w[device].append(chunk)

    def put_w(self, device: int) -> None:
        self.put(device, Kind.W, self.pending_w[device].popleft())

    def limit_hint(self) -> str:
        return "it needs a memory limit of at least the 1F1B peak and enough microbatches"

    def largest_idle(self) -> float:
        return max(self.idle)

    def affordable(self, device: int) -> float:
        """The idle time a device may still take before it becomes the one with the most."""
        most = max(self.idle)
        if self.allowance is not None:
            most = max(most, max(self.allowance) - self.allowance[device])
        return most - self.idle[device]

    def fill_wait(self, device: int, ready: float | None, extra: bool) -> None:
        """Pending Ws into the wait for an input ready at `ready`: every one that fits, then one more
        when the wait is longer than the device can afford (and `extra`)."""
        pending = self.pending_w[device]
        if ready is None:
            return
        while pending and ready >= self.free_at[device] + self.duration(Kind.W, self.stage(device, pending[0])):
            self.put_w(device)
        if pending and extra and ready - self.free_at[device] > self.affordable(device):
            self.put_w(device)

    # --- the phases ---

    def place(self) -> _Run:
        p, m = self.instance.num_devices, self.instance.num_microbatches
        for device in range(p):
            self.put(device, Kind.F, 0)
        self.warm_up()
        self.balance_forwards()
        for _ in range(2 * m):
            self.backward_round()
            self.forward_round()
        for device in range(p):
            while self.pending_w[device]:
                self.put_w(device)
        return self

    def warm_up(self) -> None:
        p, m = self.instance.num_devices, self.instance.num_microbatches
        activation = self.instance.activation_memory
        for device in reversed(range(p)):
            if device < p - 1:
                turn = self.arrived(device, Kind.F, 1)
                assert turn is not None  # device + 1's first chunk-1 forward is placed
                room = (device + 1) * (activation[self.stage(device, 0)] + activation[self.stage(device, 1)])
                while (
                    fits(self.held[device] + room, self.limit[device])
                    and self.free_at[device] + self.duration(Kind.F, device) <= turn
                    and self.count(device, Kind.F, 0) < m
                ):
                    for upstream in range(device + 1):
                        self.put(upstream, Kind.F, 0)
            self.put(device, Kind.F, 1)

    def balance_forwards(self) -> None:
        p, m = self.instance.num_devices, self.instance.num_microbatches
        chunk = 0
        for device in range(1, p):
            while self.forwards(device) < self.forwards(device - 1) or (
                self.count(device, Kind.F, 1) <= self.count(device - 1, Kind.F, 1) < m
            ):
                for other in reversed(range(device, p)):
                    if self.count(other, Kind.F, chunk) < m:
                        self.put(other, Kind.F, chunk)
                chunk = 1 - chunk

    def forwards(self, device: int) -> int:
        return self.count(device, Kind.F, 0) + self.count(device, Kind.F, 1)

    def backward_round(self) -> None:
        p, m = self.instance.num_devices, self.instance.num_microbatches
        for device in range(p):
            while self.pending_w[device] and not fits(
                self.held[device] + self.largest_b_change(device), self.limit[device]
            ):
                self.put_w(device)
        chunk0, chunk1 = [], []
        for device in range(p):
            if self.count(device, Kind.B, 0) >= self.count(device, Kind.B, 1):
                chunk1.append(device)
            elif device == p - 1 or self.arrived(device, Kind.B, 0) is not None or self.count(device, Kind.B, 1) >= m:
                chunk0.append(device)
            else:
                chunk1.append(device)
        for device, chunk in [(d, 0) for d in reversed(chunk0)] + [(d, 1) for d in chunk1]:
            self.fill_wait(device, self.arrived_across(device, Kind.B, chunk), extra=chunk == 0 or self.fill_backward)
            self.put(device, Kind.B, chunk)

    def largest_b_change(self, device: int) -> float:
        return max(memory_change(self.instance, Kind.B, self.stage(device, chunk), True) for chunk in (0, 1))

    def forward_round(self) -> None:
        p, m = self.instance.num_devices, self.instance.num_microbatches
        for device in range(p):
            if self.count(device, Kind.F, 1) >= m:
                continue
            if self.count(device, Kind.F, 1) >= self.count(device, Kind.F, 0):
                chunk = 0
            elif device == p - 1 or self.arrived(device, Kind.F, 1) is not None:
                chunk = 1
            elif self.count(device, Kind.F, 0) < m and self.arrived(device, Kind.F, 0) is not None:
                chunk = 0
            else:
                continue
            allocation = memory_change(self.instance, Kind.F, self.stage(device, chunk), True)
            while self.pending_w[device] and not fits(self.held[device] + allocation, self.limit[device]):
                self.put_w(device)
            self.fill_wait(device, self.arrived_across(device, Kind.F, chunk), extra=self.fill_forward)
            self.put(device, Kind.F, chunk)

    def arrived_across(self, device: int, kind: Kind, chunk: int) -> float | None:
        """`arrived` for an input from another device; None for one on the same device (the order covers it)."""
        key = self.next_key(device, kind, chunk)
        before = dependency(key, self.instance)
        if before is None or self.instance.placement[before.stage] == device:
            return None
        return self.arrived(device, kind, chunk)


def handwritten_orders(instance: Instance) -> Orders:
    """The ZB paper's handwritten ZB-V order (docs/reference.md), per device: a warm-up of chunk-0
    forwards, then alternating forwards, then forward/backward/weight triples of chunk 1; a steady
    state that cycles through both chunks; a cool-down that drains the backwards and finally the Ws."""
    p, m = instance.num_devices, instance.num_microbatches
    return [_handwritten_device_order(p, m, rank) for rank in range(p)]


def _handwritten_device_order(p: int, m: int, rank: int) -> list[OpKey]:
    stage = (rank, 2 * p - 1 - rank)  # chunk 0, chunk 1
    done = {(kind, chunk): 0 for kind in KINDS for chunk in (0, 1)}
    order: list[OpKey] = []

    def put(*ops: tuple[Kind, int]) -> None:
        for kind, chunk in ops:
            order.append(OpKey(kind, stage[chunk], done[kind, chunk]))
            done[kind, chunk] += 1

    put(*[(Kind.F, 0)] * (2 * (p - rank) - 1))
    put(*[(Kind.F, 1), (Kind.F, 0)] * rank)
    put(*[(Kind.F, 1), (Kind.B, 1), (Kind.W, 1)] * (p - rank))
    # Steady state: m - p rounds leave exactly the p chunk-0 and r chunk-1 backwards of the cool-down.
    for _ in range(m - p):
        if done[Kind.F, 0] < m:
            put((Kind.F, 0))
        put((Kind.B, 0), (Kind.W, 0), (Kind.F, 1), (Kind.B, 1), (Kind.W, 1))
    put(*[(Kind.B, 0), (Kind.B, 1)] * rank)
    put(*[(Kind.B, 0), (Kind.W, 0)] * (p - rank))
    for chunk in (1, 0):
        put(*[(Kind.W, chunk)] * (m - done[Kind.W, chunk]))
    return order
