"""How fast `pipesat solve` answers Ctrl-C (SIGINT) and SIGTERM, and what it leaves behind.

For each signal and each moment after the solve has begun (its first line is printed: while the
heuristics run, early in the search, deep in the search) it starts `pipesat solve ... --save`, sends
the signal, and measures the seconds from the signal to the process's exit; then it checks the saved
schedule with `pipesat check`. The instance is large enough
(ZB 1.5B, p = 8, m = 64, 0.5x) that CP-SAT is mid-search at every moment.

    python benchmarks/bench_stop.py [--workers 2]
"""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
INSTANCE = ROOT / "instances" / "zb-paper" / "1.5b-p8-m64.yaml"
MOMENTS = (0.0, 0.2, 1.0, 3.0, 10.0)


def stop_once(sig: signal.Signals, after: float, workers: int, folder: Path) -> tuple[float, int, str, str]:
    """(seconds from the signal to exit, exit code, the status line, what `check` says of the saved file)."""
    saved = folder / f"{sig.name}-{after}.json"
    command = [sys.executable, "-c", "import cli; cli.main()", "solve", str(INSTANCE), "--memory-limit", "0.5x"]
    command += ["--time-limit", "120", "--workers", str(workers), "--save", str(saved), "--no-progress"]
    process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert process.stdout is not None
    header = process.stdout.readline()  # the solve has begun
    time.sleep(after)
    sent = time.monotonic()
    process.send_signal(sig)
    out, err = process.communicate()
    out = header + out
    elapsed = time.monotonic() - sent
    status = next((line for line in out.splitlines() if line.startswith("status:")), err.strip()[:60])
    checked = "not saved"
    if saved.exists():
        check = subprocess.run(
            [sys.executable, "-c", "import cli; cli.main()", "check", str(saved)],
            cwd=ROOT,
            capture_output=True,
            text=True,
        )
        checked = check.stdout.strip().split(": ", 1)[-1] or check.stderr.strip()
    return elapsed, process.returncode, status, checked


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    print(f"instance {INSTANCE.relative_to(ROOT)} at 0.5x, --time-limit 120, --workers {args.workers}")
    print(f"{'signal':<8} {'after start':>11} {'to exit':>8} {'exit':>5}  {'status':<40} saved schedule")
    with tempfile.TemporaryDirectory() as folder:
        for sig in (signal.SIGINT, signal.SIGTERM):
            for after in MOMENTS:
                elapsed, code, status, checked = stop_once(sig, after, args.workers, Path(folder))
                print(f"{sig.name:<8} {after:>10.1f}s {elapsed:>7.2f}s {code:>5}  {status:<40} {checked}")


if __name__ == "__main__":
    main()
