"""What the CP-SAT layer knows of processes without OR-Tools (`solver.cpsat.processes`)."""

from __future__ import annotations

import os
import subprocess
import sys

from pipesat.solver.cpsat import child
from pipesat.solver.cpsat.processes import STOP_GRACE, available_cores


def test_the_cores_are_those_this_process_may_run_on() -> None:
    assert 1 <= available_cores() <= (os.cpu_count() or 1)


def test_the_child_gives_a_stopped_search_the_grace_the_executors_wait_for() -> None:
    assert child.STOP_GRACE is STOP_GRACE


def test_the_plan_executors_and_the_cores_import_no_ortools() -> None:
    code = (
        "import sys\nimport pipesat.solver.cpsat.processes, pipesat.solver.plan.executors\n"
        "print('ortools' in {m.split('.')[0] for m in sys.modules})"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False"]
