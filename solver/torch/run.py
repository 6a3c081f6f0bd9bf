"""Run a schedule for one training step in PyTorch and check its gradients.

`torch_run` refuses an invalid or deadlocking schedule before any process starts, then spawns one
gloo process per device on the CPU. Each process builds the same small `nn.Sequential` (one
`Linear` + `Tanh` block per stage, float64, fixed seed), wraps the blocks of its stages in
`PipelineStage`s, turns the schedule into torch's schedule object with `torch_schedule` (what a
user's training script calls) and runs one `step()` with a mean-squared-error loss and
`scale_grads=True`. It then compares its stages' gradients with those of plain, non-pipelined
training on the whole batch, which the mean loss makes equal.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

from pipesat.models import Schedule
from pipesat.solver.io.schedule_file import load_schedule, save_schedule
from pipesat.solver.torch.export import schedule_to_rows
from pipesat.solver.torch.import_schedule import require_torch
from pipesat.solver.torch.schedule import torch_schedule

WIDTH = 8
MICROBATCH_SIZE = 2
SEED = 0
# The largest gradient difference from plain training that passes (gradients, not schedule times or memory).
GRADIENT_TOLERANCE = 1e-9
TIMEOUT_S = 300.0
FAILURE_GRACE_S = 5.0
SCHEDULE_NAME = "schedule.json"


@dataclass(frozen=True)
class DeviceResult:
    """One process's outcome: the largest gradient difference from plain training, or its error."""

    device: int
    stages: tuple[int, ...]
    wall_s: float
    max_grad_error: float
    error: str | None = None

    @property
    def passed(self) -> bool:
        return self.error is None and self.max_grad_error <= GRADIENT_TOLERANCE


@dataclass(frozen=True)
class TorchRunResult:
    devices: tuple[DeviceResult, ...]
    total_wall_s: float

    @property
    def passed(self) -> bool:
        return len(self.devices) > 0 and all(device.passed for device in self.devices)


def torch_run(schedule: Schedule, timeout_s: float = TIMEOUT_S) -> TorchRunResult:
    """Execute `schedule` for one step with one gloo process per device; see the module docstring.

    Raises `ScheduleError` for an invalid or deadlocking schedule before any process starts, and
    `TorchMissing` when torch is not installed. The workers are fresh interpreters
    (`python -m solver.torch.run RANK FOLDER`), so any caller's main module is left alone.

    Parameters
    ----------
    schedule
        A valid schedule of at most a few devices.
    timeout_s
        Seconds the step may take.

    Returns
    -------
    TorchRunResult
        Each device's outcome against plain training (`passed`: all of them matched) and the wall time.

    Raises
    ------
    ScheduleError
        An invalid or deadlocking schedule, before any process starts.
    TorchMissing
        torch is not installed.
    """
    schedule_to_rows(schedule)  # refuses an invalid or deadlocking schedule
    require_torch()
    instance = schedule.instance
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="pipesat-torch-run-") as name:
        folder = Path(name)
        save_schedule(schedule, folder / SCHEDULE_NAME)
        processes = []
        for rank in range(instance.num_devices):
            log = (folder / f"rank{rank}.log").open("w")
            command = [sys.executable, "-m", "pipesat.solver.torch.run", str(rank), str(folder)]
            processes.append(subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT))
            log.close()
        _wait(processes, timeout_s)
        devices = tuple(_read_result(folder, rank, instance.placement) for rank in range(instance.num_devices))
    return TorchRunResult(devices, time.perf_counter() - started)


def _wait(processes: list[subprocess.Popen], timeout_s: float) -> None:
    """Wait for every worker; once one has failed, the others (likely stuck waiting for it) get
    FAILURE_GRACE_S more seconds before they are killed, as are any still running at the timeout."""
    deadline = time.monotonic() + timeout_s
    while any(process.poll() is None for process in processes) and time.monotonic() < deadline:
        if any(process.returncode not in (None, 0) for process in processes):
            deadline = min(deadline, time.monotonic() + FAILURE_GRACE_S)
        time.sleep(0.05)
    for process in processes:
        if process.poll() is None:
            process.kill()
            process.wait()


def _read_result(folder: Path, rank: int, placement: tuple[int, ...]) -> DeviceResult:
    """A worker's result file, or a failure naming the last line it printed."""
    try:
        data = json.loads((folder / f"rank{rank}.json").read_text(encoding="utf-8"))
        return DeviceResult(**{**data, "stages": tuple(data["stages"])})
    except (OSError, ValueError, TypeError):
        lines = (folder / f"rank{rank}.log").read_text(encoding="utf-8", errors="replace").strip().splitlines()
        last = lines[-1] if lines else "no output"
        stages = tuple(s for s, d in enumerate(placement) if d == rank)
        return DeviceResult(rank, stages, 0.0, float("inf"), f"the process died or timed out ({last})")


def build_model(num_stages: int):
    """The built-in model: one Linear+Tanh block per stage, float64, the same weights in every process."""
    import torch
    from torch import nn

    torch.manual_seed(SEED)
    return nn.Sequential(*[nn.Sequential(nn.Linear(WIDTH, WIDTH), nn.Tanh()) for _ in range(num_stages)]).double()


def batch(num_microbatches: int):
    """The input and target of the step: `num_microbatches` microbatches of MICROBATCH_SIZE rows."""
    import torch

    generator = torch.Generator().manual_seed(SEED + 1)
    rows = num_microbatches * MICROBATCH_SIZE
    x = torch.randn(rows, WIDTH, generator=generator, dtype=torch.float64)
    y = torch.randn(rows, WIDTH, generator=generator, dtype=torch.float64)
    return x, y


def _worker(rank: int, folder: Path) -> None:
    """A worker process: run its rank and write `rankN.json` (the error's last line if it failed)."""
    schedule = load_schedule(folder / SCHEDULE_NAME)
    stage_ids = tuple(schedule.instance.stages_of(rank))
    try:
        result = _run_rank(rank, folder, schedule, stage_ids)
    except Exception as error:
        last = traceback.format_exception_only(type(error), error)[-1].strip().splitlines()[0]
        result = DeviceResult(rank, stage_ids, 0.0, float("inf"), last)
    (folder / f"rank{rank}.json").write_text(json.dumps(dataclasses.asdict(result)), encoding="utf-8")
    sys.exit(0 if result.error is None else 1)


def _run_rank(rank: int, folder: Path, schedule: Schedule, stage_ids: tuple[int, ...]) -> DeviceResult:
    import torch
    import torch.distributed as dist
    from torch import nn
    from torch.distributed.pipelining import PipelineStage

    torch.set_num_threads(1)
    instance = schedule.instance
    init_method = f"file://{folder / 'rendezvous'}"
    dist.init_process_group("gloo", init_method=init_method, rank=rank, world_size=instance.num_devices)
    try:
        num_stages = instance.num_stages
        model = build_model(num_stages)
        x, y = batch(instance.num_microbatches)
        loss_fn = nn.MSELoss()
        stages = [PipelineStage(model[s], s, num_stages, torch.device("cpu")) for s in stage_ids]
        runtime = torch_schedule(schedule, stages, loss_fn=loss_fn)
        args = (x,) if 0 in stage_ids else ()
        target = y if num_stages - 1 in stage_ids else None
        dist.barrier()
        started = time.perf_counter()
        runtime.step(*args, target=target)
        wall_s = time.perf_counter() - started
        dist.barrier()

        reference = build_model(num_stages)
        loss_fn(reference(x), y).backward()
        error = 0.0
        for s in stage_ids:
            for mine, plain in zip(model[s].parameters(), reference[s].parameters(), strict=True):
                if mine.grad is None:
                    return DeviceResult(rank, stage_ids, wall_s, float("inf"), f"stage {s} got no gradient")
                error = max(error, float((mine.grad - plain.grad).abs().max()))
        return DeviceResult(rank, stage_ids, wall_s, error)
    finally:
        dist.destroy_process_group()


def format_result(result: TorchRunResult) -> list[str]:
    """Lines for the CLI: one per device, then the verdict."""
    lines = []
    for device in result.devices:
        verdict = "pass" if device.passed else "FAIL"
        detail = device.error or f"max gradient difference {device.max_grad_error:.1e}"
        stages = ",".join(map(str, device.stages))
        lines.append(f"device {device.device} (stages {stages}): {verdict}, step {device.wall_s:.3f} s, {detail}")
    if result.passed:
        lines.append(f"pass: every stage's gradients match plain training (within {GRADIENT_TOLERANCE:g})")
    else:
        lines.append("FAIL: see the devices above")
    lines.append(f"total wall time {result.total_wall_s:.1f} s (process start, gloo setup, one step)")
    return lines


if __name__ == "__main__":
    _worker(int(sys.argv[1]), Path(sys.argv[2]))
