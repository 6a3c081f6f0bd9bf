from __future__ import annotations

import dataclasses

import pytest

from pipesat.models.plan_result import Configuration
from pipesat.solver.instances.from_model import derive
from pipesat.solver.instances.model_state import DeviceState
from pipesat.solver.plan.measure import model_flops, optimizer_ms, reduce_ms, usable_memory
from pipesat.solver.plan.search import AssessTask, assess
from pipesat.solver.plan.space import description
from tests.solver.plan.conftest import tiny

STATES = [DeviceState(parameters=1e9, bytes=18e9), DeviceState(parameters=5e8, bytes=9e9)]


def config(d: int, t: int = 1) -> Configuration:
    return Configuration(t, 2, d, 1, "linear", 1, 4)


def test_the_ring_all_reduce_of_the_largest_device() -> None:
    spec = tiny(cluster={"bandwidth": 10, "latency": 10, "node_bandwidth": 100, "node_latency": 2, "gpus_per_node": 2})
    assert reduce_ms(spec, config(1), STATES) == 0.0
    # d = 4 replicas one GPU apart span 2 nodes of 2: the link between nodes.
    expected = 2 * 3 / 4 * 1e9 * 4 / 10e9 * 1e3 + 2 * 3 * 10 / 1e3
    assert reduce_ms(spec, config(4), STATES) == pytest.approx(expected)
    # d = 2 within a node.
    assert reduce_ms(spec, config(2), STATES) == pytest.approx(2 * 1 / 2 * 4e9 / 100e9 * 1e3 + 2 * 2 / 1e3)


def test_zero1_reduce_scatters_and_all_gathers_and_shards_the_step() -> None:
    spec = tiny(training={"zero1": True})
    expected = 3 / 4 * 1e9 * (4 + 2) / 10e9 * 1e3 + 2 * 3 * 10 / 1e3
    assert reduce_ms(spec, config(4), STATES) == pytest.approx(expected)
    plain = tiny()
    assert optimizer_ms(spec, config(4), STATES) == pytest.approx(optimizer_ms(plain, config(4), STATES) / 4)


def test_the_optimizer_step_reads_and_writes_its_state() -> None:
    spec = tiny(cluster={"memory_bandwidth": 1000})
    assert optimizer_ms(spec, config(1), STATES) == pytest.approx(1e9 * (24 + 4 + 2) / 1000e9 * 1e3)


def test_model_flops_are_six_n_tokens_plus_attention_and_head() -> None:
    spec = tiny()
    model = spec.model
    h, s, layers = model.hidden, model.seq_len, model.layers
    matmul_parameters = layers * 12 * h * h  # attention 4h² and a 4h GELU MLP 8h²
    tokens = spec.global_batch * s
    attention = layers * 3 * 4 * s * h * 0.5 * tokens  # QKᵀ and the values, causal flash half
    head = 6 * h * model.vocab * tokens
    assert model_flops(spec) == pytest.approx(6 * matmul_parameters * tokens + attention + head)


def test_a_measure_adds_the_fixed_terms_and_reports_throughput() -> None:
    spec = tiny()
    found = assess(AssessTask(spec, Configuration(1, 2, 2, 1, "linear", 1, 2))).found
    assert found is not None
    m = found.measure
    assert m.iteration_ms == pytest.approx(m.makespan_ms + m.reduce_ms + m.optimizer_ms)
    assert m.tokens_per_s == pytest.approx(spec.tokens_per_iteration / (m.iteration_ms / 1e3))
    assert m.mfu == pytest.approx(model_flops(spec) / (4 * 100e12 * m.iteration_ms / 1e3))
    assert 0 < m.mfu < spec.cluster.efficiency
    derivation = derive(description(spec, found.config))
    assert m.memory_per_gpu > max(state.bytes for state in derivation.states)
    assert m.memory_per_gpu <= usable_memory(spec)
    assert usable_memory(dataclasses.replace(spec)) == pytest.approx(0.9 * 2 * 2**30)
