"""benchmarks/bench_collectives.py: its data file names a source for every row and states each
system's links, and the predicted busbw is nccl-tests' own arithmetic over the model's time."""

from __future__ import annotations

import importlib
import sys
from types import ModuleType

import pytest

from pipesat.solver.instances.collectives import Collective
from pipesat.solver.instances.gpus import CATALOGUE
from tests.conftest import ROOT


def _load_benchmark() -> ModuleType:
    """The benchmark script as a module (benchmarks/ is scripts, not a package: its folder goes on the path)."""
    folder = str(ROOT / "benchmarks")
    if folder not in sys.path:
        sys.path.insert(0, folder)
    return importlib.import_module("bench_collectives")


bench = _load_benchmark()
ROWS = bench.load_rows()


def test_every_row_names_its_source_and_its_system_states_its_links() -> None:
    assert len(ROWS) >= 10
    for row in ROWS:
        assert row.source.strip() and row.kind in ("measured", "expected")
        assert row.algorithm in ("ring", "nvls", "tree")
        assert row.system.gpu in CATALOGUE and row.system.nvlink > 0 and row.system.nic > 0
        assert row.gpus % row.system.gpus_per_node == 0 or row.gpus < row.system.gpus_per_node
    assert {row.system.gpu for row in ROWS} == {"A100-80GB", "H100-SXM"}


def test_the_predicted_busbw_is_nccl_tests_arithmetic_and_within_a_node_nvlinks() -> None:
    one_node = next(row for row in ROWS if row.nodes == 1 and row.system.name == "dgx-a100")
    # A large message in one node: close to 0.8 of NVLink's 300 GB/s, never above it.
    assert one_node.predicted() == pytest.approx(0.8 * 300, rel=0.01)
    gather = next(row for row in ROWS if row.collective is Collective.ALL_GATHER)
    reduce = next(row for row in ROWS if row.collective is Collective.ALL_REDUCE and row.gpus == gather.gpus)
    # The same bytes a GPU at the same bus bandwidth: the same busbw, whichever collective.
    assert gather.predicted() == pytest.approx(reduce.predicted(), rel=0.01)


def test_the_ring_rows_are_held_within_five_percent_at_the_median() -> None:
    ring = [row for row in ROWS if row.algorithm == "ring"]
    assert bench.median_error(ring) <= 0.05
