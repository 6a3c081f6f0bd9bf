"""Layers per stage chosen so that the slowest stage is as fast as it can be (`pipeline.balance`).

A stage's time is its F + B + W for one microbatch: its layers' times plus its extra, the
embedding's on the first stage (a lookup, which only the shape model times) and the head's and the
loss's on the last. The smallest achievable slowest-stage time T is one of the values k·layer +
extra_s; for each, in increasing order, a stage can take at most ⌊(T - extra_s) / layer⌋ layers,
and T is reachable once those capacities add up to the model's layers. Every stage keeps at least
one layer, but the first and the last may keep none when their extra takes time: so, as in Llama 3
405B's run (126 layers on 16 x 8 stages), the first and the last stage hold a layer fewer when the
embedding and the head are what they hold besides. The layers left over at the smallest T are
taken back one at a time from the first stages onward: under 1F1B-like schedules the first stages
hold the most microbatches in flight, so they are where fewer layers save the most memory.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from pipesat.models import InstanceError
from pipesat.solver.instances.cost_model import Cost, LayerCosts, embedding_cost, head_cost, layer_costs, stage_times
from pipesat.solver.instances.description import Hardware, Pipeline, Training, Transformer

# Stage times are sums of floats: a capacity within this fraction of a whole layer counts as that layer.
ROUNDING = 1e-9


@dataclass(frozen=True)
class StageLayers:
    """F + B + W of a stage's layers by their count: the first `costs.recomputed_count(count)` at
    `recomputed_ms` each, the rest at `kept_ms`."""

    recomputed_ms: float
    kept_ms: float
    costs: LayerCosts

    @classmethod
    def of(cls, model: Transformer, training: Training, hardware: Hardware, measured: Cost | None) -> StageLayers:
        """Of a mixture of experts every layer counts at a mixture-of-experts layer's cost."""
        costs = layer_costs(model, training, hardware, measured)
        kind = 1 if model.moe else 0
        return cls(_total(costs.recomputed[kind]), _total(costs.kept[kind]), costs)

    def ms(self, count: int) -> float:
        first = self.costs.recomputed_count(count)
        return first * self.recomputed_ms + (count - first) * self.kept_ms

    def most_within(self, budget: float, most: int) -> int:
        """The most layers (at most `most`) whose time is within `budget`; -1 when the budget is negative."""
        if budget < 0:
            return -1
        first = self.costs.recomputed_count(most)
        within = math.floor(budget / self.recomputed_ms + ROUNDING)
        if within < first:
            return within
        left = budget - first * self.recomputed_ms
        return min(most, first + math.floor(left / self.kept_ms + ROUNDING))


def balanced_split(
    model: Transformer, training: Training, hardware: Hardware, pipeline: Pipeline, layer_measured: Cost | None = None
) -> tuple[int, ...]:
    """The layers per stage that make the slowest stage's F + B + W smallest (see the module notes);
    a layer costs `layer_measured` when a calibration measured it, else the model's. Of a mixture of
    experts every layer counts at a mixture-of-experts layer's cost (a calibration measures dense
    layers; the leading dense ones cost less, so the first stages come out a little light)."""
    num_stages = pipeline.devices * pipeline.chunks
    layers = StageLayers.of(model, training, hardware, None if model.moe else layer_measured)
    extras = _extras(model, training, hardware, num_stages)
    least = [0 if s in (0, num_stages - 1) and extra > 0 else 1 for s, extra in enumerate(extras)]
    if sum(least) > model.layers:
        raise InstanceError(
            f"{model.layers} layers cannot give each of the {num_stages} stages one; use fewer devices or chunks"
        )
    targets = sorted({layers.ms(k) + extra for extra in set(extras) for k in range(model.layers + 1)})
    for target in targets:
        capacity = [layers.most_within(target - extra, model.layers) for extra in extras]
        if all(c >= m for c, m in zip(capacity, least, strict=True)) and sum(capacity) >= model.layers:
            return _give_back(capacity, least, sum(capacity) - model.layers)
    raise AssertionError("the largest target fits every layer on every stage")  # pragma: no cover


def slowest_stage_ms(split: tuple[int, ...], model: Transformer, training: Training, hardware: Hardware) -> float:
    """The slowest stage's F + B + W under `split`, in ms."""
    layers = StageLayers.of(model, training, hardware, None)
    extras = _extras(model, training, hardware, len(split))
    return max(layers.ms(count) + extra for count, extra in zip(split, extras, strict=True))


def _extras(model: Transformer, training: Training, hardware: Hardware, num_stages: int) -> list[float]:
    """Each stage's F + B + W besides its layers: the embedding's on the first, the head's on the last."""
    extras = [0.0] * num_stages
    extras[0] += _total(embedding_cost(model, training, hardware))
    if model.vocab > 0:
        extras[-1] += _total(head_cost(model, training, hardware))
    return extras


def _total(cost: Cost) -> float:
    return sum(stage_times(cost))


def _give_back(capacity: list[int], least: list[int], surplus: int) -> tuple[int, ...]:
    """Take `surplus` layers back one at a time, round after round from the first stage on."""
    counts = list(capacity)
    while surplus > 0:
        for s in range(len(counts)):
            if surplus > 0 and counts[s] > least[s]:
                counts[s] -= 1
                surplus -= 1
    return tuple(counts)
