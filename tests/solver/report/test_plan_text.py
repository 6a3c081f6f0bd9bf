from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from pipesat.models.placement import PLACEMENTS
from pipesat.models.plan_result import (
    MEMORY_ERROR,
    Breakdown,
    ConfigResult,
    Configuration,
    Measure,
    Outcome,
    PlanResult,
)
from pipesat.solver.report.plan_plot import plot_plan
from pipesat.solver.report.plan_text import (
    LISTED,
    no_best_text,
    plan_columns,
    plan_document,
    plan_rows,
    plan_summary,
    progress_text,
)
from pipesat.solver.report.tables import format_rows

GIB = 2**30


def ranked(config: Configuration, outcome: Outcome, measure: Measure, **fields: Any) -> ConfigResult:
    """A configuration with a schedule, on GPUs that may use 8 GiB."""
    return ConfigResult(config, outcome, measure, usable_memory=8 * GIB, **fields)


def result() -> PlanResult:
    fast = ranked(
        Configuration(1, 4, 1, 2, "vshape", 1, 4),
        Outcome.SOLVED,
        Measure(
            2.0,
            0.0,
            0.5,
            2.5,
            1000.0,
            0.3,
            1.5 * GIB,
            0.5 * GIB,
            Breakdown(1.5, 0.0, 0.2, 0.0, 0.0, 0.1, 0.0, 0.2, 0.5),
        ),
        made_by="cp-sat",
        status="optimal",
        makespan_bound=2.0,
        iteration_bound_ms=2.5,
        gap=0.0,
        search_seconds=4.0,
    )
    slow = ranked(
        Configuration(1, 2, 2, 1, "linear", 1, 2),
        Outcome.PRUNED,
        Measure(
            3.0, 1.0, 0.5, 4.5, 500.0, 0.15, 3 * GIB, 1 * GIB, Breakdown(2.0, 0.5, 0.0, 0.0, 1.0, 0.0, 0.0, 0.5, 0.5)
        ),
        made_by="zb-h1",
        status="feasible",
        iteration_bound_ms=4.0,
        gap=0.1,
        note="bound 4 ms >= best 2.5 ms",
    )
    refused = ConfigResult(Configuration(1, 1, 4, 1, "linear", 1, 1), Outcome.REFUSED, note="model state does not fit")
    return PlanResult([fast, slow, refused], None, ["t1 p8 vshape: too few layers"], best_gap=0.0, time_budget=10)


def test_rows_rank_the_feasible_and_leave_the_refused_unranked() -> None:
    rows = plan_rows(result())
    assert [row["rank"] for row in rows] == [1, 2, None]
    assert rows[0]["schedule"] == "CP-SAT" and rows[1]["schedule"] == "ZB-H1"
    assert [row["outcome"] for row in rows] == [
        "solved (optimal, CP-SAT 4 s)",
        "pruned by bound",
        "refused by memory",
    ]
    assert len(plan_rows(result(), top=1)) == 1


def test_the_summary_counts_and_states_the_proof() -> None:
    lines = plan_summary(result())
    assert lines[0] == "configurations: 3 (solved 1, pruned by bound 1, refused by memory 1); 1 shape left out"
    assert lines[1] == "left out: t1 p8 vshape: too few layers"
    assert lines[2].startswith("best: t1 p4 d1 vshape b1 m4: 2.5 ms an iteration")
    assert lines[3] == (
        "where the time goes: compute 1.5 ms (60.00%), recompute 0.0 ms (0.00%), TP comm 0.2 ms (8.00%), "
        "EP comm 0.0 ms (0.00%), DP comm 0.0 ms (0.00%), PP comm 0.1 ms (4.00%), bubble 0.2 ms (8.00%), "
        "optimizer 0.5 ms (20.00%)"
    )
    assert "proven: no configuration can be faster" in lines


def test_the_breakdown_view_puts_the_iterations_parts_in_place_of_the_outcome() -> None:
    rows = plan_rows(result())
    assert rows[1]["data_parallel_ms"] == 1.0 and rows[1]["exchange_ms"] == 1.0
    plain, parts = format_rows(plan_columns(), rows), format_rows(plan_columns(breakdown=True), rows)
    assert "tokens/s" in plain and "DP comm" not in plain
    assert parts.splitlines()[0].endswith(
        "compute  recompute  TP comm  EP comm  DP comm  PP comm  host link  bubble  optimizer"
    )
    assert "tokens/s" not in parts
    machine = format_rows(plan_columns(machine=True), rows, "csv").splitlines()[0]
    assert "tokens_per_s (tokens/s)" in machine and "bubble_ms (ms)" in machine and "ep," in machine
    assert " ep " not in plain and " ep " in format_rows(plan_columns(experts=True), rows)
    assert (
        "offload," in machine and "offload" not in plain and "offload" in format_rows(plan_columns(offload=True), rows)
    )


def test_rows_show_model_state_activations_and_headroom_apart() -> None:
    rows = plan_rows(result())
    assert (rows[0]["model_state"], rows[0]["activations"]) == (1.5 * GIB, 0.5 * GIB)
    assert rows[0]["memory_per_gpu"] == 2 * GIB and rows[0]["headroom"] == 6 * GIB
    assert rows[0]["memory_fit"] == "fits" and rows[2]["memory_fit"] == "refused" and rows[2]["headroom"] is None
    header, _, first, *_ = format_rows(plan_columns(), rows).splitlines()
    assert "state GiB  act. GiB  free GiB" in header and "GiB/GPU" not in header
    assert "     1.5       0.5       6.0  " in first
    machine = format_rows(plan_columns(machine=True), rows, "csv").splitlines()[0]
    assert "memory_per_gpu (B),model_state (B),activations (B),headroom (B),memory_fit" in machine
    assert plan_summary(result())[2].endswith(
        "2.0 GiB per GPU (model state 1.5 + activations 0.5) of 8.0 GiB usable, 6.0 free"
    )


def test_a_tight_row_is_marked_in_its_outcome_and_under_the_table() -> None:
    plain = result()
    tight = dataclasses.replace(plain.results[0], usable_memory=1.9 * GIB, tight=True)
    marked = dataclasses.replace(plain, results=[tight, *plain.results[1:]])
    assert plan_rows(marked)[0]["outcome"] == "tight, solved (optimal, CP-SAT 4 s)"
    assert plan_rows(marked)[0]["rank"] == 1 and plan_rows(marked)[0]["headroom"] == pytest.approx(-0.1 * GIB)
    # The best is the fastest that fits; the tight row ranked above it is shown beside it.
    assert marked.best is marked.results[1] and marked.tight_and_faster == [tight]
    lines = plan_summary(marked)
    assert lines[1] == "left out: t1 p8 vshape: too few layers"
    assert lines[2] == (
        "tight: 1 configurations need more than the 1.9 GiB a GPU may use, by less than the memory estimate's "
        f"{MEMORY_ERROR:.0%} error: ranked, marked tight; they may fit, check them on the GPU"
    )
    assert lines[3].startswith("best: t1 p2 d2 linear b1 m2: 4.5 ms an iteration")
    assert lines[4] == (
        "faster but tight: t1 p4 d1 vshape b1 m4: 2.5 ms (44.44% faster), predicted 2.0 GiB per GPU of 1.9 GiB "
        f"usable, within the memory estimate's {MEMORY_ERROR:.0%} error: may fit, check it on the GPU"
    )
    assert (plan_document(marked)["best"]["rank"], plan_document(marked)["best"]["pp"]) == (2, 2)
    # With none that fits, the fastest tight one is the best, marked so.
    only = dataclasses.replace(plain, results=[tight])
    assert only.best is tight and only.tight_and_faster == []
    assert plan_summary(only)[4].startswith("tight: predicted 2.0 GiB per GPU of 1.9 GiB usable")


def test_the_document_and_the_progress_line() -> None:
    document = plan_document(result())
    assert document["counts"] == {
        "configurations": 3,
        "solved": 1,
        "pruned": 1,
        "refused": 1,
        "unsearched": 0,
        "unfinished": 0,
        "tight": 0,
        "shapes_left_out": 1,
        "merged": 0,
    }
    assert document["best"]["iteration_ms"] == 2.5
    text = progress_text("solve", 1, 4, 2.5, 30, 10)
    assert text.startswith("plan [###############-----] solving 1/4, best 2.5 ms")
    assert text.endswith("about 10 s left")


def test_shapes_left_out_and_settings_merged_are_listed_apart_in_the_text() -> None:
    skipped = [f"t1 p{p} vshape: too few layers" for p in range(8, 16)]
    merged = ["recompute selective: a layer costs what it does with none; tried as none"]
    lines = plan_summary(dataclasses.replace(result(), skipped_shapes=skipped, merged_shapes=merged))
    assert lines[0].endswith("; 8 shapes left out; 1 setting merged")
    assert lines[1] == (
        "left out: " + "; ".join(skipped[:LISTED]) + f"; and {8 - LISTED} more (the JSON document lists them)"
    )
    assert lines[2] == f"merged: {merged[0]}"
    assert plan_document(dataclasses.replace(result(), merged_shapes=merged))["merged"] == merged


def tied_result() -> PlanResult:
    """The fastest (4 devices of 2 chunks, CP-SAT's order) and, 1% slower, 2 linear devices under 1F1B:
    tied within 3%, the simpler recommended; a third row 10% slower, not tied."""
    fast, slow, refused = result().results
    close = dataclasses.replace(
        slow,
        measure=dataclasses.replace(slow.measure, iteration_ms=2.525),
        made_by="1f1b",
        outcome=Outcome.SOLVED,
    )
    far = dataclasses.replace(
        slow, config=dataclasses.replace(slow.config, data_parallel=1, microbatches=4), measure=fast.measure
    )
    far = dataclasses.replace(far, measure=dataclasses.replace(fast.measure, iteration_ms=2.75))
    return dataclasses.replace(
        result(),
        results=[fast, close, far, refused],
        recommended=close.config,
        recommended_because="stages",
        tie_tolerance=0.03,
    )


def test_rows_tied_with_the_fastest_are_marked_and_the_best_is_the_simplest_beside_the_fastest() -> None:
    plan = tied_result()
    assert [row["tie"] for row in plan_rows(plan)] == ["tied", "best", "", ""]
    assert [row["rank"] for row in plan_rows(plan, top=1)] == [1, 2]  # the best follows the top rows
    assert plan.best is plan.results[1] and plan.fastest is plan.results[0]
    lines = plan_summary(plan)
    assert lines[2].startswith("best: t1 p2 d2 linear b1 m2, the simplest of 2 tied within 3%: 2.5 ms an iteration")
    assert lines[3] == (
        "fastest on paper: t1 p4 d1 vshape b1 m4: 2.5 ms, 0.99% faster, within the cost model's error (3%); "
        "the best is simpler: 2 pipeline stages against 8"
    )
    document = plan_document(plan)
    assert document["best"]["rank"] == 2 and document["fastest"]["rank"] == 1 and document["tie_tolerance"] == 0.03
    # With no tie, nothing is marked and the fastest is the best.
    alone = dataclasses.replace(plan, results=[plan.results[0], plan.results[2]], recommended=None)
    assert [row["tie"] for row in plan_rows(alone)] == ["", ""] and alone.best is alone.fastest
    assert not any(line.startswith("fastest on paper") for line in plan_summary(alone))


def test_a_budget_that_ran_out_before_any_schedule_says_so_not_that_nothing_fits() -> None:
    plan = dataclasses.replace(
        result(),
        results=[
            dataclasses.replace(result().results[2]),
            ConfigResult(Configuration(1, 2, 2, 1, "linear", 1, 2), Outcome.UNFINISHED, iteration_bound_ms=3.0),
            ConfigResult(Configuration(1, 4, 1, 1, "linear", 1, 4), Outcome.UNFINISHED),
        ],
        time_budget=30,
    )
    unfinished = ConfigResult(Configuration(1, 4, 1, 1, "linear", 1, 4), Outcome.UNFINISHED)
    ranked = dataclasses.replace(result(), results=[*result().results, unfinished], best_gap=None, time_budget=30)
    assert (
        "the time budget of 30 s ran out with 1 configuration not assessed: the ranking is of what it assessed, "
        "and the best is not proven; raise it"
    ) in plan_summary(ranked)
    assert no_best_text(plan) == (
        "no configuration has a schedule yet: the time budget of 30 s ran out; raise it (1 refused by memory, "
        "2 not assessed, 1 of them bounded)"
    )


@pytest.mark.parametrize("placement", PLACEMENTS)
def test_the_picture_is_drawn_for_every_placement(tmp_path: Path, placement: str) -> None:
    drawn = result()
    fast = drawn.results[0]
    drawn.results[0] = dataclasses.replace(fast, config=dataclasses.replace(fast.config, placement=placement))
    path = plot_plan(drawn, tmp_path / "plan.png")
    assert path.stat().st_size > 10_000
