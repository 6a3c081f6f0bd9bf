"""A tiny plan: 8 layers on 4 GPUs, global batch 4, no tensor parallelism (7 configurations; CP-SAT proves
each in a second)."""

from __future__ import annotations

from typing import Any

import pytest

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
