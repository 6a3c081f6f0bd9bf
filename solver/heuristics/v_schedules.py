"""The slot construction of V-shape schedules from a repeating building block ("Pipeline Parallelism
with Controllable Memory", Qi et al. 2024): V-ZB's block, V-Min's and V-Half's fixed blocks, and the
construction that `solver.heuristics.v_blocks` runs for every block it searches.

Time runs in slots, six per cycle. On device i the building block puts microbatch 0's F (chunk 0,
stage i), f (chunk 1, stage 2p-1-i), B (the backward of chunk 1, which runs first) and b (the backward
of chunk 0) at four offsets; microbatch k sits 6k slots later. The offsets decide how long a
microbatch's activations live on a device, hence the peak memory: V-Min about p/3, V-Half about p/2
and V-ZB p microbatches of 1F1B activation. Then:

1. the Ws fill the free slots first-in-first-out (the W of the oldest backward first);
2. the squeeze visits the ops in slot order and moves each one to the earliest free slot after its
   dependency (and after the same op of the previous microbatch) when that does not raise its device's
   peak memory; this packs the warm-up;
3. each device's cool-down (after its last forward) is packed again without its Ws: they come out, the
   backwards are squeezed (a W right after its backward would make the next backward of the drain
   wait), and the Ws fill the free slots again, first-in-first-out, the rest at the end. Without this
   V-ZB keeps a bubble of about p/m in the drain; the paper's code does the same second pass;
4. each device's ops in slot order become its order for the one simulator, which adds the real times.

Slot order respects every dependency (each op's dependency sits in an earlier slot), so the orders
never deadlock, whatever the real times, and the peak memory of the timed schedule is the peak of the
slot layout: neither pass raises it.
"""

from __future__ import annotations

import bisect
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING

from pipesat.models import KINDS, Instance, Kind, OpKey
from pipesat.models.ops import dependency, memory_change
from pipesat.models.tolerance import fits
from pipesat.solver.heuristics.heuristic import Orders
from pipesat.solver.heuristics.requirements import first_unmet, needs_split_backward, needs_vshape

if TYPE_CHECKING:
    import numpy as np

CYCLE = 6

Offsets = tuple[int, int, int, int]
"""Slots of microbatch 0's F (chunk 0), f (chunk 1), B (chunk 1 backward) and b (chunk 0 backward)."""


def v_min_offsets(p: int, i: int) -> Offsets:
    """V-Min: consecutive devices one slot apart, the backward right after the forward V."""
    g = 2 if p % 3 == 0 else 0
    return (i, 2 * p - i - 1, 2 * p + g + i, 4 * p + g - i - 1)


def v_half_offsets(p: int, i: int) -> Offsets:
    """V-Half: forwards and first backwards two slots apart, so each microbatch lives about half as long as in 1F1B."""
    g = 3 if p % 2 == 0 else 0
    return (2 * i, 3 * p - i - 2, 3 * p + g + 2 * i - 1, 6 * p + g - i - 2)


def v_zb_offsets(p: int, i: int) -> Offsets:
    """V-ZB: the building block of ZB-V's steady state (its cycle F, b, w, f, B, W on every device).

    The Controllable Memory paper's code makes V-ZB with ZB-V's greedy scheduler; here it is the same
    slot construction as V-Min and V-Half with ZB-V's block: chunk 0 lives about 2p cycles, chunk 1 about
    i cycles, for a peak of p microbatches.
    """
    return (i, 6 * p - 5 * i - 3, 6 * p + i - 2, 12 * p - 5 * i - 5)


def slot_orders(instance: Instance, offsets: Callable[[int, int], Offsets]) -> Orders:
    """Per-device orders of the slot construction with the given building block (see the module docstring)."""
    layout = _SlotLayout(instance, offsets)
    layout.fill_weights()
    layout.squeeze()
    layout.pack_cool_down()
    return layout.orders()


class _SlotLayout:
    """Which op sits in which slot on each device.

    The four offsets of a device differ modulo the cycle, so the repeated blocks never collide.
    """

    def __init__(self, instance: Instance, offsets: Callable[[int, int], Offsets]) -> None:
        self.instance = instance
        p, m = instance.num_devices, instance.num_microbatches
        self.changes = {
            (kind, stage): memory_change(instance, kind, stage, split_backward=True)
            for kind in KINDS
            for stage in range(instance.num_stages)
        }
        self.slot: dict[OpKey, int] = {}
        self.occupant: list[list[OpKey | None]] = []
        for i in range(p):
            chunk0, chunk1 = i, 2 * p - 1 - i
            kinds = ((Kind.F, chunk0), (Kind.F, chunk1), (Kind.B, chunk1), (Kind.B, chunk0))
            row: list[OpKey | None] = [None] * (max(offsets(p, i)) + CYCLE * (m - 1) + 1)
            for (kind, stage), offset in zip(kinds, offsets(p, i), strict=True):
                for k in range(m):
                    self._place(row, OpKey(kind, stage, k), offset + CYCLE * k)
            self.occupant.append(row)

    def delta(self, key: OpKey) -> float:
        """Memory an op adds (F) or frees (B, W: negative) on its device (the backward is split)."""
        return self.changes[key.kind, key.stage]

    def fill_weights(self) -> None:
        """Put each missing W into a free slot after its backward, the oldest backward's W first; the rest at the end."""
        for row in self.occupant:
            pending: deque[OpKey] = deque()
            for t, key in enumerate(row):
                if key is None:
                    if pending:
                        self._place(row, pending.popleft(), t)
                elif key.kind == Kind.B and OpKey(Kind.W, key.stage, key.microbatch) not in self.slot:
                    pending.append(OpKey(Kind.W, key.stage, key.microbatch))
            while pending:
                row.append(None)
                self._place(row, pending.popleft(), len(row) - 1)

    def _place(self, row: list[OpKey | None], key: OpKey, t: int) -> None:
        row[t] = key
        self.slot[key] = t

    def pack_cool_down(self) -> None:
        """Squeeze each device's backwards after its last forward with the Ws taken out, then put the Ws back.

        A W right after its backward makes the next backward of the drain wait; without it the backwards
        flow through, and the Ws fill the gaps they leave. No device allocates after its last forward, so
        its memory there only falls, wherever its Ws go: the peak cannot rise.
        """
        cool_down = []
        for row in self.occupant:
            start = max(t for t, key in enumerate(row) if key is not None and key.kind == Kind.F)
            cool_down.append(start)
            for t in range(start + 1, len(row)):
                key = row[t]
                if key is not None and key.kind == Kind.W:
                    row[t] = None
                    del self.slot[key]
        placement = self.instance.placement
        self.squeeze(lambda key, t: key.kind == Kind.B and t > cool_down[placement[key.stage]])
        self.fill_weights()

    def squeeze(self, movable: Callable[[OpKey, int], bool] = lambda key, t: True) -> None:
        """Move each movable op (by key and slot), in slot order, to the earliest free slot after its
        dependencies where its device's peak memory does not rise."""
        memory = [self._memory(row) for row in self.occupant]
        peaks = [float(held.max(initial=0.0)) for held in memory]
        free = [[t for t, key in enumerate(row) if key is None] for row in self.occupant]
        placement, slot = self.instance.placement, self.slot
        chosen = sorted((t, placement[key.stage], key) for key, t in slot.items() if movable(key, t))
        for current, device, key in chosen:
            kind, stage, k = key
            before = dependency(key, self.instance)
            earliest = 0 if before is None else slot[before] + 1
            if k > 0:
                earliest = max(earliest, slot[OpKey(kind, stage, k - 1)] + 1)
            candidates = free[device]
            first, last = bisect.bisect_left(candidates, earliest), bisect.bisect_left(candidates, current)
            if first == last:
                continue
            change = self.delta(key)
            held = memory[device]
            if change > 0:
                first = self._first_within_peak(held, peaks[device], change, candidates, first, last, current)
                if first == last:
                    continue
            target = candidates.pop(first)
            bisect.insort(candidates, current)
            row = self.occupant[device]
            row[current] = None
            self._place(row, key, target)
            held[target:current] += change

    @staticmethod
    def _first_within_peak(
        held: np.ndarray, peak: float, change: float, candidates: list[int], first: int, last: int, current: int
    ) -> int:
        """The first index in candidates[first:last] whose slot lets an F move there without passing `peak`.

        Moving an F earlier holds its activation during every slot it skips. The later the slot, the
        fewer slots skipped, so the feasible candidates are a suffix: found by bisection. `last` if none.
        """
        if not fits(held[candidates[last - 1] : current].max() + change, peak):
            return last
        last -= 1
        if fits(held[candidates[first] : current].max() + change, peak):  # the common case: no bisection
            return first
        while first < last:
            middle = (first + last) // 2
            if fits(held[candidates[middle] : current].max() + change, peak):
                last = middle
            else:
                first = middle + 1
        return first

    def _memory(self, row: list[OpKey | None]) -> np.ndarray:
        """Memory held after each slot of a device."""
        import numpy as np  # here: the command line's help and refusals start without it

        return np.cumsum([0.0 if key is None else self.delta(key) for key in row])

    def orders(self) -> Orders:
        return [[key for key in row if key is not None] for row in self.occupant]


def v_requirement(instance: Instance) -> str | None:
    return first_unmet(instance, needs_vshape, needs_split_backward)
