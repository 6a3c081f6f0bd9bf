"""Every handwritten schedule, on random instances: a valid schedule, or a refusal that says what it needs."""

from __future__ import annotations

import re

import pytest
from hypothesis import event, given, settings

from pipesat.models import Instance
from pipesat.solver.heuristics import NotApplicable, all_heuristics, run_heuristic
from tests.strategies import PROPERTY_SETTINGS, assert_valid, instances

# Linear twice as often as each multi-chunk layout; three chunks too, which no other test draws.
LAYOUTS = (("linear", 1), ("linear", 1), ("interleaved", 2), ("interleaved", 3), ("vshape", 2))


@given(instance=instances(max_devices=8, max_microbatches=24, layouts=LAYOUTS, whole_rounds=True))
@settings(PROPERTY_SETTINGS, max_examples=150)
def test_every_heuristic_validates_or_refuses_with_its_reason(instance: Instance) -> None:
    for heuristic in all_heuristics():
        reason = heuristic.unmet(instance)
        if reason is not None:
            assert reason.startswith("needs "), f"{heuristic.name}: {reason}"
            with pytest.raises(NotApplicable, match=re.escape(reason)):
                run_heuristic(heuristic.name, instance)
            continue
        event(f"{heuristic.name} applies")
        schedule = run_heuristic(heuristic.name, instance)
        assert schedule.name == heuristic.name
        assert_valid(schedule)
