"""The solver against ZB-auto: p=4 with m=8 and m=12, F/B/W = 5/6/4, p2p 0 and 1, memory limits 1x and 2x.

Run: `python benchmarks/bench_solver.py [--time-limit 60] [--workers 1] [--objective makespan] [--extra]`
(CPU-heavy: up to 8 x the time limit, 12 x with --extra, which adds harder cases). Target from issue 4: proven optimal within 60 s on the 2-core
machine, and strictly better than ZB-auto wherever ZB-auto is not optimal. Every returned schedule
is validated (memory limit included). The exit status is 1 when a row of the main table is not proven
optimal (after the whole table is printed); the harder cases have no target.
"""

from __future__ import annotations

import argparse
import itertools

from pipesat.models import Instance, PipesatError
from pipesat.solver.evaluate.metrics import compute_metrics
from pipesat.solver.evaluate.retime import retimed_for
from pipesat.solver.evaluate.validator import validate
from pipesat.solver.heuristics import run_heuristic
from pipesat.solver.report.solve_text import outcome_text
from pipesat.solver.solve import solve


def zb_auto_value(instance: Instance, objective: str) -> float | None:
    """ZB-auto's value (re-timed for the least span when the objective is the max span), if it fits."""
    try:
        schedule = run_heuristic("zb-auto", instance)
    except PipesatError:
        return None
    schedule = retimed_for(objective, schedule)
    if validate(schedule):
        return None
    return compute_metrics(schedule).objective(objective)


# Harder cases (with --extra): heterogeneous stages, chunks, tighter limits, where the search must work.
EXTRA_CASES: list[dict] = [
    {
        "num_devices": 4,
        "num_microbatches": 8,
        "forward_times": [5, 4, 6, 5],
        "backward_times": [6, 7, 5, 6],
        "weight_times": [4, 3, 4, 5],
        "p2p_time": 1,
        "memory_limit": "1.3x",
    },
    {
        "num_devices": 4,
        "num_microbatches": 16,
        "forward_times": 5,
        "backward_times": 6,
        "weight_times": 4,
        "p2p_time": 1,
        "memory_limit": "1.5x",
    },
    {
        "num_devices": 4,
        "num_microbatches": 8,
        "chunks": 2,
        "placement": "vshape",
        "forward_times": 2.5,
        "backward_times": 3,
        "weight_times": 2,
        "p2p_time": 0.5,
        "memory_limit": "0.5x",
    },
    {
        "num_devices": 4,
        "num_microbatches": 8,
        "chunks": 2,
        "placement": "interleaved",
        "forward_times": 2.5,
        "backward_times": 3,
        "weight_times": 2,
        "p2p_time": 0.5,
        "memory_limit": "1x",
    },
]


def run_extra(objective: str, time_limit: float, workers: int) -> None:
    header = f"{'case':<34} | {'status':>8} {'value':>7} {'bound':>7} {'gap':>7} {'time s':>7} | best heuristic"
    print(f"\nharder cases, objective {objective}")
    print(header)
    print("-" * len(header))
    for data in EXTRA_CASES:
        instance = Instance.from_dict(data)
        result = solve(instance, objective, time_limit=time_limit, workers=workers, seed=0)
        assert result.schedule is not None and not validate(result.schedule), outcome_text(result)
        case = f"{instance.placement_name()} m={instance.num_microbatches} limit {data['memory_limit']}"
        print(
            f"{case:<34} | {result.status:>8} {result.value:>7g} {result.bound:>7g} {100 * result.gap:>6.2f}% "
            f"{result.solve_time:>7.2f} | {result.starting_point.name} = {result.starting_point.value:g}",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--time-limit", type=float, default=60.0)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--objective", choices=("makespan", "span"), default="makespan")
    parser.add_argument("--extra", action="store_true", help="Also run the harder cases.")
    args = parser.parse_args()

    header = f"{'m':>3} {'p2p':>3} {'limit':>5} | {'status':>8} {'value':>7} {'bound':>7} {'gap':>7} {'time s':>7} {'to best':>7} | {'ZB-auto':>7}  verdict"
    print(f"p=4, F/B/W=5/6/4, objective {args.objective}, {args.workers} worker(s), limit {args.time_limit:g} s")
    print(header)
    print("-" * len(header))
    unproven = 0
    for m, p2p, limit in itertools.product((8, 12), (0, 1), ("1x", "2x")):
        instance = Instance.from_dict(
            {
                "num_devices": 4,
                "num_microbatches": m,
                "forward_times": 5,
                "backward_times": 6,
                "weight_times": 4,
                "p2p_time": p2p,
                "memory_limit": limit,
            }
        )
        result = solve(instance, args.objective, time_limit=args.time_limit, workers=args.workers, seed=0)
        assert result.schedule is not None and not validate(result.schedule), outcome_text(result)
        zb = zb_auto_value(instance, args.objective)
        if zb is None:
            verdict = "ZB-auto n/a"
        elif result.value < zb:
            verdict = "better than ZB-auto"
        elif result.status == "optimal":
            verdict = "ZB-auto optimal"
        else:
            verdict = "NOT better, not proven"
        print(
            f"{m:>3} {p2p:>3} {limit:>5} | {result.status:>8} {result.value:>7g} {result.bound:>7g} "
            f"{100 * result.gap:>6.2f}% {result.solve_time:>7.2f} {result.time_to_best or 0:>7.2f} | "
            f"{'n/a' if zb is None else f'{zb:g}':>7}  {verdict}",
            flush=True,
        )
        unproven += result.status != "optimal"
    if args.extra:
        run_extra(args.objective, args.time_limit, args.workers)
    if unproven:
        raise SystemExit(f"MISS: {unproven} row(s) not proven optimal in {args.time_limit:g} s")


if __name__ == "__main__":
    main()
