"""The lines commands print about an instance, a schedule and the files they write."""

from __future__ import annotations

from pathlib import Path

from pipesat.models import Instance, Objective
from pipesat.solver.heuristics import run_heuristic
from pipesat.solver.report.text import (
    chrome_trace_line,
    describe,
    field_line,
    metrics_lines,
    saved_files_text,
    torch_csv_lines,
)
from tests.conftest import make_instance


def test_field_line_aligns_values_in_one_column() -> None:
    assert field_line("gap", "1%") == "gap:            1%"
    assert field_line("best heuristic", "ZB-H1").index("ZB-H1") == field_line("gap", "1%").index("1%")


def test_describe_names_only_what_the_instance_has(one_f_one_b_instance: Instance) -> None:
    assert describe(one_f_one_b_instance) == "4 devices, 8 microbatches, fused backward"
    rich = make_instance(4, 8, name="x", chunks=2, weight_times=1, p2p_time=0.25, memory_limit="0.5x")
    peak = rich.one_f_one_b_peak()
    assert describe(rich) == (
        f"x: 4 devices, 8 microbatches, 2 chunks (interleaved), split backward, p2p 0.25, "
        f"memory limit {peak * 0.5:g} (0.5x)"
    )


def test_metrics_lines_of_1f1b(one_f_one_b_instance: Instance) -> None:
    schedule = run_heuristic("1f1b", one_f_one_b_instance)
    assert metrics_lines(schedule, Objective.MAKESPAN) == [
        "makespan:       33",
        "max span:       33",
        "bubble rate:    27.27% (of the makespan)",
        "peak memory:    4 (per device: 4, 3, 2, 1)",
    ]
    span_lines = metrics_lines(schedule, Objective.SPAN, skip="max span")
    assert [line.split(":")[0] for line in span_lines] == ["makespan", "bubble rate", "peak memory"]
    assert span_lines[1].endswith("(of the max span)")


def test_metrics_lines_show_the_memory_limit() -> None:
    schedule = run_heuristic("1f1b", make_instance(4, 8, memory_limit=4))
    assert metrics_lines(schedule, Objective.MAKESPAN)[-1] == "peak memory:    4 (per device: 4, 3, 2, 1; limit 4)"


def test_saved_files_text_counts_what_was_left_out() -> None:
    assert saved_files_text(3, Path("out")) == "3 files in out"
    assert saved_files_text(1, Path("out"), not_saved=4) == "1 files in out (4 over the memory limit not saved)"


def test_export_lines(one_f_one_b_instance: Instance) -> None:
    schedule = run_heuristic("1f1b", one_f_one_b_instance)
    first, how = torch_csv_lines(Path("t.csv"), schedule)
    assert first == "torch CSV:      t.csv (4 ranks, 64 actions)"
    assert "_load_csv" in how
    assert chrome_trace_line(Path("t.json")).startswith("Chrome trace:   t.json (one track per device")
