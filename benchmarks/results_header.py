"""The first line of a benchmark's results: when it ran, on which commit, with which command.

`benchmarks/results/*.txt` are a benchmark's output as run, and each is overwritten by the next run,
so the line says which run it holds; earlier runs are kept in `benchmarks/experiments/`.
"""

from __future__ import annotations

import datetime
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def results_header() -> str:
    """`# 2026-12-02, commit 2d6a64a: python benchmarks/bench_proofs.py --variants default,no-hold`
    (`2d6a64a-dirty` when the work tree has changes: the numbers are then of uncommitted code)."""
    described = subprocess.run(
        ["git", "describe", "--always", "--dirty", "--abbrev=7"], cwd=ROOT, capture_output=True, text=True, check=False
    )
    commit = described.stdout.strip() or "unknown"
    command = shlex.join(["python", f"benchmarks/{Path(sys.argv[0]).name}", *sys.argv[1:]])
    return f"# {datetime.date.today().isoformat()}, commit {commit}: {command}"
