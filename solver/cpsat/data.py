"""What the CP-SAT formulation is built from: the instance in ticks, its ops, and the modelling choices."""

from __future__ import annotations

import math
from dataclasses import dataclass

from pipesat.models import (
    TIME_OBJECTIVES,
    Instance,
    InstanceError,
    Objective,
    OpKey,
    Pair,
    expected_op_keys,
    op_duration,
)
from pipesat.solver.cpsat.pairs import pair_candidates
from pipesat.solver.cpsat.scale import TickScale, choose_scale, scaled_instance

# CP-SAT's integers: every time in ticks stays below this, where doubles still hold whole numbers exactly.
MAX_TICKS = 2**53
# CP-SAT reports its objective bound as a double that can sit just above the whole number it stands for.
SOLVER_BOUND_NOISE = 1e-6


@dataclass(frozen=True)
class ModelData:
    """The instance (its own units, for placement and the read-back) and the same in ticks, the ops
    with their durations in ticks, and what the model minimises.

    `objective` is the time objective (makespan or max span). With `minimize_memory` the model
    minimises the memory capacity instead, with the time objective capped at `time_cap` (instance
    units) when given. `horizon` bounds every time variable (ticks). `pairs` are the overlapped
    pairs the model may run, with their lengths in ticks (`solver.cpsat.pairs`; none without
    communication).
    """

    instance: Instance
    scale: TickScale
    tick_instance: Instance
    objective: Objective
    split_backward: bool
    symmetry_breaking: bool
    minimize_memory: bool
    time_cap: float | None
    keys: list[OpKey]
    durations: dict[OpKey, int]
    horizon: int
    pairs: dict[Pair, int]

    def on_device(self, device: int) -> list[OpKey]:
        """The ops that run on `device`, in `keys` order."""
        placement = self.instance.placement
        return [key for key in self.keys if placement[key.stage] == device]

    @property
    def memory_limited(self) -> bool:
        """Whether the model holds memory cumulatives: under a limit, or minimising the capacity."""
        return self.minimize_memory or self.tick_instance.memory_limit is not None

    @property
    def ticks_per_unit(self) -> int:
        """Ticks per instance unit of the minimised quantity (memory or time)."""
        return self.scale.memory if self.minimize_memory else self.scale.time

    def proven_bound(self, ticks: float) -> float:
        """A bound CP-SAT proved on the minimised variable, in instance units.

        Flooring times keeps the model a relaxation; only a fractional min span loses up to a tick.
        """
        loose = 0 if self.minimize_memory or self.objective == Objective.MAKESPAN or self.scale.exact_span else 1
        return (math.ceil(ticks - SOLVER_BOUND_NOISE) - loose) / self.ticks_per_unit


def model_data(
    instance: Instance,
    objective: Objective = Objective.MAKESPAN,
    split_backward: bool = False,
    symmetry_breaking: bool = True,
    minimize_memory: bool = False,
    time_cap: float | None = None,
) -> ModelData:
    """The instance scaled to ticks for the time `objective`, with its ops and the horizon."""
    if objective not in TIME_OBJECTIVES:
        raise ValueError(f"the model's time objective is makespan or span, not {objective!r}")
    scale = choose_scale(instance, objective)
    ticks = scaled_instance(instance, scale)
    keys = expected_op_keys(instance, split_backward)
    durations = {key: int(op_duration(ticks, key.kind, key.stage, split_backward)) for key in keys}
    horizon = _horizon(ticks, objective, keys, durations)
    if horizon > MAX_TICKS:
        raise InstanceError(
            f"the times span too many orders of magnitude for CP-SAT's integers ({horizon:.3g} ticks of "
            f"1/{scale.time:g} unit); round the shortest times up or give them in larger units"
        )
    return ModelData(
        instance,
        scale,
        ticks,
        objective,
        split_backward,
        symmetry_breaking,
        minimize_memory,
        time_cap,
        keys,
        durations,
        horizon,
        pair_candidates(instance, ticks, scale, split_backward, symmetry_breaking),
    )


def _horizon(ticks: Instance, objective: Objective, keys: list[OpKey], durations: dict[OpKey, int]) -> int:
    """Ticks within which an optimal schedule fits.

    As soon as possible, some op runs or some p2p transfer is under way at every moment, so any
    order's makespan is at most the total op time plus one p2p per dependency. A min-span timing
    can be packed with no moment where every device is idle, so it fits in p such makespans.
    """
    total = sum(durations.values()) + int(ticks.p2p_time) * len(keys)
    return total * (ticks.num_devices + 1 if objective == Objective.SPAN else 1)
