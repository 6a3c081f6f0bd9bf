"""Time the core on ~100,000-op schedules: simulate, validate and compute_metrics (best of N runs).

Run: `python benchmarks/bench_core.py` (a few seconds). Target from issue 2: under 1 s each on the 2-core
build machine. Each case builds the per-device orders of a handwritten schedule once, then times the
three core functions on them; every simulated schedule must validate. The exit status is 1 when a
time misses the target (after the whole table is printed).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

from pipesat.models import Instance
from pipesat.solver.evaluate.metrics import compute_metrics
from pipesat.solver.evaluate.simulator import simulate
from pipesat.solver.evaluate.validator import validate
from pipesat.solver.heuristics import get_heuristic

TARGET_SECONDS = 1.0  # issue 2's target for each of simulate, validate and compute_metrics

# (heuristic, instance) pairs with about 100,000 ops each; memory limits make the validator check memory too.
CASES: list[tuple[str, dict[str, Any]]] = [
    ("1f1b", {"num_devices": 32, "num_microbatches": 1563, "p2p_time": 0.1, "memory_limit": "1x"}),
    (
        "zb-h1",
        {"num_devices": 32, "num_microbatches": 1042, "weight_times": 1, "p2p_time": 0.1, "memory_limit": "1x"},
    ),
    (
        "interleaved",
        {"num_devices": 32, "num_microbatches": 800, "chunks": 2, "p2p_time": 0.1, "memory_limit": "2x"},
    ),
]


def best_of(repeat: int, function: Callable[[], Any]) -> tuple[float, Any]:
    """The shortest wall time of `repeat` calls, and the last result."""
    best, result = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        result = function()
        best = min(best, time.perf_counter() - start)
    return best, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="runs per measurement (the best is reported)")
    repeat = parser.parse_args().repeat

    print(
        f"{'schedule':<12} {'ops':>8} {'simulate':>10} {'validate':>10} {'metrics':>10}   (seconds, best of {repeat})"
    )
    slowest = 0.0
    for name, data in CASES:
        instance = Instance.from_dict(data)
        orders = get_heuristic(name).orders(instance)
        simulate_s, schedule = best_of(repeat, lambda: simulate(instance, orders))  # noqa: B023
        validate_s, violations = best_of(repeat, lambda: validate(schedule))  # noqa: B023
        metrics_s, _ = best_of(repeat, lambda: compute_metrics(schedule))  # noqa: B023
        if violations:
            raise SystemExit(f"{name}: the simulated schedule is invalid: {violations[0]}")
        print(f"{name:<12} {len(schedule.ops):>8} {simulate_s:>10.3f} {validate_s:>10.3f} {metrics_s:>10.3f}")
        slowest = max(slowest, simulate_s, validate_s, metrics_s)
    if slowest > TARGET_SECONDS:
        raise SystemExit(f"MISS: the slowest took {slowest:.3f} s, over the target of {TARGET_SECONDS:g} s")


if __name__ == "__main__":
    main()
