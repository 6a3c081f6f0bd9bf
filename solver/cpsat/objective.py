"""The CP-SAT model's objective: the time objective's definition, its cap, and what is minimised.

The makespan is at least the end of every last op; the max span at least each device's last end
less its first start. With symmetry breaking only the last microbatch's ops can end last (and the
first's start first), so only those are linked. Minimising memory minimises the shared capacity of
every device's cumulative, with the time objective capped when a cap is given.
"""

from __future__ import annotations

from ortools.sat.python import cp_model

from pipesat.models import Kind, Objective, last_kind
from pipesat.solver.cpsat.data import ModelData
from pipesat.solver.cpsat.scale import to_ticks
from pipesat.solver.cpsat.variables import ModelVariables


def add_time_objective(model: cp_model.CpModel, data: ModelData, variables: ModelVariables) -> None:
    """Tie `variables.time_objective` to the makespan or the max span."""
    if data.objective == Objective.MAKESPAN:
        _add_makespan(model, data, variables)
    else:
        _add_max_span(model, data, variables)


def add_time_cap(model: cp_model.CpModel, data: ModelData, variables: ModelVariables) -> None:
    """The time objective at most `data.time_cap` (instance units), when given."""
    if data.time_cap is not None:
        model.add(variables.time_objective <= to_ticks(data.time_cap, data.scale.time))


def set_minimized(model: cp_model.CpModel, variables: ModelVariables) -> None:
    """Minimise the capacity when minimising memory, else the time objective."""
    model.minimize(variables.minimized)


def _add_makespan(model: cp_model.CpModel, data: ModelData, variables: ModelVariables) -> None:
    instance = data.instance
    last_only = data.symmetry_breaking
    split = data.split_backward
    sink_kind = last_kind(split)
    for key in data.keys:
        kind, stage, j = key
        last = instance.microbatches_at(stage)[-1]
        if kind == sink_kind and (split or stage == instance.route_at(stage).start) and (not last_only or j == last):
            model.add(variables.time_objective >= variables.ends[key])


def _add_max_span(model: cp_model.CpModel, data: ModelData, variables: ModelVariables) -> None:
    instance = data.instance
    last_only = data.symmetry_breaking
    closing_kind = last_kind(data.split_backward)
    for d in range(instance.num_devices):
        # The first op on d is a forward of its first stage on a route, the last a W (or a fused B).
        first_stages = {on_route[0] for on_route in instance.route_stages(d)}
        on_device = data.on_device(d)
        openers = [
            variables.starts[k]
            for k in on_device
            if k.kind == Kind.F
            and k.stage in first_stages
            and (not last_only or k.microbatch == instance.microbatches_at(k.stage).start)
        ]
        closers = [
            variables.ends[k]
            for k in on_device
            if k.kind == closing_kind and (not last_only or k.microbatch == instance.microbatches_at(k.stage)[-1])
        ]
        model.add_min_equality(variables.first[d], openers)
        model.add_max_equality(variables.last[d], closers)
        model.add(variables.time_objective >= variables.last[d] - variables.first[d])
