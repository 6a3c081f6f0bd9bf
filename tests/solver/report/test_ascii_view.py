"""The terminal view: one line per device, ops in device order, to scale, within the width."""

from __future__ import annotations

import itertools
import re

import pytest

from pipesat.models import Instance
from pipesat.solver.evaluate.simulator import simulate
from pipesat.solver.heuristics import run_heuristic
from pipesat.solver.report.ascii_view import render_ascii
from tests.offloaded import INSTANCE, offloaded, one_at_a_time
from tests.strategies import assert_valid

TOKEN = re.compile(r"\[\s*([FBWfbw])(\d+)(?:/(\d+))?\s*\]")


def _device_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.lstrip().startswith("GPU ")]


def _tokens(line: str) -> list[tuple[str, int]]:
    return [(kind, int(mb)) for kind, mb, _ in TOKEN.findall(line.split(": ", 1)[1])]


def _rows(text: str, devices: int) -> list[str]:
    """Each device's whole timeline: its line in every block, joined."""
    lines = _device_lines(text)
    assert len(lines) % devices == 0
    return [f"GPU {d}: " + "".join(line.split(": ", 1)[1] for line in lines[d::devices]) for d in range(devices)]


def test_1f1b_reads_like_the_earlier_viewer() -> None:
    instance = Instance.from_dict({"num_devices": 4, "num_microbatches": 8, "backward_times": 1})
    schedule = assert_valid(run_heuristic("1f1b", instance))
    lines = _device_lines(render_ascii(schedule, width=200))
    assert lines[0].startswith("GPU 0: [F0][F1][F2][F3]....")
    for device, line in enumerate(lines):
        expected = [(kind, mb) for kind, _, mb in schedule.orders()[device]]
        assert _tokens(line) == expected


def test_wraps_into_blocks_when_labels_do_not_fit() -> None:
    instance = Instance.from_dict({"num_devices": 4, "num_microbatches": 12, "backward_times": 1})
    schedule = assert_valid(run_heuristic("1f1b", instance))
    one_line = render_ascii(schedule, width=200)
    wrapped = render_ascii(schedule, width=50)
    assert len(_device_lines(one_line)) == 4 and len(_device_lines(wrapped)) > 4
    assert all(len(line) <= 50 for line in _device_lines(wrapped))
    for device, row in enumerate(_rows(wrapped, 4)):
        assert _tokens(row) == [(kind, mb) for kind, _, mb in schedule.orders()[device]]
    axis = [line.split() for line in wrapped.splitlines() if line.startswith("  ") and line.strip()[0].isdigit()]
    assert axis[0][0] == "0" and axis[-1][-1] == "30"
    assert all(block[-1] == following[0] for block, following in itertools.pairwise(axis))


def test_scaled_to_the_width_and_idle_shown(one_f_one_b_instance: Instance) -> None:
    schedule = assert_valid(run_heuristic("1f1b", one_f_one_b_instance))
    for width in (40, 80, 120):
        text = render_ascii(schedule, width=width)
        assert all(len(line) <= width for line in _device_lines(text))
    wide = _device_lines(render_ascii(schedule, width=400))
    # B lasts twice F: its box is twice as wide; idle time is dots.
    assert len(re.search(r"\[\s*B0\s*\]", wide[0]).group()) == 2 * len(re.search(r"\[\s*F0\s*\]", wide[0]).group())
    assert "." in wide[0] and "." in wide[3]


@pytest.mark.parametrize(("name", "chunks", "placement"), [("zb-v", 2, "vshape"), ("interleaved", 3, "interleaved")])
def test_chunks_and_w_are_labelled(name: str, chunks: int, placement: str) -> None:
    instance = Instance.from_dict(
        {"num_devices": 3, "num_microbatches": 6, "chunks": chunks, "placement": placement, "weight_times": 0.5}
    )
    schedule = assert_valid(run_heuristic(name, instance))
    text = render_ascii(schedule, width=1000)
    lines = _device_lines(text)
    assert len(lines) == 3
    labels = "".join(lines)
    if chunks == 2:
        assert all(letter in labels for letter in "FBWfbw")
        assert "lower case: chunk 1" in text
    else:
        assert "/2]" in labels and "/c: chunk c" in text
    counted = sum(len(TOKEN.findall(line)) for line in lines)
    assert counted == len(schedule.ops)


def test_every_op_is_drawn_when_the_wrapped_view_has_room() -> None:
    # p=8, m=32 at 100 columns once showed 3 of GPU 0's warm-up forwards; now every op has its cell.
    schedule = assert_valid(run_heuristic("1f1b", Instance.from_dict({"num_devices": 8, "num_microbatches": 32})))
    text = render_ascii(schedule, width=100)
    assert "not drawn" not in text
    rows = _rows(text, 8)
    for device, row in enumerate(rows):
        on_device = sorted((op.kind, op.microbatch) for op in schedule.ops if op.device == device)
        assert sorted(_tokens(row)) == on_device


def test_a_squeezed_view_says_how_many_ops_it_left_out() -> None:
    # 400 ops on one device in 20 columns, 13 of them for the timeline: most ops cannot have a column.
    schedule = assert_valid(run_heuristic("gpipe", Instance.from_dict({"num_devices": 1, "num_microbatches": 200})))
    text = render_ascii(schedule, width=20)
    line = next(line for line in text.splitlines() if "not drawn" in line)
    elided = int(line.split(" of ")[0])
    assert line.startswith(f"{elided} of 400 ops are too short") and 400 - 13 <= elided < 400


def test_a_schedule_that_offloads_shows_each_devices_link() -> None:
    schedule = offloaded()
    assert_valid(schedule)
    lines = render_ascii(schedule, width=200).splitlines()
    for device in (0, 1):
        at = lines.index(next(line for line in lines if line.startswith(f"GPU {device}: ")))
        assert lines[at + 1].lstrip().startswith("O: ") and lines[at + 2].lstrip().startswith("R: ")
        # Two offloads and two reloads per device, each at least one column (a letter when short).
        for row, kind in ((lines[at + 1], "O"), (lines[at + 2], "R")):
            cells = re.findall(r"[^.]+", row.split(": ", 1)[1])
            assert len(cells) == 2 and all(cell.strip("[]").startswith(kind) for cell in cells)
    assert "host link: O offload, R reload" in lines[-2]
    assert not any(
        line.lstrip().startswith("O: ") for line in render_ascii(simulate(INSTANCE, one_at_a_time())).splitlines()
    )
