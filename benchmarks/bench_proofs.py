"""Proofs on 2 cores: each open instance solved under each CP-SAT portfolio, side by side.

    python benchmarks/bench_proofs.py [--workers 2] [--seconds 40] [--only NAME,...] [--variants NAME,...]

The instances are those whose proven gaps are too wide to judge a handwritten schedule (V-shape
placements and memory limits below the 1F1B peak, F/B/W 2/3/1 a chunk, p2p 0.1, activations 1 and
weight memory 0.5 a chunk, limits in those units, the max-span objective), and linear p = 8, m = 32
(F/B/W 2/3/1, p2p 1) at 2x for the makespan, bench_targets' two limits below the 1F1B peak (linear
p = 8, m = 32 at 0.5x, 60 s) and its misses. A variant is a set of CP-SAT parameters given through
`solve(cpsat_params=...)`: with few workers CP-SAT leaves out its bound-raising subsolvers, so the
variants add them back in different ways (pipesat's default with 2 workers is
`solver.cpsat.search_parameters.PROOF_PORTFOLIO_WORKERS`); or pipesat's default with one of its own settings
off (`SETTINGS`, a `Tuning` given through `solve(tuning=...)`): `no-probes` without the bisection probes after a stall (`solver.cpsat.probes`),
`no-opening` without the opening probe at the bound, `no-first-device` without the span solve's
phase 0 (the bound from stage 0's device proven first, `solver.solve`), `no-tight` without the tight
memory precedences, `no-nested` without those between two stages of a device
(`solver.cpsat.constraints`), `no-hold` with each held-memory interval's size from 0 instead of its
least length (`solver.cpsat.variables`), `no-value-grid` with each proven bound one tick above what
CP-SAT proves, not the least value an optimum can take (`solver.cpsat.data`), `no-spacing` with
the bounds letting a device's head window fill as if its forwards were all there
(`solver.evaluate.device_bounds.forward_spacing`), `v-makespan-phase` with a span solve's makespan phase on
V placements too (`solver.solve`). Every schedule is
validated; each row prints the value, the proven bound, the gap and the wall time, and `*` marks the
default (no parameters). By default the default runs beside `no-opening` and `no-tight`.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass

from bench_targets import random_instances
from results_header import results_header

from pipesat.models import Instance, Tuning, load_instance
from pipesat.solver.evaluate.validator import ensure_valid
from pipesat.solver.solve import solve

V_CHUNK = {
    "forward_times": 2,
    "backward_times": 3,
    "weight_times": 1,
    "p2p_time": 0.1,
    "activation_memory": 1,
    "weight_memory": 0.5,
}


@dataclass(frozen=True)
class Case:
    name: str
    instance: Instance
    objective: str
    seconds: float | None = None  # None: the run's --seconds


def v_case(p: int, m: int, limit: float) -> Case:
    data = {"num_devices": p, "num_microbatches": m, "chunks": 2, "placement": "vshape", "memory_limit": limit}
    return Case(f"V p{p} m{m} limit {limit:g}", Instance.from_dict(data | V_CHUNK), "span")


CASES = [
    v_case(4, 8, 8),
    v_case(4, 8, 6),
    v_case(4, 12, 6),
    v_case(8, 16, 16),
    v_case(8, 16, 10),
    v_case(8, 16, 8),
    v_case(8, 24, 8),
    Case(
        "linear p8 m32 2x",
        Instance.from_dict(
            {
                "num_devices": 8,
                "num_microbatches": 32,
                "forward_times": 2,
                "backward_times": 3,
                "weight_times": 1,
                "p2p_time": 1,
                "memory_limit": "2x",
            }
        ),
        "makespan",
        20.0,
    ),
]
# bench_targets' limits below the 1F1B peak (60 s, the max span).
CASES += [
    Case(
        "linear p8 m32 0.5x",
        Instance.from_dict(
            {"num_devices": 8, "num_microbatches": 32, "weight_times": 1, "backward_times": 1, "memory_limit": "0.5x"}
        ),
        "span",
        60.0,
    ),
    Case(
        "1.5B p8 m32 0.5x",
        load_instance("instances/zb-paper/1.5b-p8-m32.yaml").with_changes(memory_limit="0.5x"),
        "span",
        60.0,
    ),
]
# bench_targets' misses before this portfolio: its 100-op case 10 (10 s) and 400-op cases 0, 5, 7 (60 s).
TARGET_MISSES = [(1, 24, 100, 10, 10.0), (2, 8, 400, 0, 60.0), (2, 8, 400, 5, 60.0), (2, 8, 400, 7, 60.0)]
for seed, count, most, index, seconds in TARGET_MISSES:
    missed = random_instances(seed, count, most)[index]
    CASES.append(Case(f"targets {most}-op #{index}", missed, "span", seconds))
VARIANTS: dict[str, dict[str, str]] = {
    # pipesat's default: with 2 workers, CP-SAT's objective lower-bound search as a second full search
    # (at most 150 ops) or a third thread beside LNS (larger models).
    "default": {},
    # CP-SAT's own choice for 2 workers (pipesat's default before): default_lp and one LNS thread.
    "cpsat-2": {"num_workers": "2"},
    # Each replaces the full subsolver of CP-SAT's 2-worker portfolio (default_lp) by another.
    "lb-search": {"extra_subsolvers": "objective_lb_search"},
    "shaving": {"extra_subsolvers": "objective_shaving"},
    "max-lp": {"extra_subsolvers": "max_lp"},
    "lb-tree": {"extra_subsolvers": "lb_tree_search"},
    # Two full subsolvers (default_lp and the bound search) and no thread left for LNS.
    "full2-lbs": {"num_full_subsolvers": "2", "extra_subsolvers": "objective_lb_search"},
    # pipesat's default without its bisection probes after a stall (solver.cpsat.probes), as before them.
    "no-probes": {},
    # pipesat's default without the opening probe at the bound (solver.cpsat.search), as before it.
    "no-opening": {},
    # pipesat's default without the tight memory precedences (solver.cpsat.constraints), as before them.
    "no-tight": {},
    # pipesat's default without the memory precedences between two stages of a device, as before them.
    "no-nested": {},
    # pipesat's default with each held interval's size from 0, not from its microbatch's round trip.
    "no-hold": {},
    # pipesat's default with probes on CP-SAT's 2-worker portfolio, not default_lp beside the same
    # search branching on precedences.
    "no-probe-precedences": {},
    # pipesat's default without the bound from stage 0's device proven first (solver.solve), as before it.
    "no-first-device": {},
    # pipesat's default with probes on CP-SAT's default disjunctive propagation, as before Tuning.strong_probes.
    "no-strong-probes": {},
    # pipesat's default with proven bounds one tick above what CP-SAT proves, not at the least value
    # an optimum can take above it (solver.cpsat.data.least_value_from), as before.
    "no-value-grid": {},
    # pipesat's default without forwards arriving spaced in the bounds (solver.evaluate.bounds), as before.
    "no-spacing": {},
    # pipesat's default with the span solve's makespan phase on V placements too (solver.solve), as before.
    "v-makespan-phase": {},
}
NEVER_STALLS = float("inf")  # a search that never counts as stalled never hands over to the probes
# The variants that change pipesat's own settings (`models.tuning`), not CP-SAT's.
SETTINGS: dict[str, Tuning] = {
    "no-probes": Tuning(stall_share=NEVER_STALLS),
    "no-opening": Tuning(opening_share=0.0),
    "no-tight": Tuning(tight_precedences=False),
    "no-nested": Tuning(nested_precedences=False),
    "no-hold": Tuning(least_holds=False),
    "no-probe-precedences": Tuning(probe_precedences=False),
    "no-first-device": Tuning(first_device_phase=0.0),
    "no-strong-probes": Tuning(strong_probes=False),
    "no-value-grid": Tuning(value_grid=False),
    "no-spacing": Tuning(spaced_forwards=False),
    "v-makespan-phase": Tuning(makespan_phase_on_v=True),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=40.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", default="", help="case names' starts, separated by commas")
    parser.add_argument("--variants", default="default,no-opening,no-tight", help="variant names, separated by commas")
    args = parser.parse_args()
    wanted = [part.strip() for part in args.only.split(",") if part.strip()]
    cases = [case for case in CASES if not wanted or any(case.name.startswith(w) for w in wanted)]
    variants = [name.strip() for name in args.variants.split(",") if name.strip()]
    print(results_header())
    print(f"{args.workers} workers, seed {args.seed}; * the default", flush=True)
    width = max(len(name) for name in variants) + 1
    print(
        f"{'instance':<22} {'variant':<{width}} {'value':>8} {'bound':>8} {'gap':>7} {'time s':>7}  status", flush=True
    )
    for case in cases:
        for name in variants:
            started = time.monotonic()
            result = solve(
                case.instance,
                objective=case.objective,
                time_limit=case.seconds or args.seconds,
                workers=args.workers,
                seed=args.seed,
                cpsat_params=VARIANTS[name],
                tuning=SETTINGS.get(name, Tuning()),
            )
            wall = time.monotonic() - started
            if result.schedule is not None:
                ensure_valid(result.schedule)
            gap = "-" if result.gap is None else f"{result.gap * 100:.2f}%"
            mark = "*" if name == "default" else " "
            value = "-" if result.value is None else f"{result.value:g}"
            bound = "-" if result.bound is None else f"{result.bound:g}"
            print(
                f"{case.name:<22} {mark}{name:<{width - 1}} {value:>8} {bound:>8} {gap:>7} {wall:>7.1f}  {result.status.value}",
                flush=True,
            )


if __name__ == "__main__":
    main()
