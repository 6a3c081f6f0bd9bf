"""Export a schedule in Chrome's trace-event format (opened by Perfetto and chrome://tracing).

One process `pipesat: NAME` holds one thread (track) per device with a complete event (`"ph": "X"`)
per op, named like the rest of pipesat names ops (`F(stage 2, mb 5)`), and one counter track per
device with its held activation memory from the metrics module. A schedule that offloads has a
track per direction of each device's host link, with its offloads (O) or reloads (R). Schedule times have no unit; the
trace shows one time unit as one millisecond (`ts` and `dur` are in microseconds).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pipesat.models import Kind, Schedule, pair_label
from pipesat.models.ops import TRANSFER_KINDS
from pipesat.solver.evaluate.metrics import memory_profiles
from pipesat.solver.evaluate.validator import ensure_valid
from pipesat.solver.io.output_file import write_output

MICROSECONDS_PER_UNIT = 1000.0
PROCESS_ID = 0


def device_track_name(device: int) -> str:
    return f"device {device}"


def link_track_name(device: int, kind: Kind) -> str:
    """A device's host-link direction: its offloads (device to host) or its reloads (host to device)."""
    return f"device {device} link, " + ("device to host" if kind == Kind.O else "host to device")


def memory_counter_name(device: int) -> str:
    return f"memory device {device}"


def chrome_trace(schedule: Schedule) -> dict[str, Any]:
    """The trace-event JSON object of a valid schedule (raises ScheduleError for an invalid one)."""
    ensure_valid(schedule)
    instance = schedule.instance
    title = f"pipesat: {schedule.name or instance.name or 'schedule'}"
    events: list[dict[str, Any]] = [
        {"ph": "M", "name": "process_name", "pid": PROCESS_ID, "tid": 0, "args": {"name": title}}
    ]
    for device in range(instance.num_devices):
        events.append(
            {
                "ph": "M",
                "name": "thread_name",
                "pid": PROCESS_ID,
                "tid": device,
                "args": {"name": device_track_name(device)},
            }
        )
        events.append(
            {"ph": "M", "name": "thread_sort_index", "pid": PROCESS_ID, "tid": device, "args": {"sort_index": device}}
        )
    p = instance.num_devices
    lanes = sorted({(op.device, op.kind) for op in schedule.transfers})
    link_tid = {lane: p + TRANSFER_KINDS.index(lane[1]) * p + lane[0] for lane in lanes}
    for (device, kind), tid in link_tid.items():
        events.append(
            {
                "ph": "M",
                "name": "thread_name",
                "pid": PROCESS_ID,
                "tid": tid,
                "args": {"name": link_track_name(device, kind)},
            }
        )
        events.append(
            {"ph": "M", "name": "thread_sort_index", "pid": PROCESS_ID, "tid": tid, "args": {"sort_index": tid}}
        )
    # The ops of an overlapped pair share one interval: each event names the pair it runs in.
    pair_of = {key: pair_label(pair) for pair in schedule.pairs for key in pair.op_keys()}
    ops = sorted(schedule.ops, key=lambda o: (o.device, o.start, o.end))
    transfers = sorted(schedule.transfers, key=lambda o: (o.device, o.kind, o.start))
    for op in [*ops, *transfers]:
        paired = {"overlapped_pair": pair_of[op.key]} if op.key in pair_of else {}
        events.append(
            {
                "ph": "X",
                "name": op.label(),
                "cat": op.kind,
                "pid": PROCESS_ID,
                "tid": link_tid.get((op.device, op.kind), op.device),
                "ts": op.start * MICROSECONDS_PER_UNIT,
                "dur": (op.end - op.start) * MICROSECONDS_PER_UNIT,
                "args": {
                    "kind": op.kind,
                    "stage": op.stage,
                    "microbatch": op.microbatch,
                    "start": op.start,
                    "end": op.end,
                    **paired,
                },
            }
        )
    start = min(op.start for op in schedule.ops)
    for device, profile in enumerate(memory_profiles(schedule)):
        name = memory_counter_name(device)
        # The profile holds one point per event; several events at one time leave the last value.
        points = {start: 0.0}
        points.update(zip(profile.times.tolist(), profile.memory.tolist(), strict=True))
        for time, memory in sorted(points.items()):
            events.append(
                {
                    "ph": "C",
                    "name": name,
                    "pid": PROCESS_ID,
                    "tid": device,
                    "ts": time * MICROSECONDS_PER_UNIT,
                    "args": {"memory": memory},
                }
            )
    return {
        "traceEvents": events,
        "displayTimeUnit": "ms",
        "otherData": {"source": "pipesat", "time_unit": "1 schedule time unit = 1 ms", "schedule": schedule.name},
    }


def export_chrome_trace(schedule: Schedule, path: str | Path) -> Path:
    """Write the schedule's Chrome trace JSON; refuses an invalid schedule.

    Parameters
    ----------
    schedule
        Any valid schedule.
    path
        The JSON file to write (open it in Perfetto or chrome://tracing).

    Returns
    -------
    Path
        The file written.

    Raises
    ------
    ScheduleError
        An invalid schedule.
    """
    return write_output(path, json.dumps(chrome_trace(schedule), indent=1, allow_nan=False) + "\n")
