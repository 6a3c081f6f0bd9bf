"""How many CP-SAT workers a 2-core machine should run, and how stable the answer is across seeds.

For each instance (the hard cases: V-shape, limits below 1x, p2p) it solves with each worker count and
seed at a fixed time limit, and prints the value, the proven bound and the gap of each run; then per
worker count the mean value relative to the best value any run found, and the largest spread between
seeds.

    python benchmarks/bench_workers.py [--time-limit 20] [--workers 1,2,4,8] [--seeds 0,1]
"""

from __future__ import annotations

import argparse
import statistics
from collections import defaultdict
from pathlib import Path

from pipesat.models import Instance, load_instance
from pipesat.solver.evaluate.validator import ensure_valid
from pipesat.solver.solve import solve

ROOT = Path(__file__).resolve().parent.parent
# Per chunk F/B/W = 2/3/1, p2p 0.1, activation 1 and weight memory 0.5 (the ZB papers' V setting).
V_SETTING = {"forward_times": 4, "backward_times": 6, "weight_times": 2, "activation_memory": 2, "weight_memory": 1}


def cases() -> list[tuple[str, Instance, str]]:
    """(name, instance with its limit, objective)."""
    vshape = {"chunks": 2, "placement": "vshape", "p2p_time": 0.1, **V_SETTING}
    return [
        (
            "1.5B p8 m24 0.5x",
            load_instance(ROOT / "instances/zb-paper/1.5b-p8-m24.yaml").with_changes(memory_limit="0.5x"),
            "span",
        ),
        (
            "p8 m32 p2p F/2 2x",
            Instance.from_dict(
                {
                    "num_devices": 8,
                    "num_microbatches": 32,
                    "forward_times": 2,
                    "backward_times": 2,
                    "weight_times": 2,
                    "p2p_time": 1,
                    "memory_limit": "2x",
                }
            ),
            "makespan",
        ),
        (
            "V p4 m16 limit 6",
            Instance.from_dict({"num_devices": 4, "num_microbatches": 16, **vshape, "memory_limit": 6}),
            "span",
        ),
        (
            "V p8 m16 1x",
            Instance.from_dict({"num_devices": 8, "num_microbatches": 16, **vshape, "memory_limit": "1x"}),
            "span",
        ),
        (
            "7B p8 m32 0.5x",
            load_instance(ROOT / "instances/modern/7b-p8-m32.yaml").with_changes(memory_limit="0.5x"),
            "span",
        ),
        (
            "p16 m64 0.5x",
            Instance.from_dict(
                {
                    "num_devices": 16,
                    "num_microbatches": 64,
                    "forward_times": 1,
                    "backward_times": 1,
                    "weight_times": 1,
                    "memory_limit": "0.5x",
                }
            ),
            "span",
        ),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--time-limit", type=float, default=20.0)
    parser.add_argument("--workers", default="1,2,4,8")
    parser.add_argument("--seeds", default="0,1")
    args = parser.parse_args()
    worker_counts = [int(w) for w in args.workers.split(",")]
    seeds = [int(s) for s in args.seeds.split(",")]
    print(f"time limit {args.time_limit:g} s per run")
    print(f"{'instance':<20} {'workers':>7} {'seed':>4} {'value':>10} {'bound':>10} {'gap':>7}")
    values: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for name, instance, objective in cases():
        for workers in worker_counts:
            for seed in seeds:
                result = solve(instance, objective, time_limit=args.time_limit, workers=workers, seed=seed)
                ensure_valid(result.schedule)
                values[name][workers].append(result.value)
                print(
                    f"{name:<20} {workers:>7} {seed:>4} {result.value:>10.2f} {result.bound:>10.2f} "
                    f"{100 * result.gap:>6.2f}%",
                    flush=True,
                )
    print()
    print(f"{'workers':>7} {'mean over best':>15} {'largest seed spread':>20}")
    for workers in worker_counts:
        ratios, spreads = [], []
        for per_workers in values.values():
            best = min(v for runs in per_workers.values() for v in runs)
            ratios += [v / best for v in per_workers[workers]]
            spreads.append((max(per_workers[workers]) - min(per_workers[workers])) / best)
        print(f"{workers:>7} {100 * (statistics.mean(ratios) - 1):>14.2f}% {100 * max(spreads):>19.2f}%")


if __name__ == "__main__":
    main()
