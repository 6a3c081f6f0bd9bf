"""DualPipeV (DeepSeek): the V-shaped half of DualPipe, whose steady state runs overlapped pairs.

Rank r of p holds stage r (chunk 0, on the way down) and stage 2p-1-r (chunk 1, on the way back).
Its order, in eight phases (DeepSeek's DualPipeV, as torch's `ScheduleDualPipeV` also runs it):

1. 2(p-r-1) forwards of chunk 0;
2. r+1 times: a forward of chunk 0, a forward of chunk 1;
3. p-r-1 times: a backward of chunk 1 with its W put off, a put-off W, a forward of chunk 1;
4. m-2p+r+1 times: a pair (forward of chunk 0 with the whole backward of chunk 1), then a pair
   (forward of chunk 1 with the whole backward of chunk 0); on the last rank the first of these
   runs its forward and backward apart;
5. p-r-1 times: a whole backward of chunk 1, then a pair (forward of chunk 1, backward of chunk 0);
6. r+1 times: a backward of chunk 1, a backward of chunk 0, each whole until halfway, then with its
   W put off (from the chunk-1 backward on odd ranks, from the chunk-0 one on even ranks);
7. p-r-1 times: a put-off W, a backward of chunk 0 with its W put off;
8. the remaining put-off Ws, first put off first.

Microbatches go in order within each chunk and kind. A pair's backward is the whole backward (its W
inside). Without weight times (a fused backward) nothing is put off. The order needs m >= 2p.
"""

from __future__ import annotations

from collections import deque

from pipesat.models import Instance, Kind, OpKey, Pair, Step
from pipesat.solver.heuristics.heuristic import StepOrders
from pipesat.solver.heuristics.requirements import first_unmet, needs_bidirectional, needs_vshape


class _Rank:
    """One rank's order as it is written, with the next microbatch of each (kind, chunk)."""

    def __init__(self, stages: tuple[int, int], first: tuple[int, int], split: bool) -> None:
        self.stages = stages
        self.split = split
        self.next = {(kind, chunk): first[chunk] for kind in (Kind.F, Kind.B) for chunk in (0, 1)}
        self.put_off: deque[OpKey] = deque()
        self.order: list[Step] = []

    def _take(self, kind: Kind, chunk: int) -> OpKey:
        microbatch = self.next[(kind, chunk)]
        self.next[(kind, chunk)] += 1
        return OpKey(kind, self.stages[chunk], microbatch)

    def forward(self, chunk: int) -> None:
        self.order.append(self._take(Kind.F, chunk))

    def backward(self, chunk: int, put_off_weight: bool = False) -> None:
        key = self._take(Kind.B, chunk)
        self.order.append(key)
        if self.split:
            weight = key._replace(kind=Kind.W)
            if put_off_weight:
                self.put_off.append(weight)
            else:
                self.order.append(weight)

    def weight(self) -> None:
        if self.put_off:
            self.order.append(self.put_off.popleft())

    def pair(self, forward_chunk: int) -> None:
        """A forward of `forward_chunk` with the whole backward of the other chunk."""
        forward = self._take(Kind.F, forward_chunk)
        backward = self._take(Kind.B, 1 - forward_chunk)
        self.order.append(Pair(forward, backward, with_weight=self.split))


def _eight_phases(rank: _Rank, p: int, r: int, m: int) -> list[Step]:
    """The eight phases (module notes) of rank `r` of a V of `p` ranks with `m` microbatches each way."""
    for _ in range(2 * (p - r - 1)):
        rank.forward(0)
    for _ in range(r + 1):
        rank.forward(0)
        rank.forward(1)
    for _ in range(p - r - 1):
        rank.backward(1, put_off_weight=True)
        rank.weight()
        rank.forward(1)
    for i in range(m - 2 * p + r + 1):
        if i == 0 and r == p - 1:
            rank.forward(0)
            rank.backward(1)
        else:
            rank.pair(0)
        rank.pair(1)
    for _ in range(p - r - 1):
        rank.backward(1)
        rank.pair(1)
    put_off = False
    for i in range(r + 1):
        put_off = put_off or (i == (r + 1) // 2 and r % 2 == 1)
        rank.backward(1, put_off)
        put_off = put_off or (i == (r + 1) // 2 and r % 2 == 0)
        rank.backward(0, put_off)
    for _ in range(p - r - 1):
        rank.weight()
        rank.backward(0, put_off_weight=True)
    while rank.put_off:
        rank.weight()
    return rank.order


def dual_pipe_v_orders(instance: Instance) -> StepOrders:
    p, m, split = instance.num_devices, instance.num_microbatches, instance.split_backward
    return [_eight_phases(_Rank((r, 2 * p - 1 - r), (0, 0), split), p, r, m) for r in range(p)]


def dual_pipe_orders(instance: Instance) -> StepOrders:
    """DualPipe: rank r of P runs the order of rank h = min(r, P-1-r) of a V of P/2 ranks, with half
    the microbatches each way. Its chunk 0 is the copy it meets h stages from the start (the first
    copy's stage r on the first half of the ranks, the replica's stage 2P-1-r on the second), its
    chunk 1 the other, whose microbatches reach it P-1-h stages from their start."""
    p, m, split = instance.num_devices, instance.num_microbatches, instance.split_backward
    half = m // 2
    orders = []
    for r in range(p):
        down, up = (r, 0), (2 * p - 1 - r, half)  # (stage, its first microbatch) of each copy
        near, far = (down, up) if r < p // 2 else (up, down)
        rank = _Rank((near[0], far[0]), (near[1], far[1]), split)
        orders.append(_eight_phases(rank, p // 2, min(r, p - 1 - r), half))
    return orders


def dual_pipe_v_requirement(instance: Instance) -> str | None:
    return first_unmet(instance, needs_vshape, _needs_two_microbatches_per_device)


def dual_pipe_requirement(instance: Instance) -> str | None:
    return first_unmet(instance, needs_bidirectional, _needs_even_devices, _needs_two_microbatches_per_device)


def _needs_two_microbatches_per_device(instance: Instance) -> str | None:
    if instance.num_microbatches < 2 * instance.num_devices:
        each_way = ", p each way" if instance.bidirectional else ""
        return f"needs at least 2p = {2 * instance.num_devices} microbatches{each_way}"
    return None


def _needs_even_devices(instance: Instance) -> str | None:
    if instance.num_devices % 2:
        return f"needs an even number of devices (got {instance.num_devices}): its ranks pair up from both ends"
    return None
