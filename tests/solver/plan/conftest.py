"""A tiny plan: 8 layers on 4 GPUs, global batch 4, no tensor parallelism (7 configurations; CP-SAT proves
each in a second)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from pipesat.models.plan_result import ConfigResult, Outcome, PlanResult
from pipesat.solver.plan.predict import parse_configuration, predict
from pipesat.solver.plan.spec import PlanSpec, spec_from_dict

TINY: dict[str, Any] = {
    "model": {"layers": 8, "hidden": 512, "heads": 8, "seq_len": 512, "vocab": 1000},
    "cluster": {"gpus": 4, "gpu_memory": "2GiB", "tflops": 100, "efficiency": 0.5, "bandwidth": 10, "latency": 10},
    "training": {"global_batch": 4, "tensor_parallel": [1]},
}


def tiny(**sections: dict[str, Any]) -> PlanSpec:
    """The tiny spec with keys of `sections` replaced."""
    data = {name: dict(keys) for name, keys in TINY.items()}
    for name, keys in sections.items():
        data[name].update(keys)
    return spec_from_dict(data)


@pytest.fixture
def tiny_spec() -> PlanSpec:
    return tiny()


MOE = {"experts": 4, "top_k": 2, "expert_ffn_hidden": 256}
"""The tiny model's layers as mixtures of 4 experts, each token to 2 of them."""


CURRENT = "t1 p2 d2 b1 m2 1f1b"
"""A current run of the tiny spec (`training.current`)."""


def rows(spec: PlanSpec, iterations: dict[str, float]) -> PlanResult:
    """A plan whose rows are the configurations written as keys, each timed as its value (ms), ranked."""
    results = []
    for text, ms in sorted(iterations.items(), key=lambda item: item[1]):
        config, schedule = parse_configuration(text)
        measure = dataclasses.replace(predict(spec, config, schedule).measure, iteration_ms=ms)
        results.append(ConfigResult(config, Outcome.SOLVED, measure, made_by="1f1b"))
    unassessed = parse_configuration("t1 p1 d4 b1 m1")[0]
    return PlanResult([*results, ConfigResult(unassessed, Outcome.PRUNED)], best_schedule=None)
