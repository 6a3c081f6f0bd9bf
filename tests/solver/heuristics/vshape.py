"""Builders for the V-shape heuristic tests (ZB-V, V-Min, V-Half, V-ZB)."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from models import Instance
from tests.strategies import P2P_TIMES, TIMES

NAMES = ("zb-v", "v-min", "v-half", "v-zb")

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
    """V placement with F = B = W = 1 per chunk; extra keys pass through. A chunk's activation is 0.5."""
    data = {"num_devices": p, "num_microbatches": m, "chunks": 2, "placement": "vshape"}
    data |= {"forward_times": 1, "backward_times": 1, "weight_times": 1}
    return Instance.from_dict({**data, **extra})


@st.composite
def vshape_instances(draw: st.DrawFn, max_devices: int = 6, max_microbatches: int = 14) -> Instance:
    """Random V-placed split-backward instances: per-stage times and memory, any p2p time."""
    p = draw(st.integers(1, max_devices))
    stages = 2 * p
    per_stage = st.lists(TIMES, min_size=stages, max_size=stages)
    activation = draw(st.lists(st.integers(1, 4), min_size=stages, max_size=stages))
    return vshape(
        p,
        draw(st.integers(1, max_microbatches)),
        forward_times=draw(per_stage),
        backward_times=draw(per_stage),
        weight_times=draw(st.lists(st.sampled_from([0.0, 0.25, 1.0, 2.5]), min_size=stages, max_size=stages)),
        p2p_time=draw(P2P_TIMES),
        activation_memory=activation,
        weight_memory=[draw(st.integers(0, a)) for a in activation],
    )
