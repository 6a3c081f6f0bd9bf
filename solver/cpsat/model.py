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

from pipesat.models import Instance, Objective, OpKey
from pipesat.solver.cpsat.constraints import (
    add_memory_limits,
    add_memory_precedences,
    add_no_overlaps,
    add_precedences,
    add_symmetry_breaking,
)
from pipesat.solver.cpsat.data import ModelData, model_data
from pipesat.solver.cpsat.objective import add_time_cap, add_time_objective, set_minimized
from pipesat.solver.cpsat.variables import ModelVariables, make_variables


@dataclass(frozen=True)
class PipelineModel:
    """The CP-SAT model of an instance: what it was built from, the model and its variables."""

    data: ModelData
    cp_model: cp_model.CpModel
    variables: ModelVariables

    def orders(self, value: Callable[[IntVar], int]) -> list[list[OpKey]]:
        """Per-device op orders of a solution (`value` reads a variable, e.g. `solver.value`)."""
        starts = {key: value(var) for key, var in self.variables.starts.items()}
        return orders_from_starts(self.data.instance, starts, self.data.durations)


def build_model(
    instance: Instance,
    objective: Objective = Objective.MAKESPAN,
    split_backward: bool = False,
    symmetry_breaking: bool = True,
    minimize_memory: bool = False,
    time_cap: float | None = None,
) -> PipelineModel:
    """The model of `instance` minimising the time `objective` (makespan or max span) under its
    memory limit, or with `minimize_memory` the memory capacity with the time objective at most
    `time_cap` (instance units) when given."""
    data = model_data(instance, objective, split_backward, symmetry_breaking, minimize_memory, time_cap)
    model = cp_model.CpModel()
    variables = make_variables(model, data)
    add_precedences(model, data, variables)
    if data.symmetry_breaking:
        add_symmetry_breaking(model, data, variables)
    add_no_overlaps(model, data, variables)
    if data.memory_limited:
        add_memory_limits(model, data, variables)
        if data.symmetry_breaking and not data.minimize_memory:
            add_memory_precedences(model, data, variables)
    add_time_objective(model, data, variables)
    add_time_cap(model, data, variables)
    set_minimized(model, variables)
    return PipelineModel(data, model, variables)


def orders_from_starts(
    instance: Instance, starts: Mapping[OpKey, int | float], duration: Mapping[OpKey, int | float]
) -> list[list[OpKey]]:
    """Per-device orders by start, then end (a zero-length W goes before an op starting with it)."""
    orders: list[list[OpKey]] = [[] for _ in range(instance.num_devices)]
    for key in sorted(starts, key=lambda k: (starts[k], starts[k] + duration[k])):
        orders[instance.placement[key.stage]].append(key)
    return orders
