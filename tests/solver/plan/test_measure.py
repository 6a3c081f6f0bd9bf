from __future__ import annotations

import dataclasses

import pytest

from pipesat.models import Schedule
from pipesat.models.plan_result import Configuration, Measure
from pipesat.solver.evaluate.metrics import compute_metrics
from pipesat.solver.evaluate.validator import ensure_valid
from pipesat.solver.heuristics import run_heuristic
from pipesat.solver.instances.collectives import BUS_EFFICIENCY, NETWORK_EFFICIENCY, Collective, Link, collective_ms
from pipesat.solver.instances.data_parallel import buckets
from pipesat.solver.instances.from_model import Derivation, derive
from pipesat.solver.plan.measure import (
    critical_device,
    exchange_ms,
    iteration_lines,
    measure,
    model_flops,
    optimizer_ms,
    usable_memory,
)
from pipesat.solver.plan.space import description
from pipesat.solver.plan.spec import PlanSpec
from pipesat.solver.plan.tasks import AssessTask, assess
from tests.solver.plan.conftest import MOE, tiny

SPLIT_LINKS = {"bandwidth": 10, "latency": 10, "node_bandwidth": 100, "node_latency": 2, "gpus_per_node": 2}


def config(d: int, t: int = 1, zero: int = 0, recompute: str = "none") -> Configuration:
    return Configuration(t, 4 // (t * d), d, 1, "linear", 1, 4, recompute=recompute, zero=zero)


def found_measure(spec: PlanSpec, chosen: Configuration) -> Measure:
    found = assess(AssessTask(spec=spec, config=chosen)).found
    assert found is not None
    return found.measure


def test_the_exchange_is_the_largest_devices_all_reduce_over_the_groups_link() -> None:
    spec = tiny(cluster=SPLIT_LINKS, training={"overlap_grad_reduce": False})
    one = config(1)
    derivation = derive(description(spec, one))
    assert exchange_ms(description(spec, one), derivation) == 0.0
    # 4 replicas span 2 nodes of 2, 2 GPUs of the group a node: 2 GPUs' share of the network in NVLink's
    # terms, NVLink's latency for 2 of the ring's steps and the network's for 2; 2 replicas do not span.
    across = Link(2 * 10 * NETWORK_EFFICIENCY / BUS_EFFICIENCY, (2 * 2 + 2 * 10) / 4)
    for d, link in ((4, across), (2, Link(100, 2))):
        chosen = config(d)
        derivation = derive(description(spec, chosen))
        parameters = max(state.parameters for state in derivation.states)
        expected = sum(collective_ms(Collective.ALL_REDUCE, b * 4, d, link) for b in buckets(parameters, d))
        assert exchange_ms(description(spec, chosen), derivation) == pytest.approx(expected)


def test_overlap_exposes_less_than_none_and_at_least_the_last_bucket() -> None:
    # h 2048: 50M parameters a layer, 10 buckets on the one pipeline device of 4 replicas.
    model, cluster = {"hidden": 2048, "heads": 16}, {**SPLIT_LINKS, "gpu_memory": "80GiB"}
    for zero in (0, 1, 2):
        overlapped, exposed = (
            tiny(model=model, cluster=cluster),
            tiny(model=model, cluster=cluster, training={"overlap_grad_reduce": False, "overlap_param_gather": False}),
        )
        chosen = config(4, zero=zero)
        derivation = derive(description(overlapped, chosen))
        parameters = max(state.parameters for state in derivation.states)
        collective = Collective.ALL_REDUCE if zero == 0 else Collective.REDUCE_SCATTER
        last = collective_ms(collective, buckets(parameters, 4)[-1] * 4, 4, Link(10, 10))
        hidden = exchange_ms(description(overlapped, chosen), derivation)
        whole = exchange_ms(description(exposed, chosen), derivation)
        assert last <= hidden < whole


def test_zero_shards_the_optimizer_step_and_zero_3_exchanges_in_the_ops() -> None:
    spec = tiny(cluster={"memory_bandwidth": 1000})
    plain, sharded = config(2), config(2, zero=1)
    derivation = derive(description(spec, plain))
    parameters = max(state.parameters for state in derivation.states)
    assert optimizer_ms(spec, description(spec, plain), derivation) == pytest.approx(
        parameters * (24 + 4 + 2) / 1000e9 * 1e3
    )
    assert optimizer_ms(spec, description(spec, sharded), derivation) == pytest.approx(
        optimizer_ms(spec, description(spec, plain), derivation) / 2
    )
    fsdp = found_measure(spec, config(2, zero=3))
    assert fsdp.exchange_ms == 0 and fsdp.breakdown.data_parallel_ms > 0
    assert fsdp.makespan_ms > found_measure(spec, config(2, zero=2)).makespan_ms


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
    m = found_measure(spec, Configuration(1, 2, 2, 1, "linear", 1, 2))
    assert m.iteration_ms == pytest.approx(m.makespan_ms + m.exchange_ms + m.optimizer_ms)
    assert m.tokens_per_s == pytest.approx(spec.tokens_per_iteration / (m.iteration_ms / 1e3))
    assert m.mfu == pytest.approx(model_flops(spec) / (4 * 100e12 * m.iteration_ms / 1e3))
    assert 0 < m.mfu < spec.cluster.efficiency
    derivation = derive(description(spec, Configuration(1, 2, 2, 1, "linear", 1, 2)))
    assert m.memory_per_gpu > max(state.bytes for state in derivation.states)
    assert m.memory_per_gpu <= usable_memory(spec)
    assert usable_memory(dataclasses.replace(spec)) == pytest.approx(0.9 * 2 * 2**30)


def test_the_memory_is_the_fullest_devices_model_state_and_its_schedules_peak_activations_apart() -> None:
    spec = tiny()
    chosen = Configuration(1, 2, 2, 1, "linear", 1, 2)
    derivation = derive(description(spec, chosen))
    found = assess(AssessTask(spec=spec, config=chosen)).found
    assert found is not None
    peaks = compute_metrics(found.schedule).peak_memory
    held = [(state.bytes, peak * 2**20) for state, peak in zip(derivation.states, peaks, strict=True)]
    assert (found.measure.model_state, found.measure.activations) == max(held, key=sum)
    assert found.measure.memory_per_gpu == found.measure.model_state + found.measure.activations
    assert found.measure.activations > 0 and found.measure.model_state > 0
    lines = iteration_lines(spec, chosen, derivation, found.schedule)
    assert any(line.startswith("  memory of device ") and line.endswith("GiB usable") for line in lines)


@pytest.mark.parametrize(
    "chosen",
    [
        Configuration(1, 4, 1, 1, "linear", 1, 4),
        Configuration(1, 2, 2, 2, "interleaved", 1, 2),
        Configuration(2, 2, 1, 1, "linear", 1, 4, recompute="full"),
        Configuration(2, 1, 2, 1, "linear", 1, 2, recompute="selective", zero=3),
        Configuration(1, 2, 2, 2, "vshape", 1, 2, zero=1),
    ],
    ids=lambda chosen: chosen.label,
)
def test_the_breakdown_adds_up_to_the_iteration(chosen: Configuration) -> None:
    spec = tiny(cluster={**SPLIT_LINKS, "gpu_memory": "8GiB"})
    m = found_measure(spec, chosen)
    parts = m.breakdown
    assert parts.total_ms == pytest.approx(m.iteration_ms)
    assert all(value >= -1e-9 for value in vars(parts).values())
    assert parts.compute_ms > 0 and parts.optimizer_ms == m.optimizer_ms
    assert (parts.pipeline_ms > 0) == (chosen.pipeline > 1)  # p2p waits on the critical device
    assert (parts.tensor_parallel_ms > 0) == (chosen.tensor_parallel > 1)
    # With flash attention, selective recomputation has nothing left to recompute.
    assert (parts.recompute_ms > 0) == (chosen.recompute == "full")
    assert (parts.data_parallel_ms > 0) == (chosen.data_parallel > 1)
    assert parts.bubble_ms > 0 or chosen.pipeline == 1


def test_full_recomputation_shows_as_recompute_not_compute() -> None:
    spec = tiny(cluster={"gpu_memory": "8GiB"})
    plain = found_measure(spec, Configuration(1, 4, 1, 1, "linear", 1, 4)).breakdown
    full = found_measure(spec, Configuration(1, 4, 1, 1, "linear", 1, 4, recompute="full")).breakdown
    assert full.compute_ms == pytest.approx(plain.compute_ms, rel=1e-4)
    assert full.recompute_ms > 0.2 * full.compute_ms


def all_to_all_ms(derivation: Derivation, schedule: Schedule) -> float:
    """The all-to-all of the schedule's critical device's ops, every microbatch."""
    stages = derivation.instance.stages_of(critical_device(compute_metrics(schedule)))
    costs = [derivation.stages[stage].cost for stage in stages]
    return derivation.instance.num_microbatches * sum(cost.forward_a2a_ms + cost.backward_a2a_ms for cost in costs)


def test_overlapped_pairs_hide_part_of_the_all_to_all_and_the_parts_still_add_up() -> None:
    spec = tiny(model=MOE, cluster={"gpus_per_node": 1}, training={"global_batch": 16})
    chosen = Configuration(1, 2, 2, 2, "vshape", 1, 8, zero=1, expert_parallel=2)
    derivation = derive(description(spec, chosen))
    assert derivation.instance.has_communication
    paired = ensure_valid(run_heuristic("dualpipe-v", derivation.instance))
    alone = ensure_valid(run_heuristic("zb-v", derivation.instance))
    assert paired.has_pairs and not alone.has_pairs
    for schedule in (paired, alone):
        measured = measure(spec, chosen, derivation, schedule)
        parts = measured.breakdown
        assert parts.total_ms == pytest.approx(measured.iteration_ms)
        assert parts.tensor_parallel_ms == pytest.approx(0, abs=1e-9)  # t = 1: the communication is the experts'
        if schedule is alone:  # every op alone exposes all of it
            assert parts.expert_parallel_ms == pytest.approx(all_to_all_ms(derivation, schedule))
        else:  # the pairs hide part of it
            assert 0 < parts.expert_parallel_ms < all_to_all_ms(derivation, schedule)


def test_the_expert_parallel_replicas_exchange_and_step_their_experts_apart() -> None:
    spec = tiny(model=MOE, cluster={"gpus_per_node": 1})
    one, all_ = (Configuration(1, 1, 4, 1, "linear", 1, 1, zero=1, expert_parallel=ep) for ep in (1, 4))
    derivations = [derive(description(spec, chosen)) for chosen in (one, all_)]
    # EP = d: each GPU holds a quarter of the experts, whose gradients no other replica shares.
    assert derivations[1].states[0].expert_parameters == derivations[0].states[0].expert_parameters / 4
    assert exchange_ms(description(spec, all_), derivations[1]) < exchange_ms(description(spec, one), derivations[0])
    assert optimizer_ms(spec, description(spec, all_), derivations[1]) == pytest.approx(
        optimizer_ms(spec, description(spec, one), derivations[0])
    )
