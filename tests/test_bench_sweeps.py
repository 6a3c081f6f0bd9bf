"""benchmarks/bench_sweeps.py: its data file adds up and names its source and cluster, a layout
predicts through the plan's code on that cluster, and the ranking's arithmetic (Spearman's rho, the
plan's pick, the layouts it would not run) holds."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType

import pytest

from pipesat.models import InputError
from pipesat.solver.evaluate.validator import validate
from tests.conftest import ROOT


def _load_benchmark() -> ModuleType:
    """The benchmark script as a module; it imports bench_cost_model and results_header beside it
    (benchmarks/ is scripts, not a package), so their folder goes on the path."""
    folder = str(ROOT / "benchmarks")
    if folder not in sys.path:
        sys.path.insert(0, folder)
    return importlib.import_module("bench_sweeps")


bench = _load_benchmark()
SWEEPS = {sweep.name: sweep for sweep in bench.load_sweeps()}


def test_the_data_file_holds_vtrains_four_sweeps_as_they_ran_on_their_cluster() -> None:
    assert {name: len(sweep.layouts) for name, sweep in SWEEPS.items()} == {
        "vtrain-3.6b": 26,
        "vtrain-18.4b": 15,
        "vtrain-39.1b": 47,
        "vtrain-175b": 21,
    }
    for sweep in SWEEPS.values():
        assert "VIA-Research/vTrain" in sweep.source
        for run in sweep.layouts:
            assert run.tensor_parallel * run.pipeline_parallel * run.data_parallel == run.gpus, run.name
            assert run.microbatches * run.microbatch_size * run.data_parallel == run.global_batch, run.name
            assert run.cluster == {"gpus_per_node": 8, "nics_per_node": 4, "bandwidth": 12.5}, run.name
            assert run.recompute == "full" and run.schedule == "1f1b" and run.seq_len == 2048, run.name
            assert run.model["vocab"] == 51200 and run.measured > 0, run.name
    names = [run.name for run in SWEEPS["vtrain-175b"].layouts]
    assert len(set(names)) == len(names) and "vtrain-175b t4 p32 d4 b2 #2" in names  # measured twice


def test_a_layout_whose_degrees_are_not_its_gpus_is_refused(tmp_path: Path) -> None:
    text = bench.DATA.read_text().replace("- [8, 1, 32, 8, 9603.6]", "- [8, 2, 32, 8, 9603.6]")
    path = tmp_path / "sweeps.yaml"
    path.write_text(text)
    with pytest.raises(
        InputError, match=r"sweeps.yaml: run vtrain-18.4b t8 p2 d32 b8: t·cp·p·d = 512, not its 256 GPUs"
    ):
        bench.load_sweeps(path)


def test_a_layout_predicts_through_the_plans_code_on_the_sources_cluster() -> None:
    run = next(run for run in SWEEPS["vtrain-18.4b"].layouts if run.name == "vtrain-18.4b t8 p8 d4 b8")
    found = bench.iteration(run)
    assert validate(found.schedule) == []
    cluster = found.spec.cluster
    assert (cluster.bandwidth, cluster.gpus_per_node, cluster.nics_per_node) == (12.5, 8, 4)
    assert found.derivation.instance.num_devices == 8 and found.derivation.instance.num_microbatches == 32
    row = bench.predict_row(run)
    assert row.why == "" and row.predicted_ms == pytest.approx(found.measure.iteration_ms)


def test_ranks_share_ties_and_spearman_reads_the_order() -> None:
    assert bench.ranks([3.0, 1.0, 3.0, 2.0]).tolist() == [3.5, 1.0, 3.5, 2.0]
    assert bench.spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert bench.spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    assert bench.spearman([1, 2, 3], [1, 3, 2]) == pytest.approx(0.5)


def test_the_pick_is_the_fastest_predicted_layout_the_plan_would_run() -> None:
    rows = [bench.predict_row(run) for run in SWEEPS["vtrain-18.4b"].layouts]
    summary = bench.summarize(rows)
    # t16 spans two nodes: predicted, its all-reduces over the nodes' NICs, as it is the spec's only t.
    assert [row.run.name for row in rows if row.why] == []
    assert summary.not_run == []
    assert summary.pick is not None and summary.pick.predicted_ms == min(row.predicted_ms for row in rows)
    assert summary.best.measured_ms == min(row.measured_ms for row in rows)
    assert summary.pick_slower == pytest.approx(summary.pick.measured_ms / summary.best.measured_ms - 1)
    assert dict(summary.targets())["none refused or unpredictable"] is True
