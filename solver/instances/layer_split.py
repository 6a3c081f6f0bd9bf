"""The layers per stage: an even split over the p·v stages, or an explicit count a stage, checked (a
balanced split is `solver.instances.layer_balance`'s).
"""

from __future__ import annotations

from pipesat.models import InstanceError
from pipesat.solver.instances.description import Pipeline, Transformer


def even_split(model: Transformer, pipeline: Pipeline, remedy: str = "") -> tuple[int, ...]:
    """The layers split evenly over the stages; an error saying `remedy` (by default: set
    `pipeline.balance` or give `pipeline.layers_per_stage`) when they do not divide."""
    num_stages = pipeline.devices * pipeline.chunks
    if model.layers % num_stages:
        remedy = remedy or (
            f"set pipeline.balance, or give pipeline.layers_per_stage with {num_stages} counts summing to {model.layers}"
        )
        raise InstanceError(
            f"{model.layers} layers do not split evenly over {pipeline.devices} x {pipeline.chunks} = "
            f"{num_stages} stages; {remedy}"
        )
    return (model.layers // num_stages,) * num_stages


def layer_split(model: Transformer, pipeline: Pipeline) -> tuple[int, ...]:
    """Layers per stage: the explicit split when given (checked), else an even split."""
    if pipeline.layers_per_stage is None:
        return even_split(model, pipeline)
    return check_split(model, pipeline, pipeline.layers_per_stage)


def check_split(model: Transformer, pipeline: Pipeline, split: tuple[int, ...]) -> tuple[int, ...]:
    """An explicit split, checked: one count per stage (each a whole number, as its key says), summing
    to the layers."""
    num_stages = pipeline.devices * pipeline.chunks
    if len(split) != num_stages:
        raise InstanceError(
            f"layers per stage lists {len(split)} counts but there are {pipeline.devices} x {pipeline.chunks} = "
            f"{num_stages} stages; give one count per stage"
        )
    if sum(split) != model.layers:
        raise InstanceError(
            f"layers per stage sum to {sum(split)} but the model has {model.layers} layers; make them add up"
        )
    return tuple(split)
