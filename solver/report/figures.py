"""What every picture shares: the colours, the resolution, a figure to draw on, text that fits, the file.

F, B and W have distinct Okabe-Ito colours (safe for colour-blind readers); later chunks are lighter
shades of the same colour. Titles wrap to fit the figure. The file format (PNG, SVG, PDF) follows the
file's extension. Labels beside points (the Pareto and plan pictures) are placed apart from each
other and from the marks.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import to_rgb
from matplotlib.figure import Figure
from matplotlib.text import Text
from matplotlib.transforms import Bbox

from pipesat.models import InputError, Kind
from pipesat.models.document import write_atomically

# Okabe-Ito: blue, orange, reddish purple (their light shades stay apart too); vermillion for limits.
KIND_COLOURS = {Kind.F: "#0072B2", Kind.B: "#E69F00", Kind.W: "#CC79A7"}
LIMIT_COLOUR = "#D55E00"
IDLE_COLOUR = "#E4E4E4"
MEMORY_COLOUR = "#555555"
PICTURE_SUFFIXES = (".png", ".svg", ".pdf")
DPI = 110
# The smallest font drawn, in points.
MIN_FONT = 5.0
# Titles wrap at their separators, to no fewer than MIN_WRAP characters a line.
SEPARATOR = "  ·  "
MIN_WRAP = 20
# Where a point's label may go (points from the point, nearest first), and a marker's size.
# Beside the point, then above or below it, centred (for a label too long for either side).
LABEL_OFFSETS = (
    *((5, 3), (5, -3), (-5, 3), (-5, -3), (5, 13), (5, -13), (-5, 13), (-5, -13), (5, 23), (-5, 23)),
    *((0, 10), (0, -10)),
)
MARK_PIXELS = 10.0


def picture_format(path: str | Path) -> str:
    """The picture format of a file name, or an `InputError` saying which suffixes work."""
    suffix = Path(path).suffix.lower()
    if suffix not in PICTURE_SUFFIXES:
        raise InputError(f"{path}: cannot draw a {suffix or 'suffix-less'} file; name it .png, .svg or .pdf")
    return suffix[1:]


def new_figure(width: float, height: float) -> Figure:
    """A figure (inches) on an Agg canvas, whose one renderer measures text while the figure is laid out
    (a bare figure makes a new full-size renderer for each measurement)."""
    figure = Figure(figsize=(width, height), dpi=DPI)
    FigureCanvasAgg(figure)
    return figure


def shade(colour: str, chunk: int, chunks: int) -> tuple[float, float, float]:
    """The colour of an op of `chunk`: chunk 0 is the full colour, later chunks blend towards white."""
    lightness = 0.0 if chunks <= 1 else 0.6 * chunk / (chunks - 1)
    red, green, blue = (c + (1.0 - c) * lightness for c in to_rgb(colour))
    return red, green, blue


def text_colour(rgb: tuple[float, float, float]) -> str:
    """Black or white, whichever reads better on `rgb`."""
    luminance = 0.2126 * rgb[0] + 0.7152 * rgb[1] + 0.0722 * rgb[2]
    return "black" if luminance > 0.5 else "white"


def fit_text(text: Text, width: float) -> None:
    """Wrap `text` (at its `  ·  ` separators first, then between words) until it is at most `width`
    pixels wide; shrink its font when one word alone is wider."""
    lines = text.get_text().splitlines()
    columns = max((len(line) for line in lines), default=0)
    while text.get_window_extent().width > width and columns > MIN_WRAP:
        columns = max(MIN_WRAP, int(columns * min(0.95, width / text.get_window_extent().width)))
        text.set_text("\n".join(wrapped for line in lines for wrapped in _wrap(line, columns)))
    size = float(text.get_fontsize())  # points, as Text keeps it
    while text.get_window_extent().width > width and size > MIN_FONT:
        size -= 0.5
        text.set_fontsize(size)


def _wrap(line: str, columns: int) -> list[str]:
    """A line in lines of at most `columns` characters, broken at `  ·  ` where it can be."""
    parts = line.split(SEPARATOR)
    packed = [parts[0]]
    for part in parts[1:]:
        joined = packed[-1] + SEPARATOR + part
        packed[-1:] = [joined] if len(joined) <= columns else [packed[-1], part]
    return [wrapped for piece in packed for wrapped in textwrap.wrap(piece, columns, break_long_words=False)]


def place_labels(axes: Any, points: Sequence[tuple[float, float, str]], others: Sequence[tuple[float, float]]) -> None:
    """Write each point's text beside it, at the first of LABEL_OFFSETS where it stays in the axes and
    clear of the other labels and of every mark (the points and `others`); else the first where it
    stays in the axes; else the first offset."""
    taken = [_mark_box(axes, x, y) for x, y in [*others, *((x, y) for x, y, _ in points)]]
    for x, y, text in sorted(points):
        label = axes.annotate(text, (x, y), xytext=LABEL_OFFSETS[0], textcoords="offset points", fontsize=9)
        clear = (offset for offset in LABEL_OFFSETS if _fits_at(label, offset, axes, taken))
        inside = (offset for offset in LABEL_OFFSETS if _fits_at(label, offset, axes, []))
        _offset(label, next(clear, None) or next(inside, LABEL_OFFSETS[0]))
        taken.append(label.get_window_extent())


def _offset(label: Any, offset: tuple[float, float]) -> None:
    """Put an annotation's text `offset` points from its point, on that side of it."""
    label.xyann = offset
    label.set_horizontalalignment("left" if offset[0] > 0 else "right" if offset[0] < 0 else "center")
    label.set_verticalalignment("bottom" if offset[1] >= 0 else "top")


def _fits_at(label: Any, offset: tuple[float, float], axes: Any, taken: Sequence[Bbox]) -> bool:
    """Moves the label to `offset`: whether it is inside the axes there and clear of every box `taken`."""
    _offset(label, offset)
    box = label.get_window_extent()
    inside = axes.bbox.x0 <= box.x0 and box.x1 <= axes.bbox.x1 and axes.bbox.y0 <= box.y0 and box.y1 <= axes.bbox.y1
    return inside and not any(box.overlaps(other) for other in taken)


def _mark_box(axes: Any, x: float, y: float) -> Bbox:
    """The pixels a marker at data point (x, y) covers."""
    centre_x, centre_y = axes.transData.transform((x, y))
    half = MARK_PIXELS / 2
    return Bbox.from_extents(centre_x - half, centre_y - half, centre_x + half, centre_y + half)


def save_figure(figure: Figure, path: str | Path) -> Path:
    """Write a figure in the format of the path's extension, atomically."""
    fmt = picture_format(path)
    return write_atomically(path, lambda temporary: figure.savefig(temporary, format=fmt, dpi=DPI))
