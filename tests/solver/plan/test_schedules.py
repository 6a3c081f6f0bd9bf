"""The schedules a plan may use: the names, the placements each runs, the handwritten ones allowed."""

from __future__ import annotations

from pipesat.models.placement import PLACEMENTS
from pipesat.models.plan_result import Configuration
from pipesat.solver.heuristics import all_heuristics, handwritten_schedules
from pipesat.solver.instances.from_model import derive
from pipesat.solver.plan.schedules import (
    HANDWRITTEN,
    SCHEDULE_NAMES,
    allowed_handwritten,
    placements_of,
    runs_placement,
    unmet_text,
)
from pipesat.solver.plan.space import description
from tests.solver.plan.conftest import tiny


def test_the_names_are_the_handwritten_schedules_then_the_search_and_the_starts() -> None:
    baselines = ("offload-device0-1f1b", "offload-device0-v")  # offload baselines the plan does not run
    assert tuple(heuristic.name for heuristic in all_heuristics() if heuristic.name not in baselines) == HANDWRITTEN
    assert placements_of("pipeoffload-full-v") == ("vshape",) and placements_of("pipeoffload-selective-1f1b") == (
        "linear",
    )
    assert SCHEDULE_NAMES[len(HANDWRITTEN) :] == ("cp-sat", "one-at-a-time", "periodic", "memory-gated")


def test_each_schedule_runs_the_placement_its_requirement_asks_for() -> None:
    assert placements_of("1f1b") == ("linear",) and placements_of("zb-h1") == ("linear",)
    assert placements_of("interleaved") == ("interleaved",)
    assert placements_of("zb-v") == ("vshape",) and placements_of("dualpipe") == ("bidirectional",)
    assert placements_of("gpipe") == PLACEMENTS and placements_of("periodic") == PLACEMENTS
    assert placements_of("cp-sat") == ()  # the search starts from the allowed schedules: it adds no placement
    assert runs_placement(None, "vshape") and not runs_placement(("1f1b", "cp-sat"), "interleaved")


def test_only_the_allowed_handwritten_schedules_are_made() -> None:
    spec = tiny()
    instance = derive(description(spec, Configuration(1, 4, 1, 1, "linear", 1, 4))).instance
    found = handwritten_schedules(instance)
    every, none = allowed_handwritten(None, found)
    allowed, others = allowed_handwritten(("1f1b", "zb-h1"), found)
    assert [name for name, _ in allowed] == ["1f1b", "zb-h1"] and none == []
    assert {"1f1b", "zb-h1", "gpipe"} <= {name for name, _ in every} == {name for name, _ in allowed + others}
    assert unmet_text(("1f1b",), instance) == ""
    assert unmet_text(("interleaved",), instance).startswith("no schedule of training.schedules runs it: ")
    assert unmet_text(("interleaved", "periodic"), instance) == ""  # a start runs every instance
