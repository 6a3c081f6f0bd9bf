"""The memory estimate's stated error, and what it makes of a configuration: fits, tight or refused.

A configuration's memory per GPU (model state plus its schedule's peak activations, `measure`) is an
estimate. Held against published measured peaks (`benchmarks/bench_memory.py`, its results in
`benchmarks/results/memory.txt`) it is within `MEMORY_ERROR` of the measured value on most runs; the
number is that benchmark's, one for every run, not tuned to any. So the plan refuses a layout only
when it is above the memory a GPU may use (the GPU's less the reserve, `usable`) by more than the
error:

- **fits**: the layout fits each device's activation budget (`usable` less its model state) with
  its model state and at least one microbatch through its stages: searched under those budgets, its
  schedule's memory is within `usable`.
- **tight**: it does not, but would if the estimate were `MEMORY_ERROR` too high:
  `estimate · (1 - MEMORY_ERROR) <= usable` for its model state and least activations. It is ranked,
  and marked: it may fit, check it on the GPU. Its schedule is searched under **stretched budgets**:
  each device may hold `usable / (1 - MEMORY_ERROR)` less its model state in activations, the largest
  estimate whose low end still fits. The limit is a limit: the schedule found is validated against
  it, and its memory is shown as it is, above `usable`. The budget is not stretched further, nor for
  a layout that fits, so a tight row is never given memory a fitting one is denied.
- **refused**: above `usable` by more than the error even with one microbatch in flight.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from pipesat.models import Instance, InstanceError
from pipesat.models.plan_result import MEMORY_ERROR, MemoryFit
from pipesat.models.tolerance import fits
from pipesat.models.units import MIB, memory_text
from pipesat.solver.instances.calibration import Calibration
from pipesat.solver.instances.from_model import Derivation, Description, derive
from pipesat.solver.instances.model_state import reserve_bytes
from pipesat.solver.plan.offload import least_limits, linked


@dataclass(frozen=True)
class Fitted:
    """A layout's derivation under the budgets it is searched with (None when refused), how it stands
    (`fit`), and why it was refused or is tight ('' when it fits)."""

    derivation: Derivation | None
    fit: MemoryFit
    why: str = ""


def stretched(described: Description) -> Description:
    """The description whose GPU may hold `usable / (1 - MEMORY_ERROR)` besides the same reserve: the
    budgets of a tight layout (module notes)."""
    hardware = described.hardware
    reserve = reserve_bytes(hardware)
    usable = (hardware.gpu_memory - reserve) / (1 - MEMORY_ERROR)
    # The reserve as an amount (bytes, >= 1) so that it stays the same whatever the GPU's memory.
    wider = dataclasses.replace(hardware, gpu_memory=usable + reserve, reserve=max(reserve, 1.0))
    return dataclasses.replace(described, hardware=wider)


def fit_layout(
    described: Description, name: str = "", calibration: Calibration | None = None, host_link: float | None = None
) -> Fitted:
    """The layout fitted to its GPUs' memory (module notes). A refusal of the cost model that is not
    about memory (a shape it does not take) is raised, as `derive` raises it. A layout that fits is
    derived once, as before the error bar; one that does not, once more without a GPU memory (when
    its model state does not fit) and, when tight, with the stretched budgets. With a `host_link`
    (instance units) each derivation's instance has it, and its activations may be offloaded over it
    (`offload.least_limits`)."""
    try:
        plain = linked(derive(described, name, calibration), host_link)
        why = activation_refusal(plain.instance)
        if not why:
            return Fitted(plain, MemoryFit.FITS)
    except InstanceError as error:
        if described.hardware.gpu_memory <= 0:
            raise
        plain = linked(derive(_unbounded(described), name, calibration), host_link)  # raises on a refused shape
        why = f"model state does not fit: {error}"
    if _within_error(plain, described):
        wider = linked(derive(stretched(described), name, calibration), host_link)
        if not activation_refusal(wider.instance):
            return Fitted(wider, MemoryFit.TIGHT, why)
    return Fitted(None, MemoryFit.REFUSED, f"{why}, {beyond_text()}")


def _within_error(derivation: Derivation, described: Description) -> bool:
    """Whether every device's model state and least activations (one microbatch through its stages)
    are within the usable memory stretched by the error: `need · (1 - MEMORY_ERROR) <= usable`."""
    hardware = described.hardware
    usable = hardware.gpu_memory - reserve_bytes(hardware)
    least = least_limits(derivation.instance)
    return all(
        fits(state.bytes + amount * MIB, usable / (1 - MEMORY_ERROR))
        for state, amount in zip(derivation.states, least, strict=True)
    )


def activation_refusal(instance: Instance) -> str:
    """Why no schedule of `instance` fits its budgets ('' when one may): a device whose smallest
    feasible activation limit, one microbatch through its stages (offloaded where the instance has a
    host link), exceeds its budget (exact)."""
    limits = instance.memory_limit or ()
    through = "offloaded" if instance.host_link_bandwidth is not None else "through its stages"
    for device, (least, limit) in enumerate(zip(least_limits(instance), limits, strict=True)):
        if not fits(least, limit):
            return (
                f"device {device} needs at least {memory_text(least, 'MiB')} of activations (one microbatch "
                f"{through}), its budget is {memory_text(limit, 'MiB')}"
            )
    return ""


def beyond_text() -> str:
    return f"beyond the memory estimate's {MEMORY_ERROR:.0%} error too"


def _unbounded(described: Description) -> Description:
    return dataclasses.replace(described, hardware=dataclasses.replace(described.hardware, gpu_memory=0.0))


def fit_of(memory: float, usable: float) -> MemoryFit:
    """How an estimate of `memory` (bytes) stands against `usable`: within it, above it by no more
    than the error, or beyond."""
    if memory <= usable:
        return MemoryFit.FITS
    return MemoryFit.TIGHT if memory * (1 - MEMORY_ERROR) <= usable else MemoryFit.REFUSED
