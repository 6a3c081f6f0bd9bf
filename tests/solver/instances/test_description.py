"""The description's records: each key is checked alone when its record is made."""

from __future__ import annotations

import dataclasses
import math

import pytest

from pipesat.models import InstanceError
from pipesat.solver.instances.description import Pipeline, Training
from tests.solver.instances.transformers import A100, GPT_1_5B


@pytest.mark.parametrize(
    ("record", "changes", "message"),
    [
        (GPT_1_5B, {"heads": 0}, "heads must be at least 1, got 0"),
        (GPT_1_5B, {"vocab": -1}, "vocab must be at least 0, got -1"),
        (GPT_1_5B, {"layers": 2.0}, "layers must be a whole number, got 2.0"),
        (Training(), {"tensor_parallel": 0}, "tensor_parallel must be at least 1, got 0"),
        (Training(), {"recompute": "some"}, "recompute must be one of none, selective, full, got 'some'"),
        (Training(), {"bytes_per_value": 0}, "bytes_per_value must be a positive number, got 0"),
        (A100, {"tflops": -1}, "tflops must be a positive number, got -1"),
        (A100, {"efficiency": 1.5}, "efficiency must be in (0, 1] (the fraction of peak throughput reached), got 1.5"),
        (A100, {"latency": -1}, "latency must be a non-negative number, got -1"),
        (A100, {"bandwidth": math.inf}, "bandwidth must be a number, got inf"),
        (Pipeline(8, 24), {"devices": 0}, "devices must be at least 1, got 0"),
        (
            Pipeline(8, 24),
            {"layers_per_stage": (3, -1)},
            "layers_per_stage must be whole numbers of at least 0, got [3, -1]",
        ),
    ],
)
def test_a_bad_key_is_refused_when_its_record_is_made(record: object, changes: dict, message: str) -> None:
    with pytest.raises(InstanceError) as error:
        dataclasses.replace(record, **changes)
    assert str(error.value) == message
