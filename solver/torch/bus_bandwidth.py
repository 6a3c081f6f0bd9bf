"""The all-reduce bus bandwidth of the visible GPUs, measured as nccl-tests measures it.

One process per GPU (torch.multiprocessing: spawned, fresh interpreters, so CUDA starts clean in
each; forked on the CPU) joins a process group and all-reduces a buffer of each size, WARMUP times
untimed and then `repeats` times timed; the time of one is rank 0's mean, and the bus bandwidth is
what nccl-tests calls busbw: size·2(n-1)/n over that time, the bytes each GPU's link carries in a
ring all-reduce, so that it compares with the link's bandwidth whatever n is. NCCL on CUDA in bf16 (what the tensor-parallel
all-reduces move); gloo on the CPU in fp32 (gloo has no bf16 sum), which the tests use to check the
arithmetic and the processes without a GPU.
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pipesat.solver.instances.calibration import BusBandwidth
from pipesat.solver.torch.measure import measured_value

SIZES = (1 << 20, 1 << 24, 1 << 28)
"""1 MiB (latency-bound), 16 MiB (a layer's all-reduce at a few thousand tokens) and 256 MiB (a
gradient bucket's size and more: the link's bandwidth)."""
WARMUP = 5
REPEATS = 20
RESULT = "all_reduce.json"


def measure_all_reduce(
    backend: str, processes: int, sizes: Sequence[int] = SIZES, repeats: int = REPEATS
) -> tuple[BusBandwidth, ...]:
    """The bus bandwidth of one all-reduce of each of `sizes` bytes over `processes` ranks of `backend`
    (nccl: one GPU each; gloo: the CPU)."""
    import torch.multiprocessing

    with tempfile.TemporaryDirectory(prefix="pipesat-all-reduce-") as name:
        folder = Path(name)
        args = (processes, backend, tuple(sizes), repeats, str(folder))
        # CUDA cannot start again in a forked child; a CPU process group can, and starts at once.
        start = "spawn" if backend == "nccl" else "fork"
        torch.multiprocessing.start_processes(_worker, args=args, nprocs=processes, join=True, start_method=start)
        rows = json.loads((folder / RESULT).read_text(encoding="utf-8"))
    return tuple(BusBandwidth(**row) for row in rows)


def bus_bandwidth(size_bytes: int, time_ms: float, processes: int) -> float:
    """nccl-tests' busbw of an all-reduce, GB/s: the bytes each rank's link carries in a ring over the time."""
    return size_bytes * 2 * (processes - 1) / processes / (time_ms / 1e3) / 1e9


def _worker(rank: int, processes: int, backend: str, sizes: tuple[int, ...], repeats: int, folder: str) -> None:
    import torch
    import torch.distributed as dist

    cuda = backend == "nccl"
    if cuda:
        torch.cuda.set_device(rank)
    device = torch.device("cuda", rank) if cuda else torch.device("cpu")
    dtype = torch.bfloat16 if cuda else torch.float32
    init_method = f"file://{Path(folder) / 'rendezvous'}"
    dist.init_process_group(backend, init_method=init_method, rank=rank, world_size=processes)
    try:
        rows = []
        for size in sizes:
            buffer = torch.ones(max(1, size // dtype.itemsize), dtype=dtype, device=device)
            for _ in range(WARMUP):
                dist.all_reduce(buffer)
            _wait(torch, cuda)
            dist.barrier()
            start = time.perf_counter()
            for _ in range(repeats):
                dist.all_reduce(buffer)
            _wait(torch, cuda)
            time_ms = (time.perf_counter() - start) * 1e3 / repeats
            moved = buffer.numel() * dtype.itemsize
            bandwidth = bus_bandwidth(moved, time_ms, processes)
            rows.append(
                {"size_bytes": moved, "time_ms": measured_value(time_ms), "bus_bandwidth": measured_value(bandwidth)}
            )
        if rank == 0:
            (Path(folder) / RESULT).write_text(json.dumps(rows), encoding="utf-8")
    finally:
        dist.destroy_process_group()


def _wait(torch: Any, cuda: bool) -> None:
    if cuda:
        torch.cuda.synchronize()
