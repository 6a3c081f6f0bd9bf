"""Time every applicable heuristic at p = 32, m = 256 (v = 2 where a schedule needs chunks): generate + validate.

Run: python benchmarks/bench_heuristics.py   (target: under 2 s in total; the exit status is 1 when it takes
longer, after the whole table is printed)
"""

from __future__ import annotations

import time

from pipesat.models import Instance
from pipesat.solver.evaluate.metrics import compute_metrics
from pipesat.solver.evaluate.validator import validate
from pipesat.solver.heuristics import all_heuristics, run_heuristic

P, M = 32, 256
TARGET_SECONDS = 2.0  # generate + validate, every heuristic together


def layouts() -> list[Instance]:
    """The same model laid out three ways; each heuristic runs on the first layout it accepts."""
    base = {"num_devices": P, "num_microbatches": M, "p2p_time": 0.05}
    times = {"forward_times": 1.0, "backward_times": 1.1, "weight_times": 0.8}
    chunked = {key: value / 2 for key, value in times.items()}
    return [
        Instance.from_dict({**base, **times, "chunks": 1, "placement": "linear"}),
        Instance.from_dict({**base, **chunked, "chunks": 2, "placement": "interleaved"}),
        Instance.from_dict({**base, **chunked, "chunks": 2, "placement": "vshape"}),
    ]


def main() -> None:
    instances = layouts()
    print(f"{'heuristic':<12} {'layout':<12} {'ops':>6} {'generate s':>11} {'validate s':>11} {'max span':>10}")
    total = 0.0
    for heuristic in all_heuristics():
        instance = next((i for i in instances if heuristic.unmet(i) is None), None)
        if instance is None:
            print(f"{heuristic.name:<12} n/a: {heuristic.unmet(instances[0])}")
            continue
        started = time.perf_counter()
        schedule = run_heuristic(heuristic.name, instance)
        generated = time.perf_counter()
        violations = validate(schedule)
        validated = time.perf_counter()
        if violations:
            raise SystemExit(f"{heuristic.name}: invalid schedule: {violations[0]}")
        total += validated - started
        print(
            f"{heuristic.name:<12} {instance.placement_name():<12} {len(schedule.ops):>6} "
            f"{generated - started:>11.3f} {validated - generated:>11.3f} {compute_metrics(schedule).max_span:>10.2f}"
        )
    print(f"total generate + validate: {total:.3f} s")
    if total > TARGET_SECONDS:
        raise SystemExit(f"MISS: over the target of {TARGET_SECONDS:g} s")


if __name__ == "__main__":
    main()
