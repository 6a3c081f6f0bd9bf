"""The terminal picture of a schedule: one line per device, `GPU 0: [F0][F1][B0]...`, to scale.

Time runs left to right. When the whole schedule fits the width (the terminal's by default) with
every op labelled, it is one block of lines, no wider than `[F0]` per shortest op needs. When it
does not, the timeline wraps into blocks of the width, so labels stay readable, up to `MAX_BLOCKS`;
then ops may shrink to their kind letter, one column for the shortest; beyond that it is squeezed
into one block, and ops too short for a column of their own are left out, with a line that says how
many. `.` is idle.
With two chunks per device, chunk 1 is lower case (`f`, `b`, `w`) as in the V-schedule papers; with
more, the chunk follows a slash (`F3/2`). An overlapped pair is one box, `F3&b1`, its F and its B
(with the B's W inside when it is). A schedule that offloads shows, under each device, its host
link's two directions: offloads (`O`) and reloads (`R`).
"""

from __future__ import annotations

import math
import shutil

from pipesat.models import Op, Schedule
from pipesat.models.ops import TRANSFER_KINDS
from pipesat.solver.evaluate.metrics import compute_metrics
from pipesat.solver.report.tables import display_name, format_number, format_percent
from pipesat.solver.report.units import units_of

IDLE = "."
DEFAULT_WIDTH = 100
MIN_TIMELINE = 10
MAX_BLOCKS = 8


def op_text(op: Op, chunk: int, chunks: int) -> str:
    """The label of an op in the terminal view."""
    if chunks == 2:
        kind = op.kind.lower() if chunk == 1 else op.kind
        return f"{kind}{op.microbatch}"
    if chunks > 2:
        return f"{op.kind}{op.microbatch}/{chunk}"
    return f"{op.kind}{op.microbatch}"


def _texts(label: str) -> list[str]:
    """A label and its shorter forms: without the chunk, then the kind letter alone."""
    texts = [label]
    if "/" in label:
        texts.append(label.split("/")[0])
    texts.append(label[0])
    return texts


def _pair_texts(forward: str, backward: str) -> list[str]:
    """A pair's label and its shorter forms: `F3&b1`, `F&b`, `&`."""
    return [f"{forward}&{backward}", f"{forward[0]}&{backward[0]}", "&"]


def _cell(texts: list[str], width: int) -> str:
    """The first of `texts` (longest first) that fits `width` columns, bracketed when there is room;
    the kind letter repeated when none fits."""
    for text in texts[:-1]:
        if width >= len(text) + 2:
            return "[" + text.center(width - 2) + "]"
        if width >= len(text):
            return text.ljust(width)
    return texts[-1] * width


def columns_per_time(makespan: float, shortest: float, label: int, available: int) -> float:
    """The scale: columns per time unit, given the shortest op and the longest label's length."""
    fit = available / makespan
    roomy = (label + 2) / shortest
    if fit >= roomy:
        return roomy
    if fit * shortest >= label:
        # Whole columns for the shortest op, so equal ops look equal.
        return int(fit * shortest) / shortest
    if makespan * roomy <= available * MAX_BLOCKS:
        return roomy
    if makespan / shortest <= available * MAX_BLOCKS:
        return 1 / shortest  # one column for the shortest op: every op keeps at least its letter
    return fit


def _column(time: float, scale: float) -> int:
    """The column a time falls on: rounded half up, so that an op of at least one column's time
    always keeps a column of its own."""
    return math.floor(time * scale + 0.5)


def _link_rows(
    schedule: Schedule, origin: float, scale: float, columns: int, chunk_of: dict[int, int]
) -> dict[int, list[tuple[str, list[str]]]]:
    """Per device with transfers, a row per direction of its host link: its offloads (O) and its
    reloads (R), labelled as ops are, at least one column each (docs/offload.md)."""
    v = schedule.instance.chunks
    rows: dict[int, list[tuple[str, list[str]]]] = {}
    for device in sorted({op.device for op in schedule.transfers}):
        for kind in TRANSFER_KINDS:
            row = [IDLE] * columns
            for op in sorted(
                (o for o in schedule.transfers if o.device == device and o.kind == kind), key=lambda o: o.start
            ):
                first = min(_column(op.start - origin, scale), columns - 1)
                last = max(first + 1, min(_column(op.end - origin, scale), columns))
                row[first:last] = _cell(_texts(op_text(op, chunk_of[op.stage], v)), last - first)
            rows.setdefault(device, []).append((f"{kind}", row))
    return rows


def render_ascii(schedule: Schedule, width: int | None = None) -> str:
    """The schedule as lines of text no wider than `width` (default: the terminal's width).

    Parameters
    ----------
    schedule
        A valid schedule.
    width
        Columns at most; None: the terminal's width.

    Returns
    -------
    str
        The devices' rows to scale, with a legend.
    """
    instance = schedule.instance
    if width is None:
        width = shutil.get_terminal_size((DEFAULT_WIDTH, 24)).columns
    p, v = instance.num_devices, instance.chunks
    prefix = len(f"GPU {p - 1}: ")
    available = max(width - prefix, MIN_TIMELINE)
    chunk_of = {s: instance.stages_of(instance.placement[s]).index(s) for s in range(instance.num_stages)}
    texts = {op.key: _texts(op_text(op, chunk_of[op.stage], v)) for op in schedule.ops}
    for pair in schedule.pairs:
        texts[pair.forward] = _pair_texts(texts[pair.forward][0], texts[pair.backward][0])
    inside = {key for pair in schedule.pairs for key in pair.op_keys()[1:]}  # drawn in their pair's box
    drawn = [op for op in schedule.ops if op.key not in inside]

    metrics = compute_metrics(schedule)
    origin = min((op.start for op in schedule.ops), default=0.0)
    makespan = metrics.makespan
    durations = [op.end - op.start for op in schedule.ops if op.end > op.start]
    if makespan > 0 and durations:
        longest_label = max(len(texts[op.key][0]) for op in drawn)
        scale = columns_per_time(makespan, min(durations), longest_label, available)
    else:
        scale = 1.0
    columns = max(1, round(makespan * scale))

    rows = [[IDLE] * columns for _ in range(p)]
    owner: list[list[Op | None]] = [[None] * columns for _ in range(p)]
    for op in sorted(drawn, key=lambda o: (o.start, o.end)):
        first = min(_column(op.start - origin, scale), columns - 1)
        last = min(_column(op.end - origin, scale), columns)
        if last <= first:
            if owner[op.device][first] is not None:
                continue
            last = first + 1
        rows[op.device][first:last] = _cell(texts[op.key], last - first)
        owner[op.device][first:last] = [op] * (last - first)
    elided = len(drawn) - len({op for row in owner for op in row if op is not None})
    links = _link_rows(schedule, origin, scale, columns, chunk_of)

    lines = [f"=== {display_name(schedule)} (p={p}, m={instance.num_microbatches}, v={v}) ==="]
    blocks = math.ceil(columns / available)
    for block in range(blocks):
        begin, end = block * available, min((block + 1) * available, columns)
        if block:
            lines.append("")
        for device, row in enumerate(rows):
            lines.append(f"GPU {device}: ".rjust(prefix) + "".join(row[begin:end]))
            for kind, link in links.get(device, []):
                lines.append(f"{kind}: ".rjust(prefix) + "".join(link[begin:end]))
        start_label = format_number(begin / scale)
        end_label = format_number(makespan if end == columns else end / scale)
        lines.append(" " * prefix + start_label + end_label.rjust(end - begin - len(start_label)))
    legend = "F forward, B backward" + (" (inputs), W weight gradient" if schedule.split_backward else "")
    if v == 2:
        legend += "; lower case: chunk 1"
    elif v > 2:
        legend += "; /c: chunk c"
    if schedule.pairs:
        legend += "; F3&B1 an overlapped pair"
    if links:
        legend += "; host link: O offload, R reload"
    lines.append(f"{legend}; {IDLE} idle")
    if elided:
        lines.append(
            f"{elided} of {len(drawn)} ops are too short for a column at this width and not drawn; "
            "a picture (a .png file) draws every op"
        )
    peak_device = max(range(p), key=lambda d: metrics.peak_memory[d])
    units = units_of(instance)
    peak = units.with_memory(format_number(units.memory_value(metrics.max_peak_memory)))
    lines.append(
        f"makespan {units.with_time(format_number(makespan))}, max span {units.with_time(format_number(metrics.max_span))}, "
        f"bubble rate {format_percent(metrics.bubble_rate)}, peak memory {peak} (GPU {peak_device})"
    )
    return "\n".join(lines)
