"""Activation offload under memory limits (issue 47, item 6): CP-SAT with and without offload, against
the best handwritten offload schedule and the no-limit optimum.

    python benchmarks/bench_offload.py [--time-limit 60] [--instances 7b-p4-vshape-m16,...]

Per instance and per memory limit (1/4, 1/3, 1/2 of 1F1B's peak, of the device that holds the
most; the same limit on every device): CP-SAT without offload (its makespan, or "no schedule fits"),
CP-SAT with offload (makespan, lower bound, proven gap), the best
handwritten schedule that offloads and fits, and the no-limit optimum (CP-SAT without a limit, its
gap). Every schedule is validated. The handwritten offload schedules are every entry of the registry
(`solver.heuristics.handwritten_schedules`) whose schedule has transfers, plus the one-at-a-time order
with everything offloaded; the best of them that fits, and the schedule without offload, are given
to the offload solve as starts.

The host link is each GPU's PCIe x16, one direction, after its 128b/130b encoding: PCIe 4.0 for A100
(16 GT/s x 16 lanes = 31.5 GB/s), PCIe 5.0 for H100 (32 GT/s: 63 GB/s). In the instances' units
(MiB, ms): GB/s x 10^9 bytes / 2^20 bytes a MiB / 1000 ms a s.

Timings are CP-SAT's under a shared machine's load (2 workers, seed 0): the values are what the
search reached in its time, not a property of the instance.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from results_header import results_header

from pipesat.models import Instance, Schedule, load_instance
from pipesat.models.ops import expected_op_keys
from pipesat.solver.evaluate.metrics import compute_metrics
from pipesat.solver.evaluate.validator import ensure_valid, validate
from pipesat.solver.heuristics import handwritten_schedules
from pipesat.solver.heuristics.offloaded import NAME as OFFLOADED
from pipesat.solver.heuristics.offloaded import offloaded_one_at_a_time
from pipesat.solver.solve import solve

ROOT = Path(__file__).resolve().parent.parent
PCIE_GB_S = {"A100": 31.5, "H100": 63.0}
"""One direction of a PCIe x16 link after encoding: 4.0 (A100), 5.0 (H100)."""

INSTANCES = {
    "7b-p4-vshape-m16": ("instances/modern/7b-p4-vshape-m16.yaml", "H100"),
    "1.5b-p4-m16": ("instances/modern/1.5b-p4-m16.yaml", "H100"),
    "pipeoffload-gpt-p4-v-m8": ("instances/offload/pipeoffload-gpt-p4-v-m8.yaml", "A100"),
    "optpipe-llama-p8-m16": ("instances/offload/optpipe-llama-p8-m16.yaml", "H100"),
}
FACTORS = ((0.25, "1/4"), (1 / 3, "1/3"), (0.5, "1/2"))
MIB = 2**20


def link_bandwidth(gb_per_s: float) -> float:
    """A link's GB/s in MiB per ms (the instances' units)."""
    return gb_per_s * 1e9 / MIB / 1000


@dataclass(frozen=True)
class Row:
    """One instance at one limit."""

    instance: str
    limit: str
    ops: int
    without: str
    offload: str
    bound: str
    gap: str
    handwritten: str
    unlimited: str
    link: str
    transfers: str


def best_offload_schedule(instance: Instance) -> tuple[str, Schedule] | None:
    """The fastest valid schedule that offloads among the registry's and the offloaded one-at-a-time."""
    split = instance.split_backward
    found = [(name, s) for name, s in handwritten_schedules(instance, offload=True) if s.transfers]
    found.append((OFFLOADED, offloaded_one_at_a_time(instance, split)))
    valid = [(name, s) for name, s in found if not validate(s)]
    return min(valid, key=lambda item: compute_metrics(item[1]).makespan, default=None)


def fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def rows_of(name: str, path: str, gpu: str, time_limit: float) -> list[Row]:
    """The benchmark's rows for one instance (see the module notes)."""
    base = load_instance(ROOT / path)
    bandwidth = link_bandwidth(PCIE_GB_S[gpu])
    base = dataclasses.replace(base, host_link_bandwidth=bandwidth)
    split = base.split_backward
    ops = len(expected_op_keys(base, split))
    options = {"time_limit": time_limit, "workers": 2, "seed": 0}
    free = solve(base.with_limit(None), **options)
    if free.schedule is not None:
        ensure_valid(free.schedule)
    unlimited = f"{fmt(free.value)} ({100 * (free.gap or 0):.1f}%)"
    rows = []
    for factor, label in FACTORS:
        limited = base.with_limit(f"{factor}x")
        plain = solve(limited, **options)
        if plain.schedule is not None:
            ensure_valid(plain.schedule)
        best = best_offload_schedule(limited)
        # The offload solve starts from the best handwritten offload schedule and from the solve
        # without offload (offloading nothing is one of its choices), so it is at or below both.
        starts = [s for s in (best[1] if best is not None else None, plain.schedule) if s is not None]
        offloaded = solve(limited, offload=True, starts=starts, **options)
        transfers = "-"
        if offloaded.schedule is not None:
            ensure_valid(offloaded.schedule)
            transfers = f"{len(offloaded.schedule.transfers) // 2}/{ops // (3 if split else 2)}"
        handwritten = "none fits" if best is None else f"{compute_metrics(best[1]).makespan:.1f} ({best[0]})"
        rows.append(
            Row(
                instance=name,
                limit=f"{label} ({limited.memory_limit[0] / 1024:.2f} GiB)",
                ops=ops,
                without="no schedule fits" if plain.schedule is None else fmt(plain.value),
                offload="no schedule fits" if offloaded.schedule is None else fmt(offloaded.value),
                bound=fmt(offloaded.bound),
                gap="-" if offloaded.gap is None else f"{100 * offloaded.gap:.1f}%",
                handwritten=handwritten,
                unlimited=unlimited,
                link=f"{bandwidth:.2f} MiB/ms ({gpu} PCIe {PCIE_GB_S[gpu]:g} GB/s)",
                transfers=transfers,
            )
        )
        print(f"  {rows[-1]}", file=sys.stderr, flush=True)
    return rows


HEADINGS = (
    "instance",
    "limit (of 1F1B peak)",
    "ops",
    "no offload",
    "offload",
    "bound",
    "gap",
    "handwritten offload",
    "no limit (gap)",
    "offloaded",
    "host link",
)


def table(rows: list[Row]) -> str:
    """The rows as a fixed-width table."""
    cells = [
        (
            r.instance,
            r.limit,
            str(r.ops),
            r.without,
            r.offload,
            r.bound,
            r.gap,
            r.handwritten,
            r.unlimited,
            r.transfers,
            r.link,
        )
        for r in rows
    ]
    widths = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(HEADINGS)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(HEADINGS, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.ljust(w) for c, w in zip(cell, widths, strict=True)) for cell in cells]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--time-limit", type=float, default=60.0, help="seconds of CP-SAT per solve")
    parser.add_argument("--instances", default=",".join(INSTANCES), help="comma-separated names")
    parser.add_argument("--save", action="store_true", help="also write benchmarks/results/offload.txt")
    args = parser.parse_args()
    rows = []
    for name in args.instances.split(","):
        path, gpu = INSTANCES[name]
        rows += rows_of(name, path, gpu, args.time_limit)
    load = os.getloadavg()
    text = "\n".join(
        [
            results_header(),
            f"# CP-SAT: 2 workers, seed 0, {args.time_limit:g} s a solve; load average {load[0]:.2f} "
            f"{load[1]:.2f} {load[2]:.2f}; times in ms",
            table(rows),
        ]
    )
    print(text)
    if args.save:
        (ROOT / "benchmarks" / "results" / "offload.txt").write_text(text + "\n")


if __name__ == "__main__":
    main()
