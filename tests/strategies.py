"""Hypothesis strategies and checks that any test may import (`from tests.strategies import ...`).

`instances()` is the one instance strategy: small random instances (every placement family, split or
fused backward, p2p), its parameters setting the ranges a test needs (sizes, layouts, W times, whole
rounds of p microbatches); `with_feasible_limit` puts one under a memory limit some schedule fits.
`dependency_respecting_orders(instance)` draws per-device op orders that can never deadlock: a random
topological order of all ops under the dependency rule (models/ops.py), split by device.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from pipesat.models import Instance, OpKey, Schedule, expected_op_keys
from pipesat.models.ops import dependency
from pipesat.solver.evaluate.bounds import minimum_memory_limit
from pipesat.solver.evaluate.validator import validate

# Fixed, fast settings for property tests: the same examples on every run, no timing flakiness.
PROPERTY_SETTINGS = settings(
    max_examples=50,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)

# Times in quarters keep sums exact in binary floating point, so equal-time ties are real ties.
TIMES = st.integers(min_value=1, max_value=16).map(lambda quarters: quarters / 4)
# A W time may be zero (a stage whose weight gradient costs nothing); F and B times never are.
ZERO_OR_TIMES = st.integers(min_value=0, max_value=16).map(lambda quarters: quarters / 4)
P2P_TIMES = st.sampled_from([0.0, 0.25, 0.5, 1.0])
LAYOUTS = (("linear", 1), ("interleaved", 2), ("vshape", 2), ("bidirectional", 2))


@st.composite
def instance_dicts(
    draw: st.DrawFn,
    max_devices: int = 4,
    max_microbatches: int = 5,
    split: bool | None = None,
    layouts: tuple[tuple[str, int], ...] = LAYOUTS,
    weight_times: st.SearchStrategy[float] = TIMES,
    whole_rounds: bool = False,
) -> dict[str, Any]:
    """An instance in file form: p <= max_devices, m <= max_microbatches, a (placement, chunks) of `layouts`
    (repeat a layout to draw it more often), random per-stage times and memory, any p2p time.

    `split` forces a split (True) or fused (False) backward; None draws either. `weight_times` draws each
    stage's W time. `whole_rounds` makes half the draws take m a multiple of p, so that the schedules
    that need whole rounds of p microbatches run often.
    """
    p = draw(st.integers(min_value=1, max_value=max_devices))
    if whole_rounds and max_microbatches >= p and draw(st.booleans()):
        m = p * draw(st.integers(min_value=1, max_value=max_microbatches // p))
    else:
        m = draw(st.integers(min_value=1, max_value=max_microbatches))
    placement, chunks = draw(st.sampled_from(layouts))
    # A bidirectional instance is given its model's p stages (both copies hold them), and runs half
    # its microbatches each way.
    stages = p if placement == "bidirectional" else p * chunks
    if placement == "bidirectional":
        m += m % 2
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
        data["weight_times"] = draw(st.lists(weight_times, min_size=stages, max_size=stages))
        data["weight_memory"] = [draw(st.integers(0, a)) for a in data["activation_memory"]]
    return data


def instances(**options: Any) -> st.SearchStrategy[Instance]:
    """Random normalised instances, the one instance strategy of the tests; `options` as for `instance_dicts`."""
    return instance_dicts(**options).map(Instance.from_dict)


@st.composite
def dependency_respecting_orders(draw: st.DrawFn, instance: Instance, split: bool | None = None) -> list[list[OpKey]]:
    """Per-device orders from a random topological order of every op (random ready op each step).

    `split` chooses W ops as separate ops; None draws it when the instance has weight times (a fused
    schedule of a split instance is valid too: its B is the whole backward).
    """
    if split is None:
        split = instance.split_backward and draw(st.booleans())
    keys = expected_op_keys(instance, split)
    successors: dict[OpKey, list[OpKey]] = {key: [] for key in keys}
    ready: list[OpKey] = []
    for key in keys:
        before = dependency(key, instance)
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
    instance = draw(instances(max_devices=max_devices, max_microbatches=max_microbatches))
    return instance, draw(dependency_respecting_orders(instance))


def with_feasible_limit(instance: Instance, fraction: float) -> Instance:
    """The instance under a memory limit `fraction` of the way from the least feasible limit to the 1F1B peak
    (at the least feasible limit when that is the higher): a limit some schedule always fits."""
    low = minimum_memory_limit(instance)
    high = max(low, instance.one_f_one_b_peak())
    return instance.with_changes(memory_limit=low + fraction * (high - low))


def assert_valid(schedule: Schedule) -> Schedule:
    """Fail the test with every violation listed unless the validator accepts the schedule."""
    violations = validate(schedule)
    assert not violations, "\n".join(str(v) for v in violations)
    return schedule
