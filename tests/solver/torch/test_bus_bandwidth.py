"""The all-reduce's bus bandwidth, measured over two gloo processes on the CPU."""

from __future__ import annotations

import pytest

from pipesat.solver.torch.bus_bandwidth import bus_bandwidth, measure_all_reduce

pytest.importorskip("torch")


def test_the_all_reduce_bus_bandwidth_over_two_gloo_processes() -> None:
    assert bus_bandwidth(10**9, 1000.0, 4) == 1.5  # 2(n-1)/n of a GB a second
    sizes = measure_all_reduce("gloo", 2, sizes=(4096, 65536), repeats=2)
    assert [size.size_bytes for size in sizes] == [4096, 65536]
    for size in sizes:
        assert size.time_ms > 0
        assert size.bus_bandwidth == pytest.approx(bus_bandwidth(size.size_bytes, size.time_ms, 2), rel=1e-3)
