"""How pipesat writes for people: schedule names, numbers, and rows as a table, CSV, JSON or Markdown.

Rows hold raw values (numbers, booleans, strings, None). The text table and Markdown show them
formatted for reading (percentages, "yes"/"no", "-" for nothing); CSV and JSON keep them exact
for other programs.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pipesat.models import Schedule
from pipesat.models.names import SCHEDULE_TITLES

FORMATS = ("text", "csv", "json", "markdown")


def heuristic_title(name: str) -> str:
    """The title of a schedule pipesat makes (`ZB-H1` for `zb-h1`, any case), or the name itself for any other."""
    return SCHEDULE_TITLES.get(name.strip().lower(), name)


def display_name(schedule: Schedule) -> str:
    """`ZB-V` for a handwritten schedule; `CP-SAT: optimal` (and what it started from) for the solver's."""
    source = schedule.source
    if source.get("kind") != "solver":
        return heuristic_title(schedule.name) if schedule.name else "schedule"
    text = "CP-SAT"
    if source.get("status"):
        text += f": {source['status']}"
        if source["status"] != "optimal" and source.get("gap") is not None:
            text += f", gap to bound {format_percent(source['gap'])}"
    made_by = source.get("made_by")
    if made_by and not made_by.startswith("cp-sat"):  # "cp-sat (makespan)": its own, from a span solve's first phase
        text += f" (the {heuristic_title(made_by)} schedule)"
    return text


def format_number(value: float) -> str:
    """A number as people read it: up to 6 significant digits, no trailing zeros."""
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return f"{value:.6g}"


def format_percent(value: float) -> str:
    """A share as a percentage with two decimals; a tiny non-zero share never shows as 0.00%, an
    infinite one (a value over a bound of 0) shows as a dash."""
    if not math.isfinite(value):
        return "-"
    if 0 < abs(value) < 5e-5:
        return f"{value * 100:.1e}%"
    return f"{value * 100:.2f}%"


def format_value(value: Any) -> str:
    """The default cell text of a raw value."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return format_number(value)
    return str(value)


@dataclass(frozen=True)
class Column:
    """A column: the row key it shows, its header, and how its cells read in a table. `unit` is the
    unit of the raw values that CSV and JSON carry (the header of a text table names the unit its
    cells are shown in)."""

    key: str
    header: str
    text: Callable[[Any], str] = format_value
    align_right: bool = True
    unit: str = ""

    @property
    def machine_header(self) -> str:
        """`peak_memory (MiB)`: the key, with the unit of its raw values."""
        return f"{self.key} ({self.unit})" if self.unit else self.key


def percent_or_dash(value: float | None) -> str:
    return "-" if value is None else format_percent(value)


def scaled(factor: float) -> Callable[[Any], str]:
    """The cell text of a raw amount multiplied by `factor` (memory in its shown unit)."""
    return lambda value: format_value(None if value is None else value * factor)


def format_rows(columns: Sequence[Column], rows: Sequence[dict[str, Any]], fmt: str = "text") -> str:
    """All rows in one of FORMATS; the result has no trailing newline."""
    if fmt == "json":
        return json.dumps([{c.key: _json_value(row.get(c.key)) for c in columns} for row in rows], indent=1)
    if fmt == "csv":
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow([c.machine_header for c in columns])
        for row in rows:
            writer.writerow([_csv_value(row.get(c.key)) for c in columns])
        return buffer.getvalue().rstrip("\n")
    cells = [[c.text(row.get(c.key)) for c in columns] for row in rows]
    if fmt == "markdown":
        lines = ["| " + " | ".join(c.header for c in columns) + " |"]
        lines.append("|" + "|".join("---:" if c.align_right else "---" for c in columns) + "|")
        lines += ["| " + " | ".join(text.replace("|", "\\|") for text in line) + " |" for line in cells]
        return "\n".join(lines)
    if fmt == "text":
        widths = [max([len(c.header)] + [len(line[i]) for line in cells]) for i, c in enumerate(columns)]

        def line_text(texts: Sequence[str]) -> str:
            parts = [
                text.rjust(width) if column.align_right else text.ljust(width)
                for text, width, column in zip(texts, widths, columns, strict=True)
            ]
            return "  ".join(parts).rstrip()

        lines = [line_text([c.header for c in columns]), "  ".join("-" * w for w in widths)]
        lines += [line_text(line) for line in cells]
        return "\n".join(lines)
    raise ValueError(f"unknown format {fmt!r}; use one of {', '.join(FORMATS)}")


def _json_value(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _csv_value(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    return str(value)
