"""What the CP-SAT formulation is built from: the instance in ticks, its ops, and the modelling choices."""

from __future__ import annotations

import dataclasses
import functools
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
from pipesat.models.ops import offload_amount, transfer_time
from pipesat.models.tuning import DEFAULT_TUNING, Tuning
from pipesat.solver.cpsat.pairs import pair_candidates
from pipesat.solver.cpsat.scale import TickScale, choose_scale, scaled_instance, to_ticks

# CP-SAT's integers: every time in ticks stays below this, where doubles still hold whole numbers exactly.
MAX_TICKS = 2**53
# CP-SAT reports its objective bound as a double that can sit just above the whole number it stands for.
SOLVER_BOUND_NOISE = 1e-6


@dataclass(frozen=True, kw_only=True)
class ModelData:
    """The instance (its own units, for placement and the read-back) and the same in ticks, the ops
    with their durations in ticks, and what the model minimises.

    `objective` is the time objective (makespan or max span). With `minimize_memory` the model
    minimises the memory capacity instead, with the time objective capped at `time_cap` (instance
    units) when given. `horizon` bounds every time variable (ticks). `pairs` are the overlapped
    pairs the model may run, with their lengths in ticks (`solver.cpsat.pairs`; none without
    communication). `tuning` holds the modelling choices (`Tuning`'s model fields).
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
    tuning: Tuning = DEFAULT_TUNING
    offload_ticks: dict[int, int] = dataclasses.field(default_factory=dict)
    """Per stage the model may offload (docs/offload.md: with `offload`), its transfer's length in ticks."""

    @property
    def offload(self) -> bool:
        """Whether the model decides offloads (`solver.cpsat.offload`)."""
        return bool(self.offload_ticks)

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
        """A bound CP-SAT proved on the minimised variable, in instance units: rounded up to the least
        value an optimum can take (`least_value_from`).

        Flooring times keeps the model a relaxation; only a fractional min span loses up to a tick.
        """
        loose = 0 if self.minimize_memory or self.objective == Objective.MAKESPAN or self.scale.exact_span else 1
        return (self.proven_ticks(ticks) - loose) / self.ticks_per_unit

    def proven_ticks(self, ticks: float) -> int:
        """A bound CP-SAT reported (a double, in ticks) as the least whole value an optimum can take."""
        return self.least_value_from(math.ceil(ticks - SOLVER_BOUND_NOISE))

    def least_value_from(self, ticks: int) -> int:
        """The least value of at least `ticks` that the model's optimum can take (ticks; the memory as it is).

        Why: with its order fixed, a schedule's least makespan is a longest path of the model's times
        (ops, pairs, p2p), so a multiple of their greatest common divisor g; its least max span is the
        largest mean of a cycle of its constraints, a sum W of those times over the k devices whose
        span closes the cycle, k at most p (`solver.cpsat.scale`), rounded up to whole ticks. So no
        optimum lies between `ticks` and the least such value above it (a path may pass host-link
        transfers too, with offload: their times count among the model's), and a bound CP-SAT proves or
        a probe it refutes rises to that value (V p = 3 with times in quarters: the span's ticks are
        1/24, and above 128.5 the next such value is 128.5833).
        """
        step = self._time_step
        if not self.tuning.value_grid or self.minimize_memory or step == 0:
            return ticks
        sizes = range(1, self.instance.num_devices + 1) if self.objective == Objective.SPAN else (1,)
        return min(_ceil_div(_ceil_div(ticks * k, step) * step, k) for k in sizes)

    @functools.cached_property
    def _time_step(self) -> int:
        """The greatest common divisor of every time in the model (ticks; 0 when all are 0)."""
        times = (*self.durations.values(), *self.pairs.values(), *self.offload_ticks.values())
        return math.gcd(*times, int(self.tick_instance.p2p_time))


def model_data(
    instance: Instance,
    *,
    objective: Objective = Objective.MAKESPAN,
    split_backward: bool = False,
    symmetry_breaking: bool = True,
    minimize_memory: bool = False,
    time_cap: float | None = None,
    tuning: Tuning = DEFAULT_TUNING,
    offload: bool = False,
) -> ModelData:
    """The instance scaled to ticks for the time `objective`, with its ops and the horizon (`ModelData`).

    With `offload` (an instance with a host link) the model decides offloads too; it then breaks no
    symmetry (docs/offload.md says why)."""
    if objective not in TIME_OBJECTIVES:
        raise ValueError(f"the model's time objective is makespan or span, not {objective!r}")
    scale = choose_scale(instance, objective, offload)
    ticks = scaled_instance(instance, scale)
    keys = expected_op_keys(instance, split_backward)
    durations = {key: int(op_duration(ticks, key.kind, key.stage, split_backward)) for key in keys}
    offload_ticks = {}
    if offload:
        symmetry_breaking = False
        offload_ticks = {
            s: to_ticks(transfer_time(instance, s), scale.time)
            for s in range(instance.num_stages)
            if offload_amount(instance, s) > 0
        }
    transfers = 2 * instance.stage_microbatches * sum(offload_ticks.values())
    horizon = _horizon(ticks, objective, keys, durations) + transfers
    if horizon > MAX_TICKS:
        raise InstanceError(
            f"the times span too many orders of magnitude for CP-SAT's integers ({horizon:.3g} ticks of "
            f"1/{scale.time:g} unit); round the shortest times up or give them in larger units"
        )
    return ModelData(
        instance=instance,
        scale=scale,
        tick_instance=ticks,
        objective=objective,
        split_backward=split_backward,
        symmetry_breaking=symmetry_breaking,
        minimize_memory=minimize_memory,
        time_cap=time_cap,
        keys=keys,
        durations=durations,
        horizon=horizon,
        pairs=pair_candidates(instance, ticks, scale, split_backward, symmetry_breaking),
        tuning=tuning,
        offload_ticks=offload_ticks,
    )


def _ceil_div(numerator: int, denominator: int) -> int:
    return -(-numerator // denominator)


def _horizon(ticks: Instance, objective: Objective, keys: list[OpKey], durations: dict[OpKey, int]) -> int:
    """Ticks within which an optimal schedule fits.

    As soon as possible, some op runs or some p2p transfer is under way at every moment, so any
    order's makespan is at most the total op time plus one p2p per dependency. A min-span timing
    can be packed with no moment where every device is idle, so it fits in p such makespans.
    """
    total = sum(durations.values()) + int(ticks.p2p_time) * len(keys)
    return total * (ticks.num_devices + 1 if objective == Objective.SPAN else 1)
