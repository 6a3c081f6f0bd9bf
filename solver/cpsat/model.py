"""The CP-SAT formulation of an instance, built in separate steps over explicit containers.

`ModelData` (the instance in ticks, `solver.cpsat.scale`), then every variable (`variables`), then
the constraints (`constraints`), then the objective (`objective`). Each step reads only the data and
the variables, so the steps do not depend on one another; the order below fixes only the order of
the constraints in the model.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from ortools.sat.python import cp_model
from ortools.sat.python.cp_model import IntVar

from pipesat.models import Instance, Kind, OpKey, Pair, Step
from pipesat.solver.cpsat.constraints import (
    add_memory_limits,
    add_memory_precedences,
    add_no_overlaps,
    add_pairs,
    add_precedences,
    add_symmetry_breaking,
)
from pipesat.solver.cpsat.data import ModelData
from pipesat.solver.cpsat.objective import add_time_cap, add_time_objective, set_minimized
from pipesat.solver.cpsat.offload import add_offloads, transfer_plan
from pipesat.solver.cpsat.offload import watched as offload_watched
from pipesat.solver.cpsat.variables import ModelVariables, make_variables
from pipesat.solver.evaluate.simulator import TransferPlan


@dataclass(frozen=True)
class PipelineModel:
    """The CP-SAT model of an instance: what it was built from, the model and its variables."""

    data: ModelData
    cp_model: cp_model.CpModel
    variables: ModelVariables

    def orders(self, value: Callable[[IntVar], int]) -> list[list[Step]]:
        """Per-device orders of a solution (`value` reads a variable, e.g. `solver.value`)."""
        starts = {key: value(var) for key, var in self.variables.starts.items()}
        return orders_from_starts(self.data.instance, starts, self.data.durations)

    def watched(self) -> list[IntVar]:
        """The variables a solution is read back from: every op's start, then the offloads' (if any)."""
        return [*self.variables.starts.values(), *offload_watched(self.variables)]

    def read_back(self, values: list[int]) -> tuple[list[list[Step]], TransferPlan | None]:
        """A solution's per-device orders and, with offload, its transfers, from the `watched` values."""
        starts = dict(zip(self.variables.starts, values, strict=False))
        orders = orders_from_starts(self.data.instance, starts, self.data.durations)
        plan = transfer_plan(self.data, starts, values[len(starts) :]) if self.data.offload else None
        return orders, plan


def build_model(data: ModelData) -> PipelineModel:
    """The model of `data` (`model_data`): its time objective (makespan or max span) minimised under the
    memory limit, or with `minimize_memory` the memory capacity with the time objective at most
    `time_cap` (instance units) when given; `tuning`'s model fields choose its redundant constraints."""
    model = cp_model.CpModel()
    variables = make_variables(model, data)
    add_precedences(model, data, variables)
    add_pairs(model, data, variables)
    if data.symmetry_breaking:
        add_symmetry_breaking(model, data, variables)
    add_no_overlaps(model, data, variables)
    if data.offload:
        add_offloads(model, data, variables)  # the memory limit too, with the offloads' memory
    elif data.memory_limited:
        add_memory_limits(model, data, variables)
        if data.symmetry_breaking and not data.minimize_memory:
            add_memory_precedences(model, data, variables)
    add_time_objective(model, data, variables)
    add_time_cap(model, data, variables)
    set_minimized(model, variables)
    return PipelineModel(data, model, variables)


def orders_from_starts(
    instance: Instance, starts: Mapping[OpKey, int | float], duration: Mapping[OpKey, int | float]
) -> list[list[Step]]:
    """Per-device orders by start, then end (a zero-length W goes before an op starting with it).

    An F and a B that start together on a device run as an overlapped pair (two ops of positive
    length start together on a device in no other way), with the B's W when it starts with them.
    """
    together: dict[tuple[int, int | float], list[OpKey]] = {}
    for key in sorted(starts, key=lambda k: (starts[k], starts[k] + duration[k])):
        together.setdefault((instance.placement[key.stage], starts[key]), []).append(key)
    orders: list[list[Step]] = [[] for _ in range(instance.num_devices)]
    for (device, _), keys in together.items():
        orders[device].extend(_paired(keys))
    return orders


def _paired(keys: list[OpKey]) -> list[Step]:
    """Ops starting together on one device: an F and a B among them (with that B's W) as a pair."""
    forwards = [key for key in keys if key.kind == Kind.F]
    backwards = [key for key in keys if key.kind == Kind.B]
    if len(forwards) != 1 or len(backwards) != 1:
        return list(keys)
    pair = Pair(
        forwards[0], backwards[0], with_weight=OpKey(Kind.W, backwards[0].stage, backwards[0].microbatch) in keys
    )
    rest = [key for key in keys if key not in pair.op_keys()]
    return [*rest, pair]
