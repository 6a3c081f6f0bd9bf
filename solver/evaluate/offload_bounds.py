"""A lower bound on the makespan under a memory limit when activations may be offloaded over the host
link (docs/offload.md): the memory energy of `device_bounds`, less what offloads can save of it within
what the link can carry.

Per device d and makespan T: at no moment does d hold more than its limit, so the area of its held
memory over time is at most limit x T. Each (stage s, microbatch) of d holds, over time (F's start
to its B's end lasting L, at least the chain's round trip `until_b`):

- not offloaded: M_B for L, then M_W until its W ends: at least M_B·until_b + M_W·W (the energy of
  `device_bounds.memory_energy`);
- offloaded, moving f·M_B (`offload_fraction`) in a transfer of X each way: M_B from F's start to the
  offload's end (at least F + X: the offload starts after F ends), (1 - f)·M_B from then to the
  reload's start, and M_B again from the reload's start to B's end (at least X + B); so
  M_B·L - f·M_B·(L - F - 2X - B) + M_W·W, at least M_B·c + (1 - f)·M_B·(until_b - c) + M_W·W with
  c = F + 2X + B once L ≥ c (the order forces it).

So an offload saves at most f·M_B·(until_b - c) of the energy, and only when that is positive. Its
offloads run one at a time on the link's device-to-host direction, all within [0, T], so the
offloaded (stage, microbatch)s' X add up to at most T: the most energy offloads can save by T is
at most a fractional knapsack's (saving per unit of link time, at most m per stage), which grows
with T. The bound is the least T with limit x T + that saving ≥ the energy without offload,
found by bisection (the left side only grows with T).

It assumes nothing else about the order, so it holds beside the instance's bounds without a memory
limit (an offloading schedule's compute ops form a schedule without one), and the solve takes the
larger (`portfolio.Problem.lower_bound`).
"""

from __future__ import annotations

from pipesat.models import Instance, Kind, op_duration
from pipesat.models.ops import offload_amount, transfer_time
from pipesat.solver.evaluate.device_bounds import capacity_of, chain_offsets, memory_energy

BISECTIONS = 60
"""Halvings of the bracket on T: 2^-60 of the energy bound, far below the validator's tolerance."""


def offload_energy_bound(instance: Instance, split: bool) -> float:
    """The largest, over devices, of the least makespan whose memory area under the limit, with the
    most the host link can save by offloading, covers the device's energy (0 without a limit)."""
    offsets = chain_offsets(instance, split)
    return max((_device_bound(instance, split, d, offsets) for d in range(instance.num_devices)), default=0.0)


def _device_bound(instance: Instance, split: bool, device: int, offsets: dict[tuple[Kind, int], float]) -> float:
    capacity = capacity_of(instance, device)
    if capacity is None or capacity <= 0:
        return 0.0
    energy = memory_energy(instance, split, device, offsets)
    savings = _savings(instance, split, device, offsets)

    def covered(span: float) -> bool:
        return capacity * span + _most_saved(savings, span, instance.stage_microbatches) >= energy

    low, high = 0.0, energy / capacity
    for _ in range(BISECTIONS):
        middle = (low + high) / 2
        low, high = (low, middle) if covered(middle) else (middle, high)
    return low


def _savings(
    instance: Instance, split: bool, device: int, offsets: dict[tuple[Kind, int], float]
) -> list[tuple[float, float]]:
    """(energy saved, link time) of one offload of each of `device`'s stages that can save any (none
    without a host link), the best saving per unit of link time first (`_most_saved`'s order)."""
    if instance.host_link_bandwidth is None:
        return []
    found = []
    for s in instance.stages_of(device):
        backward = op_duration(instance, Kind.B, s, split)
        until_b = offsets[(Kind.B, s)] + backward - offsets[(Kind.F, s)]
        link = transfer_time(instance, s)
        held = op_duration(instance, Kind.F, s, split) + 2 * link + backward
        saved = offload_amount(instance, s) * (until_b - held)
        if saved > 0:
            found.append((saved, link))
    return sorted(found, key=lambda item: item[0] / item[1] if item[1] > 0 else float("inf"), reverse=True)


def _most_saved(savings: list[tuple[float, float]], span: float, per_stage: int) -> float:
    """The most energy offloads save with at most `span` of link time and `per_stage` offloads of
    each stage: the fractional knapsack over `savings`, taken in their order (best saving per unit of
    link time first)."""
    total, room = 0.0, span
    for saved, link in savings:
        count = float(per_stage) if link <= 0 else min(float(per_stage), room / link)
        total += count * saved
        room -= count * link
        if room <= 0:
            break
    return total
