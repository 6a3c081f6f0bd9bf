"""benchmarks/bench_memory.py: its data file adds up and names its sources, a run's prediction splits
into model state and activations, and the stated error is the benchmark's rule applied to its runs."""

from __future__ import annotations

import importlib.util
import math
import sys
from types import ModuleType

from pipesat.models.plan_result import MEMORY_ERROR, MemoryFit
from tests.conftest import ROOT


def _load(name: str) -> ModuleType:
    """A benchmark script as a module (benchmarks/ is scripts, not a package; bench_memory imports
    bench_cost_model and results_header by name, as the scripts run)."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))


bench = _load("bench_memory")
RUNS = bench.load()


def test_every_run_names_its_source_reads_a_peak_and_adds_up() -> None:
    assert len(RUNS) >= 10 and len({item.run.name for item in RUNS}) == len(RUNS)
    for item in RUNS:
        run = item.run
        assert run.tensor_parallel * run.context_parallel * run.pipeline_parallel * run.data_parallel == run.gpus
        assert "commit" in run.source and item.peak_gib > 0 and item.reading == "reserved"
    assert sum(not item.apart for item in RUNS) >= 2


def test_a_runs_prediction_is_its_model_state_plus_its_activations() -> None:
    item = next(item for item in RUNS if item.run.name == "tt-8b-fsdp128")
    predicted = bench.predict(item)
    # FSDP2 over 128 GPUs: 16 bytes a parameter sharded, plus two bf16 layers gathered.
    assert 2.5 < predicted.state_gib < 3.5 and predicted.activations_gib > 10 * predicted.state_gib
    assert predicted.total_gib == predicted.state_gib + predicted.activations_gib
    assert math.isclose(predicted.error, predicted.total_gib / 67.0 - 1)


def test_the_stated_error_is_the_largest_error_held_in_rounded_up_and_no_run_that_trained_is_refused() -> None:
    predicted = [bench.predict(item) for item in RUNS if not item.apart]
    assert math.isclose(MEMORY_ERROR, math.ceil(max(abs(row.error) for row in predicted) * 100) / 100)
    assert all(row.fit is not MemoryFit.REFUSED for row in predicted)
