"""Every registered heuristic, on random instances: a valid schedule, or a refusal that says what it needs."""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from models import Instance
from solver.heuristics import NotApplicable, all_heuristics, run_heuristic
from tests.strategies import P2P_TIMES, PROPERTY_SETTINGS, TIMES, assert_valid

LAYOUTS = (("linear", 1), ("linear", 1), ("interleaved", 2), ("interleaved", 3), ("vshape", 2))


@st.composite
def varied_instances(draw: st.DrawFn) -> Instance:
    """p <= 8, m <= 24, any layout, random per-stage times and p2p, mostly split backward.

    Half of the draws take m a multiple of p, so that the schedules with such needs run often.
    """
    p = draw(st.integers(min_value=1, max_value=8))
    if draw(st.booleans()):
        m = p * draw(st.integers(min_value=1, max_value=24 // p))
    else:
        m = draw(st.integers(min_value=1, max_value=24))
    placement, chunks = draw(st.sampled_from(LAYOUTS))
    per_stage = st.lists(TIMES, min_size=p * chunks, max_size=p * chunks)
    data: dict[str, Any] = {
        "num_devices": p,
        "num_microbatches": m,
        "chunks": chunks,
        "placement": placement,
        "forward_times": draw(per_stage),
        "backward_times": draw(per_stage),
        "p2p_time": draw(P2P_TIMES),
    }
    if draw(st.integers(min_value=0, max_value=3)):
        data["weight_times"] = draw(per_stage)
    return Instance.from_dict(data)


@given(instance=varied_instances())
@settings(PROPERTY_SETTINGS, max_examples=150)
def test_every_heuristic_validates_or_refuses_with_its_reason(instance: Instance) -> None:
    for heuristic in all_heuristics():
        reason = heuristic.requirement(instance)
        if reason is not None:
            assert reason.startswith("needs "), f"{heuristic.name}: {reason}"
            with pytest.raises(NotApplicable, match=re.escape(reason)):
                run_heuristic(heuristic.name, instance)
            continue
        event(f"{heuristic.name} applies")
        schedule = run_heuristic(heuristic.name, instance)
        assert schedule.name == heuristic.name
        assert_valid(schedule)


def test_the_issue_names_are_registered() -> None:
    names = {heuristic.name for heuristic in all_heuristics()}
    assert {"gpipe", "1f1b", "interleaved", "zb-h1", "zb-h2", "zb-auto"} <= names
