"""Load a torch schedule CSV into torch's own runtime with fake stages (no processes, no model).

`_PipelineScheduleRuntime._load_csv(path, format="compute_only")` (torch 2.13.0, a private API)
validates the rows, infers the stage-to-rank placement and adds the sends and receives, raising
"Malformed compute schedule" on a deadlock. The runtime reads only a stage's `num_stages`,
`group_size`, `group_rank` and `stage_index` before `step()`, so plain namespaces stand in for stages.
"""

from __future__ import annotations

import types
from pathlib import Path
from typing import Any

import pytest

from pipesat.solver.torch.import_schedule import INSTALL_HINT


def fake_stage(stage_index: int, num_stages: int, group_size: int, group_rank: int = 0) -> Any:
    """What torch's runtime reads of a `PipelineStage` before `step()`."""
    return types.SimpleNamespace(
        stage_index=stage_index, num_stages=num_stages, group_size=group_size, group_rank=group_rank
    )


def load_in_torch(path: Path, num_devices: int, num_stages: int, num_microbatches: int) -> Any:
    """The runtime after `_load_csv`; skips the test when torch is not installed."""
    pytest.importorskip("torch", reason=INSTALL_HINT)
    from torch.distributed.pipelining.schedules import _PipelineScheduleRuntime

    stages = [fake_stage(s, num_stages, num_devices) for s in range(num_stages // num_devices)]
    runtime = _PipelineScheduleRuntime(stages, num_microbatches)
    runtime._load_csv(str(path), format="compute_only")
    return runtime
