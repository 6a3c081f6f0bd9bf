"""Overlapped pairs on a MoE-like model: every handwritten schedule and CP-SAT, at every placement.

One model (F = B = W = 1 per device and microbatch, p2p 0.05, no memory limit) whose F and B each
carry an expert all-to-all; `--comm` is the all-to-all's share of a layer's F + B + W (0.3: 0.45 of
F and 0.45 of B). It is laid out linearly, interleaved (v = 2), as a V (v = 2) and bidirectionally
(DualPipe's two copies: each stage a device's share, half the microbatches each way, and twice the
parameters, which the table's activation peak does not show): the same work per device. Each applicable handwritten schedule is timed and validated; CP-SAT searches each layout
for `--time-limit` seconds from the best of them. The table gives each schedule's makespan, its
peak memory (in microbatches of a device's activations) and how much slower it is than the best
schedule found, and CP-SAT's bound and gap per layout.

Run: python benchmarks/bench_overlap.py [--devices 4] [--microbatches 16] [--comm 0 0.3] [--time-limit 20]
"""

from __future__ import annotations

import argparse

from results_header import results_header

from pipesat.models import Instance
from pipesat.solver.evaluate.metrics import compute_metrics
from pipesat.solver.evaluate.validator import ensure_valid
from pipesat.solver.heuristics import handwritten_schedules
from pipesat.solver.solve import solve

LAYOUTS = (("linear", 1), ("interleaved", 2), ("vshape", 2), ("bidirectional", 2))


def moe_model(p: int, m: int, comm: float, placement: str, chunks: int) -> Instance:
    """The model at one layout: a device's F, B and W are 1 each; the all-to-all is `comm` of the three."""
    all_to_all = 1.5 * comm  # of F and of B: together comm x (F + B + W)
    return Instance.from_dict(
        {
            "name": f"moe p={p} m={m} a2a {comm:.0%}",
            "num_devices": p,
            "num_microbatches": m,
            "chunks": chunks,
            "placement": placement,
            "forward_times": 1.0,
            "backward_times": 1.0,
            "weight_times": 1.0,
            "forward_comm_times": all_to_all or None,
            "backward_comm_times": all_to_all or None,
            "p2p_time": 0.05,
        }
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--devices", type=int, default=4)
    parser.add_argument("--microbatches", type=int, default=16)
    parser.add_argument("--comm", type=float, nargs="+", default=[0.0, 0.3])
    parser.add_argument("--time-limit", type=float, default=20.0)
    args = parser.parse_args()
    p, m = args.devices, args.microbatches
    print(results_header())
    for comm in args.comm:
        rows = []
        for placement, chunks in LAYOUTS:
            instance = moe_model(p, m, comm, placement, chunks)
            for name, schedule in handwritten_schedules(instance):
                metrics = compute_metrics(ensure_valid(schedule))
                rows.append((name, placement, metrics.makespan, metrics.max_peak_memory, ""))
            result = solve(instance, "makespan", time_limit=args.time_limit, seed=0)
            metrics = compute_metrics(ensure_valid(result.schedule))
            pairs = len(result.schedule.pairs)
            note = f"{result.status}, bound {result.bound:.4g}, gap {result.gap:.1%}, {pairs} pairs"
            rows.append(("cp-sat", placement, metrics.makespan, metrics.max_peak_memory, note))
        best = min(row[2] for row in rows)
        print(f"\n{instance.name}, CP-SAT {args.time_limit:g} s per layout")
        print(f"{'schedule':<20} {'layout':<13} {'makespan':>9} {'peak':>6} {'vs best':>8}  note")
        for name, placement, makespan, peak, note in sorted(rows, key=lambda row: row[2]):
            print(f"{name:<20} {placement:<13} {makespan:>9.2f} {peak:>6.2f} {makespan / best - 1:>8.1%}  {note}")


if __name__ == "__main__":
    main()
