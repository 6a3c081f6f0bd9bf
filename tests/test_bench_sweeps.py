"""benchmarks/bench_sweeps.py: its data file adds up and names its source and cluster, a layout
predicts through the plan's code on that cluster, and the ranking's arithmetic (Spearman's rho, the
plan's pick, the layouts it would not run) holds."""

from __future__ import annotations

import dataclasses
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
    vtrain = {name: sweep for name, sweep in SWEEPS.items() if name.startswith("vtrain-")}
    assert {name: len(sweep.layouts) for name, sweep in vtrain.items()} == {
        "vtrain-3.6b": 26,
        "vtrain-18.4b": 15,
        "vtrain-39.1b": 47,
        "vtrain-175b": 21,
    }
    for sweep in vtrain.values():
        assert "VIA-Research/vTrain" in sweep.source and "Megatron-DeepSpeed" in sweep.source
        for run in sweep.layouts:
            assert run.tensor_parallel * run.pipeline_parallel * run.data_parallel == run.gpus, run.name
            assert run.microbatches * run.microbatch_size * run.data_parallel == run.global_batch, run.name
            assert run.cluster == {"gpus_per_node": 8, "nics_per_node": 4, "bandwidth": 12.5}, run.name
            assert run.recompute == "full" and run.schedule == "1f1b" and run.seq_len == 2048, run.name
            assert run.model["vocab"] == 51200 and run.measured > 0, run.name
            # Megatron-DeepSpeed in fp16: gradients held and all-reduced at 2 bytes, the
            # tensor-parallel all-reduce not overlapped (the data file's `assumed`)
            assert run.precision == "fp16" and run.training == {"grad_bytes": 2}, run.name
            assert not run.overlap_tp_comm, run.name
    names = [run.name for run in SWEEPS["vtrain-175b"].layouts]
    assert len(set(names)) == len(names) and "vtrain-175b t4 p32 d4 b2 #2" in names  # measured twice


def test_the_zero_bubble_sweeps_are_table_4s_schedules_at_its_microbatch_counts() -> None:
    """Each model's 12 rows: ZB-2p, ZB-1p, 1F1B and 1F1B-I (one layer a chunk, the ends in a layer's
    place) at three microbatch counts, one pipeline over the setup's GPUs, samples a second a GPU
    turned into the iteration's seconds."""
    setups = {"zb-1.5b": (8, 6, 3), "zb-6.2b": (8, 3, 4), "zb-14.6b": (16, 1, 3), "zb-28.3b": (32, 1, 2)}
    for name, (gpus, microbatch, chunks) in setups.items():
        runs = SWEEPS[name].layouts
        assert "Zero Bubble Pipeline Parallelism" in SWEEPS[name].source
        assert sorted({run.schedule for run in runs}) == ["1f1b", "interleaved", "zb-1p", "zb-2p"], name
        assert len(runs) == 12 and len({bench.layout_key(run) for run in runs}) == 12, name
        for run in runs:
            assert (run.pipeline_parallel, run.tensor_parallel, run.data_parallel) == (gpus, 1, 1), run.name
            assert run.microbatch_size == microbatch and run.layer_split == "ends_one_fewer", run.name
            assert run.chunks == (chunks if run.schedule == "interleaved" else 1), run.name
            assert (run.model["layers"] + 2) % (gpus * run.chunks) == 0, run.name
            assert run.recompute == "none" and run.seq_len == 1024, run.name
    first = SWEEPS["zb-1.5b"].layouts[0]  # ZB-2p at 24 microbatches of 6: 14.5 samples a second a GPU
    assert first.name == "zb-1.5b t1 p8 d1 b6 m24 zb-2p" and first.global_batch == 144
    assert first.measured == pytest.approx(144 / (14.5 * 8))


def test_a_row_that_does_not_give_its_columns_is_refused(tmp_path: Path) -> None:
    text = bench.DATA.read_text().replace("- [24, zb-2p, 1, 14.5]", "- [24, zb-2p, 14.5]")
    path = tmp_path / "sweeps.yaml"
    path.write_text(text)
    with pytest.raises(InputError, match=r"sweeps.yaml: sweep zb-1.5b: row \[24, 'zb-2p', 14.5\] does not give"):
        bench.load_sweeps(path)


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


def test_the_vtrain_runs_two_byte_gradients_reach_the_memory_and_the_all_reduce() -> None:
    """The source's fp16 gradients (grad_bytes 2) cost a GPU less model state and all-reduce faster
    than the 4-byte main gradients a run holds without the setting."""
    run = next(run for run in SWEEPS["vtrain-3.6b"].layouts if run.name == "vtrain-3.6b t8 p1 d8 b8")
    held = bench.predict(run)
    fp32 = bench.predict(dataclasses.replace(run, training={}))
    for prediction in (held, fp32):
        assert validate(bench.iteration(prediction.run).schedule) == []
    assert held.measure.memory_per_gpu < fp32.measure.memory_per_gpu
    assert held.measure.iteration_ms < fp32.measure.iteration_ms


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


def test_a_sweep_of_different_batches_is_ranked_by_its_time_a_sequence() -> None:
    """The Zero Bubble rows run 24, 32 and 64 microbatches: the fastest iteration is the smallest
    batch, the best and the pick are the least time a sequence."""
    rows = [bench.predict_row(run) for run in SWEEPS["zb-1.5b"].layouts]
    for row in rows[::3]:  # one of each schedule, ZB-2p's and ZB-1p's split backward included
        assert row.prediction is not None and validate(bench.iteration(row.run).schedule) == []
    summary = bench.summarize(rows)
    assert summary.batches_differ
    assert summary.best.run.name == "zb-1.5b t1 p8 d1 b6 m64 zb-2p"  # 384 / (14.9 x 8) s: least a sequence
    assert min(rows, key=lambda row: row.measured_ms).run.microbatches == 24
    assert summary.pick is not None and summary.pick.run.microbatches == 64
    pick, best = summary.pick.run, summary.best.run
    expected = (summary.pick_ms / pick.global_batch) / (summary.best_ms / best.global_batch) - 1
    assert summary.pick_slower == pytest.approx(expected)
    measured = [row.measured_ms / row.run.global_batch for row in rows]
    predicted = [row.predicted_ms / row.run.global_batch for row in rows]
    assert summary.rho == pytest.approx(bench.spearman(predicted, measured))


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--only", "zb-1.5"], "--only: no sweep zb-1.5; the sweeps: vtrain-18.4b"),
        (["--only", "zb-1.5b", "--explain", "zb-1.5b t1 p8 d1 b6 m24 zb2p"], "--explain: no layout zb-1.5b t1 p8"),
    ],
)
def test_an_unknown_sweep_or_layout_is_one_line_and_exit_2(
    argv: list[str], says: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys, "argv", ["bench_sweeps.py", *argv])
    with pytest.raises(SystemExit) as exited:
        bench.main()
    assert exited.value.code == 2
    captured = capsys.readouterr()
    assert says in captured.err and captured.out == "" and "Traceback" not in captured.err
