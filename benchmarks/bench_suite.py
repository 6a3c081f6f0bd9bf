"""The solver against every heuristic on a fixed suite, side by side, with proofs and timings.

Run: `python benchmarks/bench_suite.py [--quick] [--time-limit 60] [--workers 1] [--filter TEXT] [--csv PATH]`
(the full suite is long: up to about 70 x the time limit; `--quick` runs a subset in under 2 minutes).

The suite: the ZB paper's Table 5 (docs/reference.md, all 12 rows) at memory limits p·M_B, 1.5p·M_B
and 2p·M_B (1x, 1.5x, 2x) with the max span, the paper's measure, and the 1.5B rows also below 1x
(0.5x, 0.75x); small instances p = 4 and 8, m = 8 to 32 with F/B/W from Table 5 rounded, p2p 0 and 1,
limits 0.5x, 1x and 2x, makespan; V placement p = 4 to 16 at 0.5x, 1x and 2x and interleaved
placement (2 chunks) p = 4 and 8 at 1x and 2x, max span; the modern 7B/70B instances, whose first and
last stages differ from the rest (embedding, head), at 0.5x and 1x; the seed examples
(instances/sample_config.*).

Per instance: every applicable heuristic's value (re-timed for the least max span when that is the
objective; "over" when it breaks the memory limit; in the CSV), the best of each family in the table
(GPipe and 1F1B with interleaved 1F1B; ZB-H1, ZB-H2 and ZB-auto; the V schedules and ZB-V), the
solver's value, proven bound, gap, status,
seconds to the first and the best schedule, wall seconds of the whole solve (heuristics, bounds,
model building and search), and the model build seconds on their own (measured apart). For Table 5 rows
also the bubble rate, (max span - busy time) / max span, next to the paper's ZB-1p / ZB-2p figure.
Every returned schedule is validated. The table goes to stdout, the rows to a CSV file.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import time
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

from results_header import results_header

from pipesat.models import Instance, PipesatError
from pipesat.models.instance import parse_memory_limit
from pipesat.models.instance_file import load_instance
from pipesat.models.ops import expected_op_keys
from pipesat.models.tolerance import fits
from pipesat.solver.cpsat.data import model_data
from pipesat.solver.cpsat.model import build_model
from pipesat.solver.evaluate.device_bounds import zero_bubble_bound
from pipesat.solver.evaluate.metrics import compute_metrics
from pipesat.solver.evaluate.retime import retimed_for
from pipesat.solver.evaluate.validator import validate
from pipesat.solver.heuristics import all_heuristics, run_heuristic
from pipesat.solver.report.solve_text import outcome_text
from pipesat.solver.solve import solve

ROOT = Path(__file__).resolve().parent.parent

DEFAULT_CSV = ROOT / "benchmarks" / "results" / "suite.csv"
# The paper's bubble rate for its automatic schedule at each limit (Table 5's ZB-1p and ZB-2p).
PUBLISHED = {"1x": "zb-1p", "2x": "zb-2p"}
# F/B/W (ms) of Table 5's 1.5B and 6.2B rows, rounded.
ROUNDED_TIMES = ((19, 18, 9), (30, 29, 20))
# The families the table shows the best of, by heuristic name.
FAMILIES = {
    "best 1F1B": ("gpipe", "1f1b", "interleaved"),
    "best ZB": ("zb-h1", "zb-h2", "zb-auto"),
    "best V": ("v-min", "v-half", "v-zb", "v-auto", "zb-v"),
}


@dataclass(frozen=True)
class Case:
    """One suite entry: a name, the instance (memory limit set), the objective, and the limit's label."""

    name: str
    instance: Instance
    objective: str
    limit: str
    quick: bool


def with_limit(instance: Instance, limit: str) -> Instance:
    return dataclasses.replace(instance, memory_limit=parse_memory_limit(limit, instance))


def suite() -> Iterator[Case]:
    """Every case of the suite, in order."""
    for path in sorted((ROOT / "instances" / "zb-paper").glob("*.yaml")):
        base = load_instance(path)
        below = ("0.5x", "0.75x") if base.name.startswith("zb-1.5b") else ()
        for limit in ("1x", "2x", "1.5x", *below):
            quick = base.num_devices == 8 and base.num_microbatches == 24 and limit in ("1x", "2x", "0.5x")
            yield Case(f"{base.name}@{limit}", with_limit(base, limit), "span", limit, quick)
    for p in (4, 8):
        for index, m in enumerate((8, 16, 32)):
            forward, backward, weight = ROUNDED_TIMES[index % 2]
            for p2p in (0, 1):
                for limit in ("0.5x", "1x", "2x"):
                    data = {
                        "num_devices": p,
                        "num_microbatches": m,
                        "forward_times": forward,
                        "backward_times": backward,
                        "weight_times": weight,
                        "p2p_time": p2p,
                    }
                    instance = with_limit(Instance.from_dict(data), limit)
                    name = f"p{p}-m{m}-fbw{forward}/{backward}/{weight}-p2p{p2p}@{limit}"
                    yield Case(name, instance, "makespan", limit, p == 4 and m == 8)
    for p in (4, 8, 16):
        data = {
            "num_devices": p,
            "num_microbatches": 2 * p,
            "chunks": 2,
            "placement": "vshape",
            "forward_times": 9.5,
            "backward_times": 9,
            "weight_times": 4.5,
            "p2p_time": 0.5,
        }
        for limit in ("0.5x", "1x", "2x"):
            instance = with_limit(Instance.from_dict(data), limit)
            yield Case(f"vshape-p{p}-m{2 * p}@{limit}", instance, "span", limit, p == 4 and limit != "2x")
    for p in (4, 8):
        data = {
            "num_devices": p,
            "num_microbatches": 2 * p,
            "chunks": 2,
            "placement": "interleaved",
            "forward_times": 19,
            "backward_times": 18,
            "weight_times": 9,
            "p2p_time": 0.5,
        }
        for limit in ("1x", "2x"):
            instance = with_limit(Instance.from_dict(data), limit)
            yield Case(f"interleaved-p{p}-m{2 * p}@{limit}", instance, "span", limit, p == 4 and limit == "1x")
    for path in sorted((ROOT / "instances" / "modern").glob("*.yaml")):
        base = load_instance(path)
        if len(expected_op_keys(base, True)) > 6000:
            continue  # the 70B p16 instance: 6,144 ops; its rows would only repeat p = 8's
        for limit in ("0.5x", "1x"):
            yield Case(f"{base.name}@{limit}", with_limit(base, limit), "span", limit, "7b-p4" in base.name)
    for path in sorted((ROOT / "instances").glob("sample_config.*")):
        instance = load_instance(path)
        yield Case(f"{path.name}", instance, "makespan", "none", path.suffix == ".yaml")


def heuristic_value(name: str, instance: Instance, objective: str) -> float | str:
    """The heuristic's value for the objective, "over" when it breaks the limit, "" when it does not apply."""
    try:
        schedule = run_heuristic(name, instance)
    except PipesatError:
        return ""
    schedule = retimed_for(objective, schedule)
    if validate(schedule):
        return "over"
    return compute_metrics(schedule).objective(objective)


def build_seconds(instance: Instance, objective: str) -> float:
    started = time.monotonic()
    build_model(model_data(instance, objective=objective, split_backward=instance.split_backward))
    return time.monotonic() - started


def run_case(case: Case, heuristics: list[str], time_limit: float, workers: int) -> dict[str, str]:
    instance = case.instance
    row = {
        "instance": case.name,
        "objective": case.objective,
        "limit": case.limit,
        "ops": str(len(expected_op_keys(instance, instance.split_backward))),
    }
    values = {name: heuristic_value(name, instance, case.objective) for name in heuristics}
    row |= {name: value if isinstance(value, str) else f"{value:.6g}" for name, value in values.items()}
    for family, names in FAMILIES.items():
        fitting_family = [values[name] for name in names if isinstance(values.get(name), float)]
        tried = [values[name] for name in names if values.get(name) == "over"]
        row[family] = f"{min(fitting_family):.6g}" if fitting_family else ("over" if tried else "")
    result = solve(instance, case.objective, time_limit=time_limit, workers=workers, seed=0)
    if result.schedule is None:
        raise SystemExit(f"{case.name}: no schedule: {outcome_text(result)}")
    violations = validate(result.schedule)
    if violations:
        raise SystemExit(f"{case.name}: the solver's schedule is invalid: {violations[0]}")
    fitting = [value for value in values.values() if isinstance(value, float)]
    best = min(fitting) if fitting else None
    busy = zero_bubble_bound(instance, instance.split_backward)
    published = instance.metadata.get("published_bubble_rates", {}).get(PUBLISHED.get(case.limit, ""), "")
    row |= {
        "solver": f"{result.value:.6g}",
        "bound": f"{result.bound:.6g}",
        "gap%": f"{100 * result.gap:.3f}",
        "status": result.status,
        "vs best heuristic": "" if best is None else _versus(result.value, best),
        "bubble": f"{(result.value - busy) / result.value:.4f}" if case.objective == "span" else "",
        "paper": f"{published}",
        "first s": f"{result.time_to_first or 0:.2f}",
        "best s": f"{result.time_to_best or 0:.2f}",
        "wall s": f"{result.solve_time:.2f}",
        "build s": f"{build_seconds(instance, case.objective):.2f}",
    }
    return row


def _versus(value: float, best: float) -> str:
    """How the solver's value compares with the best heuristic's (equal up to `models.tolerance`)."""
    if not fits(best, value):
        return f"-{100 * (best - value) / best:.3g}%"
    if not fits(value, best):
        return "WORSE"
    return "="


def print_row(row: dict[str, str], widths: dict[str, int]) -> None:
    print(" ".join(row.get(column, "").rjust(width) for column, width in widths.items()), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="A subset that runs in under 2 minutes.")
    parser.add_argument("--time-limit", type=float, default=60.0, help="Seconds per solve (quick: at most 10).")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--filter", default="", help="Only cases whose name contains this text.")
    parser.add_argument(
        "--csv",
        type=Path,
        default=None,
        help=f"Where to write the rows (default: {DEFAULT_CSV} for the whole suite; a --quick or --filter run "
        "writes none, so it never replaces the whole suite's rows).",
    )
    args = parser.parse_args()

    time_limit = min(args.time_limit, 10.0) if args.quick else args.time_limit
    cases = [case for case in suite() if args.filter in case.name and (case.quick or not args.quick)]
    heuristics = [heuristic.name for heuristic in all_heuristics()]
    shown = ["instance", "objective", "limit", "ops", *FAMILIES]
    shown += ["solver", "bound", "gap%", "status", "vs best heuristic", "bubble", "paper"]
    shown += ["first s", "best s", "wall s", "build s"]
    columns = [*shown[:4], *heuristics, *shown[4:]]
    widths = {column: max(len(column), 7) for column in shown}
    widths["instance"] = max(len(case.name) for case in cases) if cases else 8
    widths["status"] = 11
    header = results_header()
    print(header)
    print(f"{len(cases)} cases, time limit {time_limit:g} s, {args.workers} worker(s)")
    print_row({column: column for column in columns}, widths)
    path = args.csv or (None if args.quick or args.filter else DEFAULT_CSV)
    started = time.monotonic()
    with ExitStack() as stack:
        writer = None
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            handle = stack.enter_context(path.open("w", newline=""))
            handle.write(f"{header}\r\n")  # csv ends its rows so too
            writer = csv.DictWriter(handle, fieldnames=columns)
            writer.writeheader()
        for case in cases:
            row = run_case(case, heuristics, time_limit, args.workers)
            print_row(row, widths)
            if writer is not None:
                writer.writerow(row)
                handle.flush()
    print(f"total {time.monotonic() - started:.1f} s" + ("" if path is None else f"; rows in {path}"))


if __name__ == "__main__":
    main()
