"""How a plan reads: the ranked table, the summary lines, the JSON document and the progress line (a
configuration predicted as it runs, `plan`'s predict option, is `predict_text`).

Words and numbers only; `solver.plan.search` computed every one of them.
"""

from __future__ import annotations

from typing import Any

from pipesat.models.plan_result import (
    MEMORY_ERROR,
    PART_NAMES,
    ConfigResult,
    Configuration,
    Measure,
    MemoryFit,
    Outcome,
    PlanResult,
)
from pipesat.models.tolerance import same
from pipesat.models.units import GIB
from pipesat.solver.report.tables import Column, format_percent, heuristic_title, percent_or_dash

NOT_FINISHED = {Outcome.UNSEARCHED: "not searched", Outcome.UNFINISHED: "not assessed"}
"""How the table and the counts name what an interrupted plan, or one out of time, did not finish."""
FORMAT = "pipesat-plan/1"
BAR = 20
LISTED = 6
"""The most shapes left out (and settings merged) the text lists by name; the JSON document has all."""


def _number(digits: int) -> Any:
    return lambda value: "-" if value is None else f"{value:.{digits}f}"


def _gib(value: float | None) -> str:
    return "-" if value is None else f"{value / GIB:.1f}"


def plan_columns(
    breakdown: bool = False, machine: bool = False, experts: bool = False, offload: bool = False
) -> list[Column]:
    """The ranked table's columns; memory in GiB in the table, bytes in CSV and JSON. `breakdown`
    puts the iteration's parts (ms) in place of the throughput, memory and outcome; `machine` (CSV
    and JSON) keeps both. The expert-parallel degree is a column with `experts` (a plan that tries
    expert parallelism) and in CSV, the activation offload with `offload` (a plan that tries it) and
    in CSV."""
    layout = [
        Column("rank", "rank"),
        Column("tie", "tie", lambda v: v or "-", align_right=False),
        Column("tp", "t"),
        Column("cp", "cp"),
        Column("pp", "p"),
        Column("dp", "d"),
        *([Column("ep", "ep")] if experts or machine else []),
        Column("placement", "placement", align_right=False),
        Column("chunks", "v"),
        Column("microbatch_size", "b"),
        Column("microbatches", "m"),
        Column("recompute", "recompute", align_right=False),
        *([Column("offload", "offload", align_right=False)] if offload or machine else []),
        Column("zero", "zero"),
        Column("iteration_ms", "iteration (ms)", _number(1), unit="ms"),
    ]
    parts = [Column(key, header, _number(1), unit="ms") for key, header in PART_NAMES.items()]
    memory = [
        Column("model_state", "state GiB", _gib, unit="B"),
        Column("activations", "act. GiB", _gib, unit="B"),
        Column("headroom", "free GiB", _gib, unit="B"),
    ]
    if machine:
        memory = [Column("memory_per_gpu", "GiB/GPU", _gib, unit="B"), *memory, Column("memory_fit", "memory")]
    outcome = [
        Column("tokens_per_s", "tokens/s", _number(0), unit="tokens/s"),
        Column("mfu", "MFU", percent_or_dash),
        *memory,
        Column("schedule", "schedule", align_right=False),
        Column("gap", "gap", percent_or_dash),
        Column("outcome", "outcome", align_right=False),
    ]
    if machine:
        return layout + outcome + parts
    return layout + (parts if breakdown else outcome)


def schedule_title(made_by: str) -> str:
    """`CP-SAT`, or the handwritten schedule's title."""
    return "CP-SAT" if made_by.startswith("cp-sat") else heuristic_title(made_by)


def plan_row(rank: int | None, result: ConfigResult, tie: str = "") -> dict[str, Any]:
    """One configuration's row: raw numbers, as CSV and JSON carry them; `tie` is `best` or `tied` in a
    row tied with the fastest (`tie_word`)."""
    config, measure = result.config, result.measure
    row: dict[str, Any] = {
        "rank": rank,
        "tie": tie,
        **configuration_cells(config),
        "schedule": schedule_title(result.made_by) if result.made_by else None,
        "status": result.status,
        "gap": result.gap,
        "outcome": outcome_text(result),
        "note": result.note,
        "iteration_bound_ms": result.iteration_bound_ms,
        "memory_fit": result.memory_fit.value,
        "usable_memory": result.usable_memory,
        "headroom": result.headroom,
    }
    return row if measure is None else row | measure_cells(measure)


def configuration_cells(config: Configuration) -> dict[str, Any]:
    """A configuration's numbers and words, as a row carries them."""
    return {
        "tp": config.tensor_parallel,
        "cp": config.context_parallel,
        "pp": config.pipeline,
        "dp": config.data_parallel,
        "ep": config.expert_parallel,
        "placement": config.placement,
        "chunks": config.chunks,
        "microbatch_size": config.microbatch_size,
        "microbatches": config.microbatches,
        "recompute": config.recompute_name,
        "offload": config.offload,
        "zero": config.zero,
    }


def measure_cells(measure: Measure) -> dict[str, Any]:
    """A measure's numbers (ms, tokens/s, bytes), as a row carries them."""
    return {
        "iteration_ms": measure.iteration_ms,
        "makespan_ms": measure.makespan_ms,
        "exchange_ms": measure.exchange_ms,
        **vars(measure.breakdown),
        "tokens_per_s": measure.tokens_per_s,
        "mfu": measure.mfu,
        "memory_per_gpu": measure.memory_per_gpu,
        "model_state": measure.model_state,
        "activations": measure.activations,
    }


def outcome_text(result: ConfigResult) -> str:
    """`solved (optimal, CP-SAT 8 s)`, `pruned by bound` (with its bound where no schedule was made),
    `refused by memory`, `not searched (feasible)`, `not assessed`; `tight, ` before it when its memory
    estimate is above the usable memory within the estimate's error (`MemoryFit.TIGHT`)."""
    text = _search_text(result)
    return f"tight, {text}" if result.memory_fit is MemoryFit.TIGHT else text


def _search_text(result: ConfigResult) -> str:
    if result.outcome == Outcome.PRUNED and result.measure is None and result.iteration_bound_ms is not None:
        return f"pruned by bound (at least {result.iteration_bound_ms:.1f} ms, no schedule made)"
    if result.outcome == Outcome.PRUNED:
        return "pruned by bound"
    if result.outcome == Outcome.REFUSED:
        return "refused by memory"
    if result.outcome == Outcome.UNFINISHED:
        return NOT_FINISHED[Outcome.UNFINISHED]
    if result.outcome == Outcome.UNSEARCHED:
        return f"{NOT_FINISHED[Outcome.UNSEARCHED]} ({result.status})"
    how = f"CP-SAT {result.search_seconds:g} s" if result.search_seconds else "no search"
    return f"solved ({result.status}, {how})"


def plan_rows(result: PlanResult, top: int | None = None) -> list[dict[str, Any]]:
    """The ranked rows (the refused ones, unranked, last), the first `top` of them when given, and the
    best's after them when it ranks below them (the simplest of the rows tied with the fastest)."""
    rows = []
    rank = 0
    for item in result.results:
        if item.measure is not None:
            rank += 1
        rows.append(plan_row(rank if item.measure is not None else None, item, tie_word(result, item)))
    if top is None:
        return rows
    best = next((row for row in rows[top:] if row["tie"] == "best"), None)
    return rows[:top] + ([best] if best is not None else [])


def tie_word(result: PlanResult, item: ConfigResult) -> str:
    """`best` for the plan's best and `tied` for the other rows tied with the fastest, where more than one
    is; '' for the rest."""
    if sum(result.tied(other) for other in result.results) < 2 or not result.tied(item):
        return ""
    return "best" if item is result.best else "tied"


def counts_line(result: PlanResult) -> str:
    counts = {outcome: result.count(outcome) for outcome in Outcome}
    line = (
        f"configurations: {len(result.results)} (solved {counts[Outcome.SOLVED]}, pruned by bound "
        f"{counts[Outcome.PRUNED]}, refused by memory {counts[Outcome.REFUSED]}"
    )
    line += "".join(f", {words} {counts[outcome]}" for outcome, words in NOT_FINISHED.items() if counts[outcome])
    line += ")"
    if result.skipped_shapes:
        line += f"; {_count(len(result.skipped_shapes), 'shape')} left out"
    if result.merged_shapes:
        line += f"; {_count(len(result.merged_shapes), 'setting')} merged"
    return line


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def left_out_lines(result: PlanResult) -> list[str]:
    """The shapes left out, each with its reason, and the settings merged into another that costs the
    same (tried as it, not refused); at most LISTED of each by name."""
    return [
        f"{what}: {_listed(lines)}"
        for what, lines in (("left out", result.skipped_shapes), ("merged", result.merged_shapes))
        if lines
    ]


def _listed(lines: list[str]) -> str:
    more = len(lines) - LISTED
    return "; ".join(lines[:LISTED]) + (f"; and {more} more (the JSON document lists them)" if more > 0 else "")


def plan_summary(result: PlanResult) -> list[str]:
    """The lines under the table: the counts, the best and how good it is proven, how the plan ran."""
    lines = [counts_line(result), *left_out_lines(result)]
    tight = [item for item in result.results if item.memory_fit is MemoryFit.TIGHT]
    if tight:
        lines.append(
            f"tight: {len(tight)} configurations need more than the {tight[0].usable_memory / GIB:.1f} GiB a GPU may "
            f"use, by less than the memory estimate's {MEMORY_ERROR:.0%} error: ranked, marked tight; they may fit, "
            "check them on the GPU"
        )
    if result.interrupted:
        lines.append("interrupted: the ranking of what the plan had; what it had not finished is marked so")
    elif result.count(Outcome.UNFINISHED) and result.best is not None:
        lines.append(
            f"the time budget of {result.time_budget:g} s ran out with "
            f"{_count(result.count(Outcome.UNFINISHED), 'configuration')} not assessed: the ranking is of what it "
            "assessed, and the best is not proven; raise it"
        )
    best = result.best
    if best is None or best.measure is None:
        lines.append(f"best: none; {no_best_text(result)}")
    else:
        measure = best.measure
        lines.append(f"best: {best.config.label}{_tie_text(result)}: {iteration_text(measure, best.usable_memory)}")
        if best.memory_fit is MemoryFit.TIGHT:
            lines.append(tight_text(measure.memory_per_gpu, best.usable_memory))
        lines += _fastest_lines(result)
        faster = result.tight_and_faster
        if faster and faster[0].measure is not None:
            first = faster[0].measure
            lines.append(
                f"faster but tight: {faster[0].config.label}: {first.iteration_ms:.1f} ms "
                f"({format_percent(1 - first.iteration_ms / measure.iteration_ms)} faster), "
                f"{tight_text(first.memory_per_gpu, faster[0].usable_memory).removeprefix('tight: ')}"
            )
        lines.append(f"where the time goes: {breakdown_text(measure)}")
        lines.append(
            f"schedule: {schedule_title(best.made_by)}, {best.status}, gap to its bound {format_percent(best.gap or 0.0)}"
        )
        if result.best_gap is not None and result.best_gap <= 0:
            lines.append("proven: no configuration can be faster")
        elif result.best_gap is not None:
            lines.append(
                f"proven: no configuration can be more than {format_percent(result.best_gap)} faster than the best"
            )
    lines += runtime_lines(result)
    lines.append(
        f"wall time {result.wall_seconds:.1f} s of a {result.time_budget:g} s budget; {result.parallel} solves at "
        f"a time ({result.executor}), {result.cpsat_workers} CP-SAT workers each, seed {result.seed}"
    )
    if result.timing_dependent:
        lines.append("note: the time budget ran out before the planned shares; another run may differ")
    return lines


def _tie_text(result: PlanResult) -> str:
    """`, the simplest of 3 tied within 3%`: how the best was chosen among the rows tied with the fastest."""
    ties = sum(result.tied(item) for item in result.results)
    return f", the simplest of {ties} tied within {result.tie_tolerance:.0%}" if ties > 1 else ""


def _fastest_lines(result: PlanResult) -> list[str]:
    """The fastest on paper beside the best when they differ: how much faster, that it is a tie, and
    what makes the best simpler."""
    best, fastest = result.best, result.fastest
    if best is None or fastest is None or best is fastest or best.measure is None or fastest.measure is None:
        return []
    ahead = 1 - fastest.measure.iteration_ms / best.measure.iteration_ms
    return [
        f"fastest on paper: {fastest.config.label}: {fastest.measure.iteration_ms:.1f} ms, "
        f"{format_percent(ahead)} faster, within the cost model's error ({result.tie_tolerance:.0%}); "
        f"the best is simpler: {_simpler_text(result.recommended_because, best, fastest)}"
    ]


def _simpler_text(because: str, best: ConfigResult, fastest: ConfigResult) -> str:
    """What makes the best simpler than the fastest, on the criterion `because` (`solver.plan.ties`)."""
    one, other = best.config, fastest.config
    if because == "stages":
        return f"{_count(one.pipeline * one.chunks, 'pipeline stage')} against {other.pipeline * other.chunks}"
    if because == "chunks":
        return f"{_count(one.chunks, 'chunk')} a device against {other.chunks}"
    if because == "schedule":
        return f"{schedule_title(best.made_by)} against {schedule_title(fastest.made_by)}, nearer a framework's own"
    if best.measure is None or fastest.measure is None:
        return "the same"
    return f"{best.measure.memory_per_gpu / GIB:.1f} GiB a GPU against {fastest.measure.memory_per_gpu / GIB:.1f}"


def runtime_lines(result: PlanResult) -> list[str]:
    """Which runtimes run the best, and each runtime's best with what it costs against the plan's
    best (docs/plan.md says how they are found)."""
    best = result.best
    if best is None or best.measure is None:
        return []
    held = "" if result.runtime == "any" else f" (the plan was held to {result.runtime})"
    lines = [f"runs on: {', '.join(result.best_runs_on) or 'none of the runtimes'}{held}"]
    if result.runtime_bests:
        lines.append("fastest of each runtime (of the configurations assessed):")
    width = max((len(item.runtime) for item in result.runtime_bests), default=0)
    for item in result.runtime_bests:
        measure = item.measure
        slower = measure.iteration_ms / best.measure.iteration_ms - 1
        versus = (
            "the plan's best"
            if same(measure.iteration_ms, best.measure.iteration_ms)
            else (
                f"+{format_percent(slower)} on the plan's best"
                if slower > 0
                else f"{format_percent(-slower)} faster than the plan's best"
            )
        )
        unsure = "" if item.complete else "; an unassessed configuration may beat it"
        lines.append(
            f"  {item.runtime:<{width}}  {item.config.label}, {schedule_title(item.made_by)}: "
            f"{measure.iteration_ms:.1f} ms, {measure.tokens_per_s:,.0f} tokens/s, MFU {format_percent(measure.mfu)}, "
            f"{measure.memory_per_gpu / GIB:.1f} GiB ({versus}{unsure})"
        )
    return lines


def runtime_document(result: PlanResult) -> dict[str, Any]:
    """The runtimes' part of the plan's JSON document."""
    return {
        "held_to": result.runtime,
        "best_runs_on": list(result.best_runs_on),
        "best": {
            item.runtime: {
                **configuration_cells(item.config),
                "label": item.config.label,
                "schedule": schedule_title(item.made_by),
                "complete": item.complete,
                **measure_cells(item.measure),
            }
            for item in result.runtime_bests
        },
    }


def iteration_text(measure: Measure, usable_memory: float) -> str:
    """`548.4 ms an iteration (schedule ... + ...), 239,000 tokens/s, MFU 41.2%, 30.1 GiB per GPU (model
    state 12.0 + activations 18.1) of 37.2 GiB usable, 7.1 free`: a configuration's measure in a line."""
    return (
        f"{measure.iteration_ms:.1f} ms an iteration "
        f"(schedule {measure.makespan_ms:.1f} + data-parallel exchange {measure.exchange_ms:.1f} + optimizer "
        f"{measure.optimizer_ms:.1f}), {measure.tokens_per_s:,.0f} tokens/s, MFU {format_percent(measure.mfu)}, "
        f"{memory_split_text(measure, usable_memory)}"
    )


def memory_split_text(measure: Measure, usable_memory: float) -> str:
    """`30.1 GiB per GPU (model state 12.0 + activations 18.1) of 37.2 GiB usable, 7.1 free`: the model
    state is what the layout needs, the activations what its schedule holds."""
    return (
        f"{measure.memory_per_gpu / GIB:.1f} GiB per GPU (model state {measure.model_state / GIB:.1f} + activations "
        f"{measure.activations / GIB:.1f}) of {usable_memory / GIB:.1f} GiB usable, "
        f"{(usable_memory - measure.memory_per_gpu) / GIB:.1f} free"
    )


def tight_text(memory: float, usable_memory: float) -> str:
    """`tight: predicted 74.0 GiB per GPU of 72.0 GiB usable, within the memory estimate's 10% error:
    may fit, check it on the GPU`."""
    return (
        f"tight: predicted {memory / GIB:.1f} GiB per GPU of {usable_memory / GIB:.1f} GiB usable, within the memory "
        f"estimate's {MEMORY_ERROR:.0%} error: may fit, check it on the GPU"
    )


def breakdown_text(measure: Measure) -> str:
    """`compute 401.2 ms (73.2%), recompute 0.0, ...`: the iteration's parts, each with its share (the
    host link's only where it exposes time: a schedule that offloads, `measure.breakdown`)."""
    return ", ".join(
        f"{name} {value:.1f} ms ({format_percent(value / measure.iteration_ms)})"
        for name, value in measure.breakdown.parts()
        if value or name != PART_NAMES["host_link_ms"]
    )


def no_best_text(result: PlanResult) -> str:
    """Why a plan has no best configuration, and what to do about it."""
    unfinished = result.count(Outcome.UNFINISHED)
    why = "interrupted" if result.interrupted else f"the time budget of {result.time_budget:g} s ran out; raise it"
    if unfinished == len(result.results):
        return f"no configuration was assessed: {why}"
    if unfinished:
        refused = result.count(Outcome.REFUSED)
        return (
            f"no configuration has a schedule yet: {why} ({refused} refused by memory, {unfinished} not assessed, "
            f"{sum(item.iteration_bound_ms is not None for item in result.results if item.outcome == Outcome.UNFINISHED)} "
            "of them bounded)"
        )
    return (
        "no configuration fits the GPUs' memory; give more GPUs or memory (`cluster.gpus`, `cluster.gpu_memory`), "
        "or a smaller model or global batch"
    )


def plan_document(result: PlanResult, top: int | None = None) -> dict[str, Any]:
    """The plan for programs (its JSON document)."""
    best = result.best
    return {
        "format": FORMAT,
        "units": {"time": "ms", "memory": "B", "throughput": "tokens/s"},
        "counts": {
            "configurations": len(result.results),
            **{outcome.value: result.count(outcome) for outcome in Outcome},
            "tight": sum(item.memory_fit is MemoryFit.TIGHT for item in result.results),
            "shapes_left_out": len(result.skipped_shapes),
            "merged": len(result.merged_shapes),
        },
        "best": None if best is None else plan_row(_rank(result, best), best, tie_word(result, best)),
        "fastest": None
        if result.fastest is None
        else plan_row(_rank(result, result.fastest), result.fastest, tie_word(result, result.fastest)),
        "tie_tolerance": result.tie_tolerance,
        "best_because": result.recommended_because,
        "best_gap": result.best_gap,
        "configurations": plan_rows(result, top),
        "shapes_left_out": result.skipped_shapes,
        "merged": result.merged_shapes,
        "runtimes": runtime_document(result),
        "run": {
            "wall_seconds": result.wall_seconds,
            "time_budget": result.time_budget,
            "executor": result.executor,
            "parallel": result.parallel,
            "cpsat_workers": result.cpsat_workers,
            "seed": result.seed,
            "timing_dependent": result.timing_dependent,
            "interrupted": result.interrupted,
            "tuning": result.tuning.as_dict(),
        },
    }


def _rank(result: PlanResult, item: ConfigResult) -> int:
    """A row's rank among the rows with a schedule (1: the fastest)."""
    timed = [other for other in result.results if other.measure is not None]
    return timed.index(item) + 1


def progress_text(phase: str, done: int, total: int, best_ms: float | None, elapsed: float, left: float) -> str:
    """`plan [######------] solving 2/5, best 548.4 ms, 12 s, about 40 s left`: the bar is the share of
    the time elapsed of the time elapsed and left."""
    what = {"bound": "bounding", "assess": "assessing"}.get(phase, "solving")
    best = "-" if best_ms is None else f"{best_ms:.1f} ms"
    share = elapsed / (elapsed + left) if elapsed + left > 0 else 1.0
    filled = round(BAR * min(1.0, share))
    bar = "#" * filled + "-" * (BAR - filled)
    return f"plan [{bar}] {what} {done}/{total}, best {best}, {elapsed:.0f} s, about {left:.0f} s left"
