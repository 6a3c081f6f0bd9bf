"""A layout's memory estimate against the usable memory, with the estimate's stated error: fits,
tight (ranked, marked, searched under the stretched budgets) or refused."""

from __future__ import annotations

from typing import Any

from pipesat.models.plan_result import MEMORY_ERROR, Configuration, MemoryFit, Outcome
from pipesat.models.units import MIB
from pipesat.solver.evaluate.bounds import minimum_memory_limits
from pipesat.solver.evaluate.metrics import compute_metrics
from pipesat.solver.evaluate.validator import validate
from pipesat.solver.instances.from_model import derive
from pipesat.solver.plan.executors import LocalExecutor
from pipesat.solver.plan.measure import usable_memory
from pipesat.solver.plan.memory_fit import fit_layout, fit_of
from pipesat.solver.plan.search import PlanOptions, plan
from pipesat.solver.plan.space import description
from pipesat.solver.plan.spec import PlanSpec
from pipesat.solver.plan.tasks import AssessTask, assess
from pipesat.solver.report.plan_text import plan_document, plan_summary
from tests.solver.plan.conftest import tiny

ONE = {"pipeline_parallel": [4], "microbatch_sizes": [1], "placements": ["linear"], "zero": [0], "recompute": ["none"]}
"""The tiny spec's training narrowed to one layout: p4 d1 b1 m4, linear."""
LAYOUT = Configuration(1, 4, 1, 1, "linear", 1, 4)


def need(spec: PlanSpec) -> float:
    """The layout's least memory on its worst device: model state plus one microbatch through its
    stages (bytes), derived without a budget."""
    unbounded = tiny(training=ONE, cluster={"gpu_memory": "1000GiB"})
    derivation = derive(description(unbounded, LAYOUT))
    least = minimum_memory_limits(derivation.instance)
    return max(state.bytes + amount * MIB for state, amount in zip(derivation.states, least, strict=True))


def at_usable(usable: float, **training: Any) -> PlanSpec:
    """The one-layout spec whose GPUs may use `usable` bytes (the reserve is 10%)."""
    return tiny(training=ONE | training, cluster={"gpu_memory": f"{usable / 0.9 / MIB:.6f}MiB"})


def test_an_estimate_is_tight_within_the_error_and_refused_beyond_it() -> None:
    assert fit_of(72.0, 72.0) is MemoryFit.FITS
    assert fit_of(74.0, 72.0) is MemoryFit.TIGHT
    assert fit_of(72.0 / (1 - MEMORY_ERROR) * 0.999, 72.0) is MemoryFit.TIGHT
    assert fit_of(72.0 / (1 - MEMORY_ERROR) * 1.001, 72.0) is MemoryFit.REFUSED


def test_a_layout_just_over_its_budget_is_tight_and_searched_under_the_stretched_budgets() -> None:
    least = need(tiny(training=ONE))
    spec = at_usable(least / (1 + MEMORY_ERROR / 2))
    usable = usable_memory(spec)
    assert least > usable  # refused before the error bar
    fitted = fit_layout(description(spec, LAYOUT))
    assert fitted.fit is MemoryFit.TIGHT and fitted.derivation is not None
    assert "needs at least" in fitted.why
    assessed = assess(AssessTask(spec=spec, config=LAYOUT))
    found = assessed.found
    assert found is not None and found.memory_fit is MemoryFit.TIGHT
    assert validate(found.schedule) == []
    # The schedule holds to the stretched limit, above the usable memory, never beyond its error.
    limits = found.schedule.instance.memory_limit
    assert limits is not None
    for state, limit, peak in zip(
        fitted.derivation.states, limits, compute_metrics(found.schedule).peak_memory, strict=True
    ):
        assert state.bytes + limit * MIB <= usable / (1 - MEMORY_ERROR) * (1 + 1e-9)
        assert peak <= limit * (1 + 1e-9)
    assert usable < found.measure.memory_per_gpu <= usable / (1 - MEMORY_ERROR) * (1 + 1e-9)


def test_a_layout_far_over_its_budget_is_refused_beyond_the_error() -> None:
    least = need(tiny(training=ONE))
    spec = at_usable(least * (1 - MEMORY_ERROR) * 0.95)
    assessed = assess(AssessTask(spec=spec, config=LAYOUT))
    assert assessed.found is None and not assessed.shape
    assert "beyond the memory estimate's" in assessed.refused


def test_a_layout_within_its_budget_fits_and_keeps_its_budgets() -> None:
    least = need(tiny(training=ONE))
    spec = at_usable(least * 1.5)
    fitted = fit_layout(description(spec, LAYOUT))
    assert fitted.fit is MemoryFit.FITS and fitted.derivation is not None
    assert fitted.derivation.instance.memory_limit == derive(description(spec, LAYOUT)).instance.memory_limit
    found = assess(AssessTask(spec=spec, config=LAYOUT)).found
    assert found is not None and found.measure.memory_per_gpu <= usable_memory(spec)


def test_a_tight_row_is_ranked_marked_and_its_memory_split_in_the_document() -> None:
    least = need(tiny(training=ONE))
    spec = at_usable(least / (1 + MEMORY_ERROR / 2))
    result = plan(spec, LocalExecutor(1), PlanOptions(time_budget=10))
    index, row = next((i, item) for i, item in enumerate(result.results) if item.config == LAYOUT)
    assert row.memory_fit is MemoryFit.TIGHT and row.outcome is Outcome.SOLVED and row.measure is not None
    cells = plan_document(result)["configurations"][index]
    assert cells["rank"] is not None and cells["memory_fit"] == "tight" and cells["outcome"].startswith("tight, ")
    assert cells["model_state"] + cells["activations"] == cells["memory_per_gpu"]
    assert cells["headroom"] == cells["usable_memory"] - cells["memory_per_gpu"] < 0
    tight = sum(item.memory_fit is MemoryFit.TIGHT for item in result.results)
    assert plan_document(result)["counts"]["tight"] == tight >= 1
    assert f"tight: {tight} configurations need more than" in "\n".join(plan_summary(result))
