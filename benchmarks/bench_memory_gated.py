"""The memory-gated start's variants (`solver.heuristics.memory_gated.GATES`), side by side.

    python benchmarks/bench_memory_gated.py

A grid of linear and interleaved pipelines (F/B/W times, weight memory, p2p 0.2) at 0.4-1x of the
peak of the handwritten order whose sequences the start keeps (1F1B's or Megatron's), the makespan
of each variant, every schedule validated. Prints how often each variant is the fastest (ties count
for each), how often the best variant beats the first one (W right after its B, no cap: the start
before the variants) and by how much, and the named instances the variants were chosen on.
"""

from __future__ import annotations

import statistics

from pipesat.models import Instance, load_instance
from pipesat.solver.evaluate.metrics import compute_metrics
from pipesat.solver.evaluate.validator import ensure_valid
from pipesat.solver.heuristics import run_heuristic
from pipesat.solver.heuristics.memory_gated import GATES, Gate, memory_gated_schedule

SHAPES = [
    (4, 1, 8),
    (4, 1, 16),
    (8, 1, 16),
    (6, 1, 24),
    (2, 2, 8),
    (4, 2, 8),
    (4, 2, 16),
    (3, 3, 6),
    (4, 4, 8),
    (8, 2, 16),
]
TIMES = [(1, 1, 1), (2, 3, 1), (1, 2, 1), (1, 1.5, 0.5)]  # F, B, W
WEIGHT_MEMORY = (0.5, 0.0, 1.0)
FRACTIONS = (1.0, 0.8, 0.6, 0.5, 0.4)


def grid() -> list[Instance]:
    """Every instance of the grid, its limit a fraction of its handwritten order's peak."""
    found = []
    for (p, v, m), (forward, backward, weight), weight_memory in (
        (shape, times, memory) for shape in SHAPES for times in TIMES for memory in WEIGHT_MEMORY
    ):
        base = Instance.from_dict(
            {
                "num_devices": p,
                "num_microbatches": m,
                "chunks": v,
                "placement": "interleaved" if v > 1 else "linear",
                "forward_times": forward,
                "backward_times": backward,
                "weight_times": weight,
                "weight_memory": weight_memory,
                "p2p_time": 0.2,
            }
        )
        peak = max(compute_metrics(run_heuristic("1f1b" if v == 1 else "interleaved", base)).peak_memory)
        found += [base.with_limit(fraction * peak) for fraction in FRACTIONS]
    return found


def values(instance: Instance, objective: str = "makespan") -> dict[Gate, float]:
    """Each variant's value on `instance`, of those that have a schedule (validated)."""
    found = {}
    for gate in GATES:
        schedule = memory_gated_schedule(instance, True, gate)
        if schedule is not None:
            metrics = compute_metrics(ensure_valid(schedule))
            found[gate] = metrics.makespan if objective == "makespan" else metrics.max_span
    return found


def main() -> None:
    wins = dict.fromkeys(GATES, 0)
    gains = []
    served = 0
    for instance in grid():
        found = values(instance)
        if not found:
            continue
        served += 1
        best = min(found.values())
        for gate, value in found.items():
            wins[gate] += value <= best + 1e-9
        first = found.get(GATES[0])
        if first is not None and best < first - 1e-9:
            gains.append((first - best) / first)
    print(f"{served} instances with a memory-gated schedule; fastest (ties count for each):")
    for gate, count in wins.items():
        print(
            f"  W {'deferred' if gate.defer_weights else 'after B':<8}  extra in flight {gate.extra_in_flight!s:<4} {count:4d}"
        )
    if gains:
        print(
            f"the best variant beats the first in {len(gains)}: by {statistics.median(gains):.1%} (median),"
            f" {max(gains):.1%} at most"
        )
    print("named instances (max span), each variant in GATES order:")
    linear = {"weight_times": 1, "backward_times": 1, "memory_limit": "0.5x"}
    named = {
        "linear p8 m16 0.5x": Instance.from_dict({"num_devices": 8, "num_microbatches": 16} | linear),
        "linear p8 m32 0.5x": Instance.from_dict({"num_devices": 8, "num_microbatches": 32} | linear),
        "1.5B p8 m32 0.5x": load_instance("instances/zb-paper/1.5b-p8-m32.yaml").with_changes(memory_limit="0.5x"),
    }
    for name, instance in named.items():
        found = values(instance, "span")
        print(f"  {name:<20} " + "  ".join(f"{value:g}" for value in found.values()))


if __name__ == "__main__":
    main()
