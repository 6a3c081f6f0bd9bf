"""The table of schedules: one order for listing and for ties, titles from `models.names`, starts kept apart."""

from __future__ import annotations

import subprocess
import sys

import pytest

from pipesat.models import InputError, load_instance
from pipesat.models.names import SCHEDULE_TITLES
from pipesat.models.tolerance import same
from pipesat.solver.evaluate.metrics import compute_metrics
from pipesat.solver.evaluate.retime import retimed_for
from pipesat.solver.heuristics import (
    ALIASES,
    SCHEDULES,
    NotApplicable,
    UnknownSchedule,
    all_heuristics,
    get_heuristic,
    handwritten_schedules,
    run_heuristic,
    try_every_heuristic,
)
from pipesat.solver.solve import solve
from tests.conftest import INSTANCES_DIR, ROOT
from tests.solver.heuristics.helpers import uniform

# The order every list of handwritten schedules shows (compare, `schedule --help`, pareto).
HANDWRITTEN = (
    "gpipe",
    "interleaved",
    "interleaved-overlap",
    "1f1b",
    "v-min",
    "v-half",
    "v-zb",
    "v-auto",
    "block-optimal",
    "zb-auto",
    "zb-v",
    "dualpipe-v",
    "dualpipe",
    "zb-h1",
    "zb-h2",
    "pipeoffload-full-v",
    "pipeoffload-selective-v",
    "pipeoffload-full-1f1b",
    "pipeoffload-selective-1f1b",
    "offload-device0-1f1b",
    "offload-device0-v",
)


def test_the_table_lists_the_handwritten_schedules_then_the_starts() -> None:
    assert tuple(heuristic.name for heuristic in all_heuristics()) == HANDWRITTEN
    assert [entry.name for entry in SCHEDULES] == [*HANDWRITTEN, "one-at-a-time", "periodic", "memory-gated"]


def test_the_order_does_not_depend_on_which_module_is_imported_first() -> None:
    script = (
        "import solver.heuristics.zero_bubble, solver.heuristics.zb_auto\n"
        "from solver.heuristics import all_heuristics\n"
        "print(' '.join(h.name for h in all_heuristics()))"
    )
    output = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, check=True)
    assert tuple(output.stdout.split()) == HANDWRITTEN


def test_every_schedule_has_a_title_and_every_title_a_schedule() -> None:
    own_names = {alias.name for alias in ALIASES.values()} - {entry.name for entry in SCHEDULES}
    assert own_names == {"zb-1p", "zb-2p"}
    assert {entry.name for entry in SCHEDULES} | own_names == set(SCHEDULE_TITLES)
    titles = [heuristic.title for heuristic in all_heuristics()][:4]
    assert titles == ["GPipe", "Interleaved 1F1B", "Interleaved 1F1B, overlapped pairs", "1F1B"]
    assert get_heuristic(" ZB-H1 ").title == "ZB-H1"


@pytest.mark.parametrize("name", ["nope", "periodic", "one-at-a-time"])
def test_an_unknown_name_is_an_input_error_that_lists_the_handwritten_names(name: str) -> None:
    with pytest.raises(UnknownSchedule) as raised:
        run_heuristic(name, uniform(2, 2))
    assert isinstance(raised.value, InputError) and not isinstance(raised.value, NotApplicable)
    listed = f"unknown schedule {name!r}; choose one of {', '.join(HANDWRITTEN)} (or zb-1p, zb-2p, torch's class names)"
    assert str(raised.value) == listed


@pytest.mark.parametrize(
    ("alias", "name"),
    [
        ("ZB-1p", "zb-1p"),
        ("Schedule1F1B", "1f1b"),
        ("ScheduleInterleaved1F1B", "interleaved"),
        ("ZBVZeroBubble", "zb-v"),
        ("ScheduleDualPipeV", "dualpipe-v"),
    ],
)
def test_the_papers_and_torchs_names_are_taken_too(alias: str, name: str) -> None:
    assert get_heuristic(alias).name == name


def test_every_heuristic_is_tried_in_order_and_the_refusals_are_kept_or_skipped() -> None:
    instance = uniform(4, 8)  # linear, split backward: no interleaved or V-shape schedule applies
    attempts = try_every_heuristic(instance)
    assert tuple(attempt.heuristic.name for attempt in attempts) == HANDWRITTEN
    refused = [attempt.heuristic.name for attempt in attempts if isinstance(attempt.error, NotApplicable)]
    assert refused == [
        *("interleaved", "interleaved-overlap", "v-min", "v-half", "v-zb", "v-auto", "block-optimal"),
        *("zb-v", "dualpipe-v", "dualpipe"),
        *HANDWRITTEN[-6:],  # the offload schedules: no host link
    ]
    assert all(attempt.schedule is not None for attempt in attempts if attempt.heuristic.name not in refused)
    applied = [name for name, _ in handwritten_schedules(instance)]
    assert applied == [name for name in HANDWRITTEN if name not in refused]


@pytest.mark.parametrize("objective", ["makespan", "span"])
def test_a_tie_goes_to_the_lower_peak_then_to_the_earlier_in_the_table(objective: str) -> None:
    # ZB-auto and ZB-H1 have the same value and peak here; ZB-auto comes first in the table.
    instance = load_instance(INSTANCES_DIR / "zb-paper" / "1.5b-p8-m24.yaml").with_changes(memory_limit="1x")
    metrics = {name: compute_metrics(retimed_for(objective, s)) for name, s in handwritten_schedules(instance)}
    auto, h1 = metrics["zb-auto"], metrics["zb-h1"]
    assert same(auto.objective(objective), h1.objective(objective))
    assert auto.max_peak_memory == h1.max_peak_memory
    assert solve(instance, objective=objective, time_limit=5).best_heuristic.name == "zb-auto"
