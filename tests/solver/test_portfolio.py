"""The starting schedules: which fit, how they are re-timed, and which one is preferred."""

from __future__ import annotations

import time

from pipesat.models import Instance, Objective
from pipesat.solver.evaluate.metrics import compute_metrics
from pipesat.solver.evaluate.validator import validate
from pipesat.solver.heuristics import handwritten_schedules, run_heuristic
from pipesat.solver.heuristics.offloaded import offloaded_one_at_a_time
from pipesat.solver.portfolio import Candidate, Problem, as_candidate, preferred, starting_candidates
from pipesat.solver.solve import solve
from tests.strategies import assert_valid

SPLIT = Instance.from_dict({"num_devices": 3, "num_microbatches": 4, "weight_times": 1})


def _problem(instance: Instance, **changes: object) -> Problem:
    settings = {
        "objective": Objective.MAKESPAN,
        "minimize_memory": False,
        "split": instance.split_backward,
        "time_cap": None,
        "symmetry_breaking": True,
    }
    return Problem(instance=instance, **{**settings, **changes})


def _candidate(name: str, value: float, peak: float) -> Candidate:
    return Candidate(name, run_heuristic("1f1b", SPLIT), value, peak, 0.0)


def test_preferred_is_the_least_value_then_the_least_peak_then_the_first() -> None:
    assert preferred([]) is None
    first, lower_peak, same = _candidate("a", 10, 3), _candidate("b", 10 * (1 + 1e-12), 2), _candidate("c", 10, 2)
    assert preferred([first, lower_peak, same]) is lower_peak
    assert preferred([_candidate("d", 9, 5), first]).name == "d"


def test_preferred_within_a_margin_takes_the_least_peak_of_the_values_close_to_the_least() -> None:
    fastest, close, far = _candidate("a", 100, 8), _candidate("b", 100.4, 5), _candidate("c", 101, 1)
    assert preferred([fastest, close, far]) is fastest
    assert preferred([fastest, close, far], within=0.005) is close  # 0.4% slower, 3 less memory
    assert preferred([fastest, far], within=0.005) is fastest  # 1% slower is not close


def test_a_fused_schedule_gets_its_w_after_each_b_but_not_the_reverse() -> None:
    clock = time.monotonic()
    fused = run_heuristic("1f1b", SPLIT)
    assert not fused.split_backward
    candidate = as_candidate(_problem(SPLIT), "1f1b", fused, clock)
    assert candidate is not None and candidate.schedule.split_backward
    # Another schedule than the one `pipesat schedule 1f1b` makes, so it goes by another name.
    assert candidate.name == "1F1B with W split out" and not candidate.handwritten
    assert [key for key in candidate.schedule.orders()[0] if key[0] != "W"] == fused.orders()[0]
    split = run_heuristic("zb-h1", SPLIT)
    assert as_candidate(_problem(SPLIT, split=False), "zb-h1", split, clock) is None


def test_candidates_fit_the_limit_and_the_cap() -> None:
    clock = time.monotonic()
    limited = SPLIT.with_changes(memory_limit="1x")
    candidates = starting_candidates(_problem(limited), handwritten_schedules(limited), (), clock)
    assert candidates and "gpipe" not in {c.name for c in candidates}
    for candidate in candidates:
        assert limited.over_limit(compute_metrics(candidate.schedule).peak_memory) == [] and candidate.found_at >= 0
    capped = _problem(SPLIT, minimize_memory=True, time_cap=1)
    assert starting_candidates(capped, handwritten_schedules(SPLIT), (), clock) == []


def test_one_at_a_time_joins_when_minimising_memory() -> None:
    problem = _problem(SPLIT, minimize_memory=True)
    candidates = starting_candidates(problem, handwritten_schedules(SPLIT), (), time.monotonic())
    one = candidates[-1]
    assert one.name == "one-at-a-time" and one.value == one.peak == 1
    assert problem.result_objective == Objective.MEMORY


def test_only_handwritten_schedules_as_published_are_marked_handwritten() -> None:
    clock = time.monotonic()
    previous = run_heuristic("zb-h1", SPLIT).with_source(name="solution at limit 4")
    candidates = starting_candidates(_problem(SPLIT), handwritten_schedules(SPLIT), (previous,), clock)
    marked = {c.name for c in candidates if c.handwritten}
    assert {"zb-h1", "zb-h2", "zb-auto"} <= marked
    assert "1F1B with W split out" in {c.name for c in candidates} - marked
    assert "solution at limit 4" in {c.name for c in candidates} - marked


def test_with_offload_a_start_that_offloads_keeps_its_transfers() -> None:
    """A handwritten offload schedule given to an offload solve starts it as it is (re-timed with its
    transfers); without offload it is re-timed without them, and then exceeds the limit."""
    limited = Instance.from_dict(
        {"num_devices": 2, "num_microbatches": 2, "chunks": 4, "placement": "interleaved", "host_link_bandwidth": 64}
    ).with_limit("0.25x")
    schedule = offloaded_one_at_a_time(limited, split=False)
    assert validate(schedule) == [] and schedule.transfers
    candidate = as_candidate(_problem(limited, offload=True), "offloaded", schedule, time.monotonic())
    assert candidate is not None and validate(candidate.schedule) == []
    assert candidate.schedule.transfers == schedule.transfers
    assert candidate.value == compute_metrics(schedule).makespan
    assert as_candidate(_problem(limited), "offloaded", schedule, time.monotonic()) is None


def test_the_start_is_the_same_whatever_the_time_limit() -> None:
    # An interleaved pipeline below Megatron's peak starts from the periodic schedule; its periods are
    # all tried however short the solve, so a shorter limit starts from the same schedule.
    instance = Instance.from_dict(
        {
            "num_devices": 4,
            "num_microbatches": 8,
            "chunks": 3,
            "placement": "interleaved",
            "forward_times": 1,
            "backward_times": 2,
            "weight_times": 1,
            "memory_limit": "0.5x",
        }
    )
    short, longer = (solve(instance, time_limit=limit, workers=2, seed=0) for limit in (0.01, 1.0))
    for result in (short, longer):
        assert result.schedule is not None
        assert_valid(result.schedule)
    assert short.starting_point is not None and short.starting_point.name == "periodic"
    assert short.starting_point == longer.starting_point
