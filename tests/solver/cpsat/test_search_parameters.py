"""The SatParameters of a search and a probe: the time (deterministic or not, a phase's share), the
expert's parameters after pipesat's, and the proof and probe portfolios on two workers."""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import pytest
from google.protobuf import text_format
from ortools.sat import sat_parameters_pb2

from pipesat.models import Tuning
from pipesat.solver.cpsat.search_parameters import (
    PROBE_PRECEDENCE_SUBSOLVER,
    PROBE_STRONG_SUBSOLVER,
    SearchOptions,
    search_parameters,
)

SMALL_OPS = Tuning().proof_small_ops


def _options(workers: int, *, deterministic: bool = False, seconds: float = 10, **changes: Any) -> SearchOptions:
    """Search options for `workers` with `seconds` to search from now (seed 0, no gap target)."""
    return SearchOptions(
        **{
            "workers": workers,
            "seed": 0,
            "deterministic": deterministic,
            "gap": 0.0,
            "deadline": time.monotonic() + seconds,
            "time_limit": seconds,
            **changes,
        }
    )


def test_a_deterministic_search_spends_its_time_limit_whatever_the_wall_clock_left() -> None:
    # A busy machine that reaches the search late (here: past its deadline) must not search less.
    late = _options(2, deterministic=True, seconds=3.0, deadline=time.monotonic() - 5)
    on_time = dataclasses.replace(late, deadline=time.monotonic() + 3)
    budgets = {_parsed(options, 40).max_deterministic_time for options in (late, on_time)}
    assert len(budgets) == 1 and 2.5 < budgets.pop() <= 3.0


def test_a_phase_shares_the_time_limit_when_deterministic_and_the_wall_time_left_otherwise() -> None:
    late = _options(2, deterministic=True, seconds=3.0, deadline=time.monotonic() - 5)
    assert late.share(1 / 3).time_limit == pytest.approx(1.0)
    timed = _options(2, seconds=3.0, deadline=time.monotonic() + 30).share(0.5)
    assert 14 < timed.time_limit <= 15 and timed.deadline - time.monotonic() <= 15


def test_deterministic_time_is_capped_by_the_wall_factor() -> None:

    options = _options(1, deterministic=True, seconds=100, wall_factor=2.0)
    text, seconds = search_parameters(options, 10)
    params = text_format.Parse(text, sat_parameters_pb2.SatParameters())
    assert params.max_deterministic_time > 50
    assert seconds == params.max_time_in_seconds == pytest.approx(2 * params.max_deterministic_time)


def test_expert_parameters_come_after_pipesats_but_the_deadline_stays() -> None:
    expert = 'num_workers: 3\nmax_time_in_seconds: 500\nextra_subsolvers: "max_lp"\n'
    options = _options(1, cpsat_params=expert)
    text, seconds = search_parameters(options, 10)
    params = text_format.Parse(text, sat_parameters_pb2.SatParameters())
    assert params.num_workers == 3 and params.max_time_in_seconds == 500
    assert list(params.extra_subsolvers) == ["max_lp"] and seconds < 10


def _parsed(options: SearchOptions, num_ops: int = 10) -> sat_parameters_pb2.SatParameters:
    return text_format.Parse(search_parameters(options, num_ops)[0], sat_parameters_pb2.SatParameters())


def test_two_workers_add_the_objective_lower_bound_search() -> None:
    small = _parsed(
        _options(2),
        SMALL_OPS,
    )
    assert small.num_workers == 2 and small.num_full_subsolvers == 2
    assert list(small.extra_subsolvers) == ["objective_lb_search"]
    large = _parsed(
        _options(2),
        SMALL_OPS + 1,
    )
    assert large.num_workers == 3 and not large.num_full_subsolvers
    assert list(large.extra_subsolvers) == ["objective_lb_search"]
    for options in (
        _options(1),
        _options(4),
    ):
        assert _parsed(options).num_workers == options.workers and not _parsed(options).extra_subsolvers
    deterministic = _parsed(_options(2, deterministic=True))
    # One worker whatever the options say: CP-SAT's interleaved two-worker search is not reproducible
    # on a loaded machine.
    assert deterministic.num_workers == 1 and not deterministic.extra_subsolvers
    assert not deterministic.interleave_search


def test_a_probe_on_two_workers_runs_default_lp_and_the_precedence_search_with_and_without_strong_propagation() -> None:
    text, _ = search_parameters(
        _options(2),
        10,
        5.0,
        probe=True,
    )
    params = text_format.Parse(text, sat_parameters_pb2.SatParameters())
    # Three threads on the two cores (Tuning.strong_probes): default_lp, the search branching on precedences,
    # and the same propagating the no-overlaps strongly, for the refutations at tight values.
    assert params.num_workers == 3 and params.num_full_subsolvers == 3
    assert list(params.extra_subsolvers) == [PROBE_PRECEDENCE_SUBSOLVER, PROBE_STRONG_SUBSOLVER]
    precedences, strong = params.subsolver_params
    assert precedences.name == PROBE_PRECEDENCE_SUBSOLVER and precedences.use_dynamic_precedence_in_disjunctive
    assert not precedences.use_strong_propagation_in_disjunctive
    assert strong.name == PROBE_STRONG_SUBSOLVER and strong.use_dynamic_precedence_in_disjunctive
    assert strong.use_strong_propagation_in_disjunctive
    # default_lp stays as CP-SAT has it, and so does every search that minimises
    assert not params.use_dynamic_precedence_in_disjunctive and not params.use_strong_propagation_in_disjunctive
    assert not _parsed(_options(2)).use_strong_propagation_in_disjunctive
    for options in (
        _options(4),
        _options(2, deterministic=True),
        _options(2, cpsat_params='extra_subsolvers: "max_lp"\n'),
    ):
        other = text_format.Parse(
            search_parameters(options, 10, 5.0, probe=True)[0], sat_parameters_pb2.SatParameters()
        )
        assert not other.subsolver_params and PROBE_PRECEDENCE_SUBSOLVER not in other.extra_subsolvers


def test_an_expert_who_chooses_subsolvers_replaces_the_proof_portfolio() -> None:
    expert = 'extra_subsolvers: "max_lp"\n'
    params = _parsed(_options(2, cpsat_params=expert))
    assert params.num_workers == 2 and list(params.extra_subsolvers) == ["max_lp"]
    unrelated = _parsed(_options(2, cpsat_params="linearization_level: 2\n"))
    assert list(unrelated.extra_subsolvers) == ["objective_lb_search"] and unrelated.linearization_level == 2
