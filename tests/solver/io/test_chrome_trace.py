"""Chrome trace-event export: one track per device, op names and times, memory counters."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pytest

from pipesat.models import Instance, Op, Schedule, ScheduleError
from pipesat.solver.evaluate.metrics import compute_metrics
from pipesat.solver.heuristics import run_heuristic
from pipesat.solver.io.chrome_trace import MICROSECONDS_PER_UNIT, export_chrome_trace, memory_counter_name
from tests.conftest import moe_instance
from tests.offloaded import offloaded
from tests.strategies import assert_valid

P4_M8 = {"num_devices": 4, "num_microbatches": 8, "forward_times": [1, 1.5, 1, 1], "p2p_time": 0.5}


@pytest.mark.parametrize(("name", "extra"), [("1f1b", {}), ("zb-h1", {"weight_times": 1})])
def test_trace_of_p4_m8_schedule_matches_the_schedule(tmp_path: Path, name: str, extra: dict) -> None:
    schedule = assert_valid(run_heuristic(name, Instance.from_dict({**P4_M8, **extra})))
    path = export_chrome_trace(schedule, tmp_path / "trace.json")
    trace = json.loads(path.read_text())
    events = trace["traceEvents"]

    tracks = {e["tid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    assert tracks == {d: f"device {d}" for d in range(4)}

    slices = [e for e in events if e["ph"] == "X"]
    assert len(slices) == len(schedule.ops)
    by_name = {(e["tid"], e["name"]): e for e in slices}
    assert len(by_name) == len(slices)
    for op in schedule.ops:
        event = by_name[(op.device, op.label())]
        assert event["ts"] == pytest.approx(op.start * MICROSECONDS_PER_UNIT)
        assert event["dur"] == pytest.approx((op.end - op.start) * MICROSECONDS_PER_UNIT)
        assert (event["cat"], event["args"]["stage"], event["args"]["microbatch"]) == (op.kind, op.stage, op.microbatch)

    counters: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for event in events:
        if event["ph"] == "C":
            counters[event["name"]].append((event["ts"], event["args"]["memory"]))
    assert set(counters) == {memory_counter_name(d) for d in range(4)}
    peaks = compute_metrics(schedule).peak_memory
    for device in range(4):
        times, values = zip(*counters[memory_counter_name(device)], strict=True)
        assert list(times) == sorted(times) and times[0] == 0
        assert max(values) == pytest.approx(peaks[device])
        # Device 0 allocates at time 0; the others hold nothing until their first forward.
        assert values[0] == (1 if device == 0 else 0) and values[-1] == pytest.approx(0)


def test_invalid_schedule_gets_no_trace(tmp_path: Path, one_f_one_b_instance: Instance) -> None:
    schedule = run_heuristic("1f1b", one_f_one_b_instance)
    shifted = tuple(Op(*op[:4], op.start - 0.5, op.end - 0.5) if op.key == ("B", 0, 0) else op for op in schedule.ops)
    out = tmp_path / "trace.json"
    with pytest.raises(ScheduleError, match=r"B\(stage 0, mb 0\) starts at 9.5 before B\(stage 1, mb 0\) ends at 10"):
        export_chrome_trace(Schedule(schedule.instance, shifted, "shifted"), out)
    assert not out.exists()


def test_each_op_of_an_overlapped_pair_names_its_pair(tmp_path: Path) -> None:
    schedule = assert_valid(run_heuristic("dualpipe-v", moe_instance(2, 4)))
    events = json.loads(export_chrome_trace(schedule, tmp_path / "trace.json").read_text())["traceEvents"]
    paired = [event for event in events if event["ph"] == "X" and "overlapped_pair" in event["args"]]
    assert len(paired) == sum(len(pair.op_keys()) for pair in schedule.pairs) > 0
    assert "F(stage 0, mb 3) with B(stage 3, mb 1) with W(stage 3, mb 1)" in {
        e["args"]["overlapped_pair"] for e in paired
    }


def test_a_schedule_that_offloads_has_a_track_per_link_direction(tmp_path: Path) -> None:
    schedule = offloaded()
    assert_valid(schedule)
    events = json.loads(export_chrome_trace(schedule, tmp_path / "trace.json").read_text())["traceEvents"]
    names = {e["tid"]: e["args"]["name"] for e in events if e.get("name") == "thread_name"}
    transfers = [e for e in events if e.get("ph") == "X" and e["cat"] in ("O", "R")]
    assert len(transfers) == len(schedule.transfers)
    for event in transfers:
        direction = "device to host" if event["cat"] == "O" else "host to device"
        assert names[event["tid"]] == f"device {(event['args']['stage'] % 3 and 1) or 0} link, {direction}"
