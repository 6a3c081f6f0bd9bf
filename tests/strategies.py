"""Hypothesis strategies and checks that any test may import (`from tests.strategies import ...`).

`instances()` draws small random instances (every placement family, split or fused backward, p2p);
`dependency_respecting_orders(instance)` draws per-device op orders that can never deadlock: a random
topological order of all ops under DESIGN.md's dependencies, split by device.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from models import Instance, OpKey, Schedule, expected_op_keys
from models.ops import dependency
from solver.evaluate.validator import validate

# Fixed, fast settings for property tests: the same examples on every run, no timing flakiness.
PROPERTY_SETTINGS = settings(
    max_examples=50,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)

# Times in quarters keep sums exact in binary floating point, so equal-time ties are real ties.
TIMES = st.integers(min_value=1, max_value=16).map(lambda quarters: quarters / 4)
P2P_TIMES = st.sampled_from([0.0, 0.25, 0.5, 1.0])
LAYOUTS = (("linear", 1), ("interleaved", 2), ("vshape", 2))


@st.composite
def instance_dicts(
    draw: st.DrawFn,
    max_devices: int = 4,
    max_microbatches: int = 5,
    split: bool | None = None,
    layouts: tuple[tuple[str, int], ...] = LAYOUTS,
) -> dict[str, Any]:
    """An instance in file form: p <= max_devices, m <= max_microbatches, a (placement, chunks) of `layouts`.

    `split` forces a split (True) or fused (False) backward; None draws either.
    """
    p = draw(st.integers(min_value=1, max_value=max_devices))
    m = draw(st.integers(min_value=1, max_value=max_microbatches))
    placement, chunks = draw(st.sampled_from(layouts))
    stages = p * chunks
    per_stage = st.lists(TIMES, min_size=stages, max_size=stages)
    data: dict[str, Any] = {
        "num_devices": p,
        "num_microbatches": m,
        "chunks": chunks,
        "placement": placement,
        "forward_times": draw(per_stage),
        "backward_times": draw(per_stage),
        "p2p_time": draw(P2P_TIMES),
        "activation_memory": draw(st.lists(st.integers(1, 4), min_size=stages, max_size=stages)),
    }
    if split is None:
        split = draw(st.booleans())
    if split:
        data["weight_times"] = draw(per_stage)
        data["weight_memory"] = [draw(st.integers(0, a)) for a in data["activation_memory"]]
    return data


def instances(
    max_devices: int = 4,
    max_microbatches: int = 5,
    split: bool | None = None,
    layouts: tuple[tuple[str, int], ...] = LAYOUTS,
) -> st.SearchStrategy[Instance]:
    """Random small normalised instances (see `instance_dicts`)."""
    return instance_dicts(max_devices, max_microbatches, split, layouts).map(Instance.from_dict)


@st.composite
def dependency_respecting_orders(draw: st.DrawFn, instance: Instance, split: bool | None = None) -> list[list[OpKey]]:
    """Per-device orders from a random topological order of every op (random ready op each step).

    `split` chooses W ops as separate ops; None draws it when the instance has weight times (a fused
    schedule of a split instance is valid too: its B is the whole backward).
    """
    if split is None:
        split = instance.split_backward and draw(st.booleans())
    keys = expected_op_keys(instance, split)
    num_stages = instance.num_stages
    successors: dict[OpKey, list[OpKey]] = {key: [] for key in keys}
    ready: list[OpKey] = []
    for key in keys:
        before = dependency(key, num_stages)
        if before is None:
            ready.append(key)
        else:
            successors[before].append(key)
    rng = draw(st.randoms(use_true_random=False))
    orders: list[list[OpKey]] = [[] for _ in range(instance.num_devices)]
    while ready:
        key = ready.pop(rng.randrange(len(ready)))
        orders[instance.placement[key[1]]].append(key)
        ready.extend(successors[key])
    return orders


@st.composite
def instances_with_orders(
    draw: st.DrawFn, max_devices: int = 4, max_microbatches: int = 5
) -> tuple[Instance, list[list[OpKey]]]:
    """A random instance together with random dependency-respecting orders for it."""
    instance = draw(instances(max_devices, max_microbatches))
    return instance, draw(dependency_respecting_orders(instance))


def assert_valid(schedule: Schedule) -> Schedule:
    """Fail the test with every violation listed unless the validator accepts the schedule."""
    violations = validate(schedule)
    assert not violations, "\n".join(str(v) for v in violations)
    return schedule
