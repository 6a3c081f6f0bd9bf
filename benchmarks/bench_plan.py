"""`pipesat plan` on the issue's case and against brute force.

(1) The issue's case (instances/plan/gpt-1.3b-16gpu.yaml: 24 layers, hidden 2048, 16 GPUs of 40 GiB,
    global batch 64) under a time budget, with the local executor and, when Ray is installed, with a
    local Ray: the counts of configurations (feasible, pruned by bound, refused by memory, solved), the
    best configuration, the wall time, and whether the two rankings are equal.
(2) A small case solved both ways: every configuration by CP-SAT (brute force, no pruning) and the
    plan; the best of each, and how many configurations the plan pruned.

    python benchmarks/bench_plan.py [--time-budget 120] [--jobs 2] [--workers 1] [--no-ray]

`--jobs` solves at a time of `--workers` CP-SAT workers each (default: cores / jobs), as `pipesat plan`.
The exit status is 1 when the two rankings differ or the plan's best is not the brute force's.
"""

from __future__ import annotations

import argparse
import importlib.util
import time
from pathlib import Path

from results_header import results_header

from pipesat.models.plan_result import Outcome, PlanResult
from pipesat.models.tolerance import same
from pipesat.solver.cpsat.processes import available_cores
from pipesat.solver.evaluate.validator import ensure_valid
from pipesat.solver.plan.brute_force import brute_force
from pipesat.solver.plan.executors import LocalExecutor, make_executor
from pipesat.solver.plan.search import PlanOptions, plan
from pipesat.solver.plan.spec import load_spec, spec_from_dict

ROOT = Path(__file__).resolve().parent.parent
SMALL = {
    "model": {"layers": 8, "hidden": 1024, "heads": 8, "seq_len": 1024, "vocab": 8000},
    "cluster": {"gpus": 8, "gpu_memory": "4GiB", "tflops": 100, "efficiency": 0.5, "bandwidth": 25, "latency": 10},
    "training": {"global_batch": 8, "tensor_parallel": [1]},
}


def summary(name: str, result: PlanResult) -> str:
    best = result.best
    assert best is not None and best.measure is not None and result.best_schedule is not None
    ensure_valid(result.best_schedule)
    return (
        f"{name:<10} configurations {len(result.results):>3}  feasible {len(result.feasible):>3}  "
        f"pruned {result.count(Outcome.PRUNED):>3}  refused {result.count(Outcome.REFUSED):>3}  "
        f"solved {result.count(Outcome.SOLVED):>3}  best {best.config.label} {best.measure.iteration_ms:.2f} ms "
        f"{best.measure.tokens_per_s:,.0f} tokens/s (gap of the best to any configuration "
        f"{(result.best_gap or 0) * 100:.2f}%)  wall {result.wall_seconds:.1f} s of {result.time_budget:g} s"
    )


def ranking(result: PlanResult) -> list[tuple]:
    return [(r.config, r.outcome, r.measure, r.status) for r in result.results]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--time-budget", type=float, default=120.0)
    parser.add_argument("--jobs", type=int, default=available_cores(), help="solves at a time")
    parser.add_argument("--workers", type=int, help="CP-SAT workers of each solve (default: cores / jobs)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-ray", action="store_true")
    args = parser.parse_args()
    cpsat = args.workers or max(1, available_cores() // args.jobs)
    print(results_header())
    print(f"{available_cores()} cores, {args.jobs} solves at a time, {cpsat} CP-SAT workers each, seed {args.seed}")

    spec = load_spec(ROOT / "instances/plan/gpt-1.3b-16gpu.yaml")
    print("(1) the issue's case: 24 layers, hidden 2048, 16 GPUs of 40 GiB, global batch 64")
    executor = LocalExecutor(args.jobs)
    local = plan(spec, executor, PlanOptions(time_budget=args.time_budget, seed=args.seed, cpsat_workers=cpsat))
    executor.close()
    print(summary("local", local))
    rankings_equal = True  # without Ray there is nothing to compare
    if not args.no_ray and importlib.util.find_spec("ray") is not None:
        executor = make_executor("ray", args.jobs, cpsat)
        ray_result = plan(
            spec, executor, PlanOptions(time_budget=args.time_budget, seed=args.seed, cpsat_workers=cpsat)
        )
        executor.close()
        print(summary("ray", ray_result))
        rankings_equal = ranking(local) == ranking(ray_result)
        print(f"rankings equal: {rankings_equal}")
    for row in local.results[:6]:
        m = row.measure
        print(
            f"  {row.config.label:<28} {m.iteration_ms:8.2f} ms  {m.tokens_per_s:>9,.0f} tokens/s  "
            f"MFU {m.mfu * 100:5.2f}%  {m.memory_per_gpu / 2**30:5.1f} GiB  {row.made_by:<12} {row.status:<9} "
            f"gap {row.gap * 100:5.2f}%  {row.outcome.value}"
        )

    print("(2) brute force against the plan: 8 layers, hidden 1024, 8 GPUs of 4 GiB, global batch 8")
    small = spec_from_dict(SMALL)
    executor = LocalExecutor(args.jobs)
    clock = time.monotonic()
    everything = brute_force(small, executor, time_limit=10, seed=args.seed, cpsat_workers=cpsat)
    brute_seconds = time.monotonic() - clock
    planned = plan(small, executor, PlanOptions(time_budget=60, seed=args.seed, cpsat_workers=cpsat))
    executor.close()
    best = planned.fastest  # the search's exactness: its fastest, whichever tied row it recommends
    assert best is not None and best.measure is not None
    top = everything[0]
    print(
        f"brute force: {len(everything)} configurations solved ({sum(i.status == 'optimal' for i in everything)} "
        f"proven optimal) in {brute_seconds:.1f} s; best {top.config.label} {top.measure.iteration_ms:.4f} ms"
    )
    print(summary("plan", planned))
    equal_best = best.config == top.config and same(best.measure.iteration_ms, top.measure.iteration_ms)
    print(
        f"equal best: {equal_best}; "
        f"pruned {planned.count(Outcome.PRUNED)} of {len(planned.results)}, CP-SAT ran on "
        f"{sum(r.search_seconds > 0 for r in planned.results)}"
    )
    if not (rankings_equal and equal_best):
        raise SystemExit(
            "MISS: " + ("Ray's ranking differs; " if not rankings_equal else "") + f"equal best: {equal_best}"
        )


if __name__ == "__main__":
    main()
