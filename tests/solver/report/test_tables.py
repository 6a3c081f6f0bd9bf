"""Table formats: the same rows as text, CSV, JSON and Markdown."""

from __future__ import annotations

import csv
import io
import json

import pytest

from pipesat.models import Instance
from pipesat.solver.heuristics import run_heuristic
from pipesat.solver.report.tables import (
    FORMATS,
    Column,
    display_name,
    format_percent,
    format_rows,
    heuristic_title,
    percent_or_dash,
)
from tests.strategies import assert_valid

COLUMNS = [
    Column("name", "schedule", align_right=False),
    Column("value", "makespan"),
    Column("rate", "bubble", percent_or_dash),
]
ROWS = [{"name": "1F1B", "value": 33.0, "rate": 3 / 11}, {"name": "a|b", "value": None, "rate": None}]


def test_table_aligns_columns() -> None:
    lines = format_rows(COLUMNS, ROWS, "text").splitlines()
    assert lines[0].split() == ["schedule", "makespan", "bubble"]
    assert lines[2].split() == ["1F1B", "33", "27.27%"]
    assert lines[3].split() == ["a|b", "-", "-"]
    # Right-aligned numbers end in the same column as their header.
    assert lines[0].index("makespan") + len("makespan") == lines[2].index("33") + 2


def test_csv_and_json_keep_exact_values() -> None:
    rows = list(csv.DictReader(io.StringIO(format_rows(COLUMNS, ROWS, "csv"))))
    assert float(rows[0]["rate"]) == 3 / 11 and rows[1]["value"] == ""
    assert json.loads(format_rows(COLUMNS, ROWS, "json")) == ROWS


def test_markdown_escapes_pipes() -> None:
    lines = format_rows(COLUMNS, ROWS, "markdown").splitlines()
    assert lines[1] == "|---|---:|---:|"
    assert lines[3] == "| a\\|b | - | - |"


def test_every_format_and_an_unknown_one() -> None:
    for fmt in FORMATS:
        assert "1F1B" in format_rows(COLUMNS, ROWS, fmt)
    with pytest.raises(ValueError, match="unknown format 'xml'"):
        format_rows(COLUMNS, ROWS, "xml")


def test_a_tiny_gap_is_never_shown_as_zero() -> None:
    assert format_percent(0.0) == "0.00%"
    assert format_percent(1e-7) != "0.00%" and format_percent(1e-7).startswith("1.0e-05")


def test_display_names() -> None:
    instance = Instance.from_dict({"num_devices": 2, "num_microbatches": 2, "weight_times": 1})
    schedule = assert_valid(run_heuristic("zb-h1", instance))
    assert display_name(schedule) == "ZB-H1" and heuristic_title("cp-sat") == "cp-sat"
    solved = schedule.with_source(kind="solver", made_by="zb-h1", status="feasible", gap=0.25)
    assert display_name(solved) == "CP-SAT: feasible, gap to bound 25.00% (the ZB-H1 schedule)"
    found = schedule.with_source(name="cp-sat", kind="solver", made_by="cp-sat", status="optimal", gap=0.0)
    assert display_name(found) == "CP-SAT: optimal"
    # A span solve keeping the schedule of its makespan phase: CP-SAT's own, not a handwritten one.
    phase = schedule.with_source(name="cp-sat", kind="solver", made_by="cp-sat (makespan)", status="optimal")
    assert display_name(phase) == "CP-SAT: optimal"
