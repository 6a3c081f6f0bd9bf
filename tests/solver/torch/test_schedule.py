"""torch_schedule: a schedule file becomes torch's schedule object for the user's own stages.

The checks run in-process with fake stages; the training example of docs/torch.md runs for real
under torchrun (two gloo processes on the CPU, a few seconds).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pipesat.models import InputError, Instance, Op, Schedule, ScheduleError
from pipesat.solver.heuristics import run_heuristic
from pipesat.solver.io.schedule_file import save_schedule
from pipesat.solver.torch.export import schedule_to_rows
from pipesat.solver.torch.import_schedule import INSTALL_HINT, TorchMissing
from pipesat.solver.torch.schedule import torch_schedule
from tests.conftest import ROOT
from tests.solver.torch.torch_fakes import fake_stage
from tests.strategies import assert_valid

torch = pytest.importorskip("torch", reason=INSTALL_HINT)

EXAMPLE = ROOT / "docs" / "torch.md"


@pytest.fixture
def zb_v() -> Schedule:
    """ZB-V on 2 devices and 4 stages: rank 0 runs stages 0 and 3, rank 1 runs stages 1 and 2."""
    instance = Instance.from_dict(
        {"num_devices": 2, "num_microbatches": 4, "chunks": 2, "placement": "vshape", "weight_times": 1}
    )
    return assert_valid(run_heuristic("zb-v", instance))


def _stages(indices: list[int], rank: int = 0, num_stages: int = 4, group_size: int = 2) -> list[Any]:
    return [fake_stage(s, num_stages, group_size, rank) for s in indices]


@pytest.mark.parametrize("rank", [0, 1])
def test_a_schedule_file_becomes_torch_runtime_with_its_order(tmp_path: Path, zb_v: Schedule, rank: int) -> None:
    path = save_schedule(zb_v, tmp_path / "zbv.json")
    stages = _stages(zb_v.instance.stages_of(rank), rank)
    runtime = torch_schedule(path, stages, loss_fn=torch.nn.MSELoss())
    assert runtime._n_microbatches == 4 and runtime._stages == stages
    assert runtime.stage_index_to_group_rank == {0: 0, 1: 1, 2: 1, 3: 0}
    assert [[str(action) for action in row] for row in runtime.pipeline_order.values()] == schedule_to_rows(zb_v)
    assert any("SEND_F" in str(action) for action in runtime.pipeline_order_with_comms[rank])


@pytest.mark.parametrize(
    ("stages", "options", "message"),
    [
        (_stages([0, 3]), {"n_microbatches": 8}, "n_microbatches is 8 but the schedule has 4 microbatches"),
        ([], {}, "no stages given; pass the PipelineStage of each stage"),
        ([object()], {}, r"stages\[0\] is a object, not a PipelineStage; wrap your module"),
        (_stages([0, 3], num_stages=2), {}, "stage 0 was built with num_stages=2 but the schedule has 4 stages"),
        (_stages([0, 3], group_size=4), {}, "the process group has 4 ranks but the schedule has 2 devices; run 2"),
        (_stages([0, 1]), {}, r"rank 0 was given stages \[0, 1\] but the schedule places stages \[0, 3\] on it"),
        (_stages([0]), {}, r"rank 0 was given stages \[0\] but the schedule places stages \[0, 3\]"),
        (_stages([2], rank=1), {}, r"rank 1 was given stages \[2\] but the schedule places stages \[1, 2\]"),
    ],
)
def test_stages_that_do_not_match_the_schedule_are_one_line(
    zb_v: Schedule, stages: list[Any], options: dict[str, int], message: str
) -> None:
    with pytest.raises(InputError, match=message) as raised:
        torch_schedule(zb_v, stages, loss_fn=torch.nn.MSELoss(), **options)
    assert "\n" not in str(raised.value)


def test_stages_may_come_in_any_order(zb_v: Schedule) -> None:
    runtime = torch_schedule(zb_v, _stages([3, 0]), loss_fn=torch.nn.MSELoss())
    assert [stage.stage_index for stage in runtime._stages] == [3, 0]


def test_an_invalid_schedule_is_refused(zb_v: Schedule) -> None:
    # Corruption: microbatch 2's last-stage forward is dropped.
    ops = tuple(op for op in zb_v.ops if op.key != ("F", 3, 2))
    with pytest.raises(ScheduleError, match=r"F\(stage 3, mb 2\) is missing"):
        torch_schedule(Schedule(zb_v.instance, ops, "broken"), _stages([0, 3]), loss_fn=torch.nn.MSELoss())
    # Corruption: stage 1's forward of microbatch 0 starts before stage 0's has ended.
    early = tuple(Op(*op[:4], 0.0, op.end - op.start) if op.key == ("F", 1, 0) else op for op in zb_v.ops)
    with pytest.raises(ScheduleError, match="invalid schedule"):
        torch_schedule(Schedule(zb_v.instance, early, "early"), _stages([0, 3]), loss_fn=torch.nn.MSELoss())


def _example_code() -> str:
    """The training script of docs/torch.md (its first python block)."""
    blocks = re.findall(r"```python\n(.*?)```", EXAMPLE.read_text(encoding="utf-8"), flags=re.DOTALL)
    assert blocks, f"{EXAMPLE} has no python example"
    return blocks[0]


def test_the_documented_training_loop_trains_under_torchrun(tmp_path: Path, zb_v: Schedule) -> None:
    """Run from a training repository's root, which has its own `models/` and `solver/` packages (first on
    sys.path, beside the script): pipesat's imports must not reach them."""
    for own in ("models", "solver", "cli"):
        (tmp_path / own).mkdir()
        (tmp_path / own / "__init__.py").write_text(f"raise ImportError('the training repository\\'s own {own}')\n")
    script = tmp_path / "train.py"
    script.write_text(_example_code(), encoding="utf-8")
    save_schedule(zb_v, tmp_path / "zbv.json")
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    done = subprocess.run(
        [*command, str(script), "zbv.json"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout + done.stderr
    losses = [float(value) for value in re.findall(r"^step \d+: loss (\S+)$", done.stdout, flags=re.MULTILINE)]
    assert len(losses) == 3, done.stdout
    assert losses == sorted(losses, reverse=True) and losses[-1] < losses[0]


def test_without_torch_it_says_how_to_install(monkeypatch: pytest.MonkeyPatch, zb_v: Schedule) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)  # makes `import torch` raise ImportError
    with pytest.raises(TorchMissing, match=re.escape(INSTALL_HINT)):
        torch_schedule(zb_v, _stages([0, 3]), loss_fn=None)
