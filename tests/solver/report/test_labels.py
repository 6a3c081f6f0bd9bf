"""The Gantt chart's microbatch numbers: in their boxes, in a smaller font, or on chips with a note."""

from __future__ import annotations

import re

from pipesat.models import Instance
from pipesat.solver.heuristics import run_heuristic
from pipesat.solver.report.figures import MIN_FONT
from pipesat.solver.report.labels import ordinal
from pipesat.solver.report.schedule_plot import schedule_figure
from tests.solver.report.helpers import gantt_labels, scaled
from tests.strategies import assert_valid


def test_microbatch_numbers_are_written_when_they_fit() -> None:
    instance = Instance.from_dict({"num_devices": 2, "num_microbatches": 3})
    schedule = assert_valid(run_heuristic("1f1b", instance))
    gantt = schedule_figure(schedule).axes[0]
    assert sorted(text.get_text() for text in gantt.texts) == sorted(str(op.microbatch) for op in schedule.ops)


def test_every_op_is_labelled_or_a_note_says_which_are() -> None:
    small = scaled(4, 8)
    labels, notes = gantt_labels(schedule_figure(small))
    assert sorted(text.get_text() for text in labels) == sorted(str(op.microbatch) for op in small.ops) and not notes
    zb_v = {"weight_times": 1, "chunks": 2, "placement": "vshape"}
    for schedule, noted in ((scaled(16, 64), True), (scaled(16, 32, "zb-v", **zb_v), False)):
        labels, notes = gantt_labels(schedule_figure(schedule))
        assert len(notes) == noted, "where not every microbatch has its number, the note says which have"
        step = int(re.search(r"every (\d+)(st|nd|rd|th) microbatch", notes[0]).group(1)) if notes else 1
        assert step > 1 or not noted
        written = {(round(text.get_position()[1]), int(text.get_text())) for text in labels}
        assert written == {(op.device, op.microbatch) for op in schedule.ops if op.microbatch % step == 0}


def test_two_digit_numbers_fit_a_smaller_font_before_any_is_left_out() -> None:
    # p=8, m=48: F boxes too narrow for two digits at 8 points, wide enough at a smaller font.
    schedule = scaled(8, 48)
    labels, notes = gantt_labels(schedule_figure(schedule))
    assert not notes and len(labels) == len(schedule.ops)
    assert MIN_FONT <= min(text.get_fontsize() for text in labels) < 8


def test_notes_read_well() -> None:
    assert [ordinal(n) for n in (1, 2, 3, 5, 11, 12, 22, 101)] == [
        "1st",
        "2nd",
        "3rd",
        "5th",
        "11th",
        "12th",
        "22nd",
        "101st",
    ]
