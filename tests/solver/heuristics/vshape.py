"""Builders for the V-shape heuristic tests (ZB-V, V-Min, V-Half, V-ZB)."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from pipesat.models import Instance
from tests.conftest import make_instance
from tests.strategies import ZERO_OR_TIMES, instances

# Instances every V schedule refuses, with the reason it gives: (instance in file form, reason).
V_REFUSALS: list[tuple[dict[str, Any], str]] = [
    ({"num_devices": 4, "num_microbatches": 8, "weight_times": 1}, "needs chunks 2 with vshape placement"),
    (
        {"num_devices": 4, "num_microbatches": 8, "chunks": 2, "placement": "interleaved", "weight_times": 1},
        "needs chunks 2 with vshape placement",
    ),
    ({"num_devices": 4, "num_microbatches": 8, "chunks": 2, "placement": "vshape"}, "needs a split backward"),
]


def vshape(p: int, m: int, **extra: Any) -> Instance:
    """V placement with F = B = W = 1 per chunk (a device's share of 2, split over its 2 chunks); extra
    keys pass through. A chunk's activation is 0.5."""
    times = {"forward_times": 2, "backward_times": 2, "weight_times": 2}
    return make_instance(p, m, chunks=2, placement="vshape", **(times | extra))


def vshape_instances() -> st.SearchStrategy[Instance]:
    """Random V-placed split-backward instances (p <= 6, m <= 14): per-stage times and memory, any p2p
    time, and W times that may be zero."""
    return instances(
        max_devices=6, max_microbatches=14, split=True, layouts=(("vshape", 2),), weight_times=ZERO_OR_TIMES
    )
