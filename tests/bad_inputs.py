"""Malformed instances and the message each must give; shared by the model tests and the CLI tests."""

from __future__ import annotations

from typing import Any

import pytest

BASE: dict[str, Any] = {"num_devices": 2, "num_microbatches": 3}


def _case(case_id: str, message: str, **changes: Any) -> Any:
    return pytest.param({**BASE, **changes}, message, id=case_id)


BAD_INSTANCES = [
    _case("negative-time", "forward_times[1] = -1 must be positive", forward_times=[1, -1]),
    _case("zero-time", "backward_times[0] = 0 must be positive", backward_times=[0, 1]),
    _case("negative-scalar", "activation_memory = -2 must be non-negative", activation_memory=-2),
    _case("negative-p2p", "p2p_time must not be negative, got -0.5", p2p_time=-0.5),
    _case("negative-limit", "memory_limit must be positive, got -3", memory_limit=-3),
    _case("empty-list", "forward_times is an empty list; give 2 numbers, one per stage", forward_times=[]),
    _case("wrong-length", "backward_times has 3 values but there are 2 stages", backward_times=[1, 2, 3]),
    _case("wrong-length-chunks", "weight_times has 2 values but there are 4 stages", chunks=2, weight_times=[1, 1]),
    _case("nan", "forward_times[0] must be a finite number, got nan", forward_times=[float("nan"), 1]),
    _case("inf", "weight_times must be a finite number, got inf", weight_times=float("inf")),
    _case("nan-count", "num_devices must be a whole number, got nan", num_devices=float("nan")),
    _case("non-numeric", "forward_times[1] must be a number, got 'fast'", forward_times=[1, "fast"]),
    _case("non-numeric-scalar", "p2p_time must be a number, got [1]", p2p_time=[1]),
    _case("fractional-count", "num_microbatches must be a whole number, got 2.5", num_microbatches=2.5),
    _case(
        "unknown-placement", "unknown placement 'zigzag'; use one of linear, interleaved, vshape", placement="zigzag"
    ),
    _case("vshape-chunks-1", "placement 'vshape' needs chunks 2, got 1", placement="vshape"),
    _case("vshape-chunks-3", "placement 'vshape' needs chunks 2, got 3", placement="vshape", chunks=3),
    _case("linear-chunks-2", "placement 'linear' needs chunks 1, got 2", placement="linear", chunks=2),
    _case("placement-device", "placement[1] = 5 is not a device in 0..1", placement=[0, 5]),
    _case("placement-unbalanced", "placement puts 3 stages on device 0", placement=[0, 0, 0, 1]),
    _case(
        "placement-length",
        "placement lists 4 stages but num_devices x chunks = 2 x 1 = 2",
        placement=[0, 0, 1, 1],
        chunks=1,
    ),
    _case("p-zero", "num_devices must be at least 1, got 0", num_devices=0),
    _case("m-zero", "num_microbatches must be at least 1, got 0", num_microbatches=0),
    _case("m-negative", "num_microbatches must be at least 1, got -4", num_microbatches=-4),
    _case("chunks-zero", "chunks must be at least 1, got 0", chunks=0),
    _case("unknown-key", "unknown key 'forward_time'; did you mean 'forward_times'?", forward_time=[1, 1]),
    _case("unknown-alias-typo", "unknown key 'num_batchs'; did you mean 'num_batches'?", num_batchs=4),
    _case("alias-conflict", "'num_stages' and 'num_devices' disagree (3 vs 2); give one", num_stages=3),
    _case("bad-relative-limit", "memory_limit 'halfx' is not a number or a relative limit", memory_limit="halfx"),
    _case("zero-relative-limit", "memory_limit '0x' must be a positive factor", memory_limit="0x"),
    _case("weight-memory-fused", "weight_memory needs weight_times", weight_memory=0.5),
    _case(
        "weight-over-activation",
        "weight_memory[0] = 3 exceeds activation_memory[0] = 1",
        weight_times=1,
        activation_memory=1,
        weight_memory=[3, 0],
    ),
]
