from __future__ import annotations

import dataclasses
import time

import pytest

from pipesat.models import InputError, InstanceError
from pipesat.models.limits import allow_ops
from pipesat.models.plan_result import Configuration
from pipesat.solver.instances.collectives import BUS_EFFICIENCY, NETWORK_EFFICIENCY
from pipesat.solver.instances.from_model import derive
from pipesat.solver.plan.space import (
    MAX_DEFAULT_CHUNKS,
    PlanLimits,
    chunk_counts,
    description,
    divisors,
    enumerate_space,
    spans_nodes,
    tensor_degrees,
)
from pipesat.solver.plan.spec import PlanSpec, load_spec
from tests.conftest import ROOT
from tests.solver.plan.conftest import MOE, tiny

LLAMA3_405B = ROOT / "instances/plan/llama3-405b-8192gpu.yaml"


def test_the_issue_space_has_every_shape_and_nothing_else() -> None:
    spec = load_spec(ROOT / "instances/plan/gpt-1.3b-16gpu.yaml")
    configs, skipped, merged = enumerate_space(spec)
    assert configs == sorted(configs) and len(set(configs)) == len(configs)
    for config in configs:
        assert config.tensor_parallel * config.context_parallel * config.pipeline * config.data_parallel == 16
        assert config.data_parallel * config.microbatch_size * config.microbatches == 64
        assert config.microbatches >= config.pipeline
        assert config.placement == "linear" or config.pipeline > 1
        chunks = {"linear": (1,), "vshape": (2,)}.get(config.placement) or chunk_counts(spec, config.pipeline)
        assert config.chunks in chunks
        assert config.zero == (1 if config.data_parallel > 1 else 0)  # Megatron's distributed optimizer
    assert {c.pipeline for c in configs} == {1, 2, 4, 8, 16}
    # Flash attention recomputes the attention core already: selective recomputation is no recomputation.
    assert {c.recompute for c in configs} == {"none", "full"}
    # A merge, not a refusal: its configurations are tried, as none.
    assert merged == ["recompute selective: a layer costs what it does with none; tried as none"]
    assert not any(line.startswith("recompute") for line in skipped)
    # Tensor parallelism is searched by default: 1, 2, 4 and 8, a node's GPUs, with sequence parallelism.
    assert {c.tensor_parallel for c in configs} == {1, 2, 4, 8}
    t2 = next(c for c in configs if c.tensor_parallel == 2)
    assert description(spec, t2).training.sequence_parallel
    # 16 devices x 2 chunks is 32 stages for 24 layers, more than an embedding and a head can fill.
    assert "t1 p16 vshape v2: 24 layers cannot fill 32 stages" in skipped
    labels = {c.label for c in configs}
    assert {"t1 p4 d4 interleaved v6 b1 m16 zero1", "t1 p2 d8 vshape b2 m4 full-recompute zero1"} <= labels


def test_the_chunks_fill_the_layers_with_the_first_and_last_stage_a_layer_lighter() -> None:
    spec = load_spec(LLAMA3_405B)
    # Llama 3 405B: 126 layers + the embedding + the head = 128 = 16 x 8 places.
    assert chunk_counts(spec, 16) == (2, 4, 8)
    assert chunk_counts(spec, 64) == (2,)
    assert chunk_counts(spec, 128) == ()
    gpt = load_spec(ROOT / "instances/plan/gpt-1.3b-16gpu.yaml")  # 24 layers
    # On 2 devices: v in {2, 3, 4, 6, 12} fill 24, 13 fills 26; the largest few are kept.
    assert chunk_counts(gpt, 2) == (4, 6, 12, 13) and len(chunk_counts(gpt, 2)) == MAX_DEFAULT_CHUNKS
    assert chunk_counts(gpt, 8) == (3,)
    pinned = tiny(training={"chunks": [3, 5]})
    assert chunk_counts(pinned, 2) == (3, 5)


def test_the_balanced_split_gives_the_first_and_last_stage_fewer_layers_as_llama_3_did() -> None:
    spec = load_spec(LLAMA3_405B)
    for chunks, inner, edge in ((2, 4, 3), (4, 2, 1), (8, 1, 0)):
        config = Configuration(8, 16, 64, chunks, "interleaved", 1, 32, recompute="full", zero=1)
        derivation = derive(description(spec, config))
        assert derivation.split == (edge,) + (inner,) * (16 * chunks - 2) + (edge,)
        forward, backward, _ = derivation.times[0]
        assert forward > 0 and backward > 0  # the embedding's lookup and reduction are timed
    # With 8 chunks the first stage holds only the embedding, the last only the head and the loss.
    first, last = derivation.stages[0], derivation.stages[-1]
    assert first.layers == 0 and first.has_embedding and last.layers == 0 and last.has_head


def test_the_flat_model_does_not_time_the_embedding_so_it_does_not_stand_alone() -> None:
    # 8 layers on 2 x 5 stages need a stage of the embedding alone: only the shape model times it.
    spec = tiny(training={"chunks": [5], "placements": ["interleaved"], "pipeline_parallel": [2]})
    (config,) = (c for c in enumerate_space(spec).configs if c.recompute == "none")
    with pytest.raises(InstanceError, match=r"^8 layers cannot give each of the 10 stages one"):
        derive(description(spec, config))


def test_a_spec_can_pin_one_layout() -> None:
    training = {
        "tensor_parallel": [2],
        "pipeline_parallel": [2],
        "placements": ["interleaved"],
        "chunks": [2],
        "microbatch_sizes": [1],
        "recompute": ["full"],
        "zero": [2],
    }
    configs, _, _ = enumerate_space(tiny(training=training))
    assert [c.label for c in configs] == ["t2 p2 d1 interleaved v2 b1 m4 full-recompute"]  # one replica: no ZeRO
    configs, _, _ = enumerate_space(tiny(training=training, cluster={"gpus": 8}, model={"heads": 8}))
    assert [c.label for c in configs] == ["t2 p2 d2 interleaved v2 b1 m2 full-recompute zero2"]


def test_every_zero_stage_and_recomputation_asked_for_is_a_configuration() -> None:
    spec = tiny(training={"zero": [0, 1, 3], "recompute": ["none", "full"], "flash_attention": False})
    configs, _, merged = enumerate_space(spec)
    assert not merged  # without flash, all differ
    replicated = [c for c in configs if c.data_parallel > 1]
    assert {c.zero for c in replicated} == {0, 1, 3} and {c.zero for c in configs if c.data_parallel == 1} == {0}
    spec = tiny(training={"recompute": ["none", "selective", "full"], "flash_attention": False})
    assert {c.recompute for c in enumerate_space(spec).configs} == {"none", "selective", "full"}


def test_full_recomputation_is_tried_for_each_count_of_layers_asked_for() -> None:
    spec = tiny(training={"recompute": ["none", "full"], "recompute_layers": [0, 1]})
    configs = enumerate_space(spec).configs
    assert {(c.recompute, c.recompute_layers) for c in configs} == {("none", 0), ("full", 0), ("full", 1)}
    partial = next(c for c in configs if c.recompute_layers == 1 and c.pipeline == 2 and c.placement == "linear")
    assert partial.label == "t1 p2 d2 linear b1 m2 1-layer-recompute zero1"
    assert partial.recompute_name == "full, 1 a stage"
    # The stage's first layer recomputed, the rest kept: less memory than none, more than all.
    costs = {}
    for layers in (0, 1):
        for recompute in ("none", "full"):
            config = dataclasses.replace(
                partial, recompute=recompute, recompute_layers=layers if recompute == "full" else 0
            )
            costs[(recompute, config.recompute_layers)] = derive(description(spec, config)).stages[1].cost
    assert (
        costs[("none", 0)].activation_bytes > costs[("full", 1)].activation_bytes > costs[("full", 0)].activation_bytes
    )


def test_pipeline_depths_and_context_parallel_degrees_must_divide() -> None:
    configs, skipped, _ = enumerate_space(tiny(training={"pipeline_parallel": [2, 3]}))
    assert {c.pipeline for c in configs} == {2}
    assert "t1 p3: does not divide the 4 groups of 1 GPUs" in skipped
    configs, skipped, _ = enumerate_space(tiny(training={"context_parallel": [1, 2, 3]}))
    assert {c.context_parallel for c in configs} == {1, 2}
    assert "t1 cp3: does not divide 4 GPUs" in skipped
    for config in configs:
        assert config.context_parallel * config.pipeline * config.data_parallel == 4
        described = description(tiny(training={"context_parallel": [1, 2]}), config)
        assert described.training.context_parallel == config.context_parallel
        assert described.training.data_parallel == config.data_parallel
    assert "t1 cp2 p2 d1 linear b1 m4" in {c.label for c in configs}


def test_tensor_parallel_degrees_must_divide_and_stay_in_a_node() -> None:
    spec = tiny(training={"tensor_parallel": [1, 2, 3]}, cluster={"gpus_per_node": 4})
    configs, skipped, _ = enumerate_space(spec)
    assert {c.tensor_parallel for c in configs} == {1, 2}
    assert any(line.startswith("t3: does not divide") for line in skipped)
    spec = tiny(training={"tensor_parallel": [1, 4]}, cluster={"gpus_per_node": 2})
    _, skipped, _ = enumerate_space(spec)
    assert any("within a node of 2 GPUs" in line for line in skipped)


def test_the_default_tensor_parallel_degrees_are_powers_of_two_within_a_node_dividing_the_gpus() -> None:
    def unlisted(**cluster: int) -> PlanSpec:
        return dataclasses.replace(tiny(cluster=cluster), tensor_parallel=None)  # the spec gives no list

    assert tensor_degrees(unlisted(gpus=12)) == (1, 2, 4)
    assert tensor_degrees(unlisted(gpus=64, gpus_per_node=4)) == (1, 2, 4)
    assert tensor_degrees(tiny(training={"tensor_parallel": [1, 3]})) == (1, 3)  # given: as given
    plain = tiny(training={"tensor_parallel": [2], "sequence_parallel": False})
    (config, *_) = enumerate_space(plain).configs
    assert not description(plain, config).training.sequence_parallel


def test_a_microbatch_size_that_divides_no_share_of_the_batch_says_so() -> None:
    # Global batch 4 on 4 GPUs: a replica's share is 4, 2 or 1 sequences; 3 divides none.
    with pytest.raises(
        InstanceError,
        match=r"training.microbatch_sizes: 3 divides none of a replica's shares of the global batch 4 \(1, 2, 4 sequences\); give a divisor of one, such as 1, 2, 4$",
    ):
        enumerate_space(tiny(training={"microbatch_sizes": [3]}))
    configs, skipped, _ = enumerate_space(tiny(training={"microbatch_sizes": [1, 3]}))
    assert {c.microbatch_size for c in configs} == {1}
    assert any(line.startswith("training.microbatch_sizes: 3 divides none") for line in skipped)
    # 4 divides the share of one replica, but leaves m = 1 for its 4 devices.
    with pytest.raises(InstanceError, match="4 leaves fewer microbatches than pipeline devices in every layout"):
        enumerate_space(tiny(training={"microbatch_sizes": [4], "pipeline_parallel": [4]}))


def test_microbatch_sizes_and_placements_can_be_narrowed() -> None:
    spec = tiny(training={"global_batch": 8, "microbatch_sizes": [2], "placements": ["linear"]})
    configs, _, _ = enumerate_space(spec)
    assert configs and all(c.microbatch_size == 2 and c.placement == "linear" for c in configs)


def test_links_follow_the_rank_order() -> None:
    assert not spans_nodes(1, 16, 8)
    assert not spans_nodes(8, 1, 8)
    assert spans_nodes(2, 8, 8)
    assert spans_nodes(16, 1, 8)
    assert divisors(12) == [1, 2, 3, 4, 6, 12]


def test_descriptions_use_the_node_link_within_a_node_and_derive() -> None:
    spec = tiny(cluster={"node_bandwidth": 300, "gpus_per_node": 2})
    configs, _, _ = enumerate_space(spec)
    by_label = {c.label: c for c in configs}
    within = description(spec, by_label["t1 p2 d2 linear b1 m2 zero1"])  # pipeline ranks 2 apart: across nodes
    assert within.hardware.bandwidth == 10
    spec = tiny(cluster={"node_bandwidth": 300, "gpus_per_node": 8})
    inside = description(spec, by_label["t1 p4 d1 linear b1 m4"])
    assert inside.hardware.bandwidth == 300
    derivation = derive(inside)
    assert derivation.instance.num_devices == 4 and derivation.instance.memory_limit is not None
    # Context parallelism sits between tensor and data parallelism: the pipeline's ranks are t·cp·d apart.
    spec = tiny(cluster={"node_bandwidth": 300, "gpus_per_node": 2}, training={"context_parallel": [2]})
    (config,) = (c for c in enumerate_space(spec).configs if c.label == "t1 cp2 p2 d1 linear b1 m4")
    assert description(spec, config).hardware.bandwidth == 10


def test_divisors_come_from_the_prime_factors() -> None:
    assert [divisors(n) for n in (1, 2, 12, 49)] == [[1], [1, 2], [1, 2, 3, 4, 6, 12], [1, 7, 49]]
    assert all(divisors(n) == [k for k in range(1, n + 1) if n % k == 0] for n in range(1, 500))
    start = time.monotonic()
    assert divisors(2**40 - 87) == [1, 2**40 - 87]  # a prime: the most trial divisions a plan's cap allows
    assert len(divisors(2**20 * 3**10)) == 21 * 11
    assert time.monotonic() - start < 5


def test_the_space_is_checked_before_any_work() -> None:
    spec = tiny(cluster={"gpus": 1024}, training={"global_batch": 4096, "recompute": ["none"]})
    configs, _, _ = enumerate_space(spec)
    assert len(configs) == 30
    largest = r"^the largest pipeline, t1 p8 d128 linear b1 m32 zero1: 768 ops \(8 devices x 1 chunks x 32 microbatches"
    with pytest.raises(InstanceError, match=largest), allow_ops(700):
        enumerate_space(spec)
    limits = PlanLimits(max_configurations=len(configs))
    assert enumerate_space(spec, limits).configs == configs  # the cap itself is allowed
    with pytest.raises(InputError, match="more than 29 configurations; narrow the training section's lists"):
        enumerate_space(spec, PlanLimits(max_configurations=29))


def test_expert_parallel_degrees_divide_the_experts_and_the_replicas() -> None:
    spec = tiny(model=MOE, training={"pipeline_parallel": [1, 2], "placements": ["linear"], "recompute": ["none"]})
    space = enumerate_space(spec)
    # d4 (p1) tries EP 1, 2 and 4; d2 (p2) EP 1 and 2: every divisor of the experts and d.
    assert {(c.data_parallel, c.expert_parallel) for c in space.configs} == {(4, 1), (4, 2), (4, 4), (2, 1), (2, 2)}
    assert "t1 p1 d4 ep4 linear b1 m1 zero1" in {c.label for c in space.configs}
    listed = tiny(model=MOE, training={"expert_parallel": [3, 4], "placements": ["linear"], "zero": [1, 3]})
    space = enumerate_space(listed)
    assert {(c.data_parallel, c.expert_parallel, c.zero) for c in space.configs} == {(4, 4, 1)}
    assert "ep3: does not divide the 4 experts" in space.skipped
    assert "d2 ep4: expert parallelism takes its GPUs out of the 2 data-parallel replicas" in space.skipped
    assert "zero 3: ZeRO 3 with experts is not modelled; left out" in space.skipped
    assert {c.expert_parallel for c in enumerate_space(tiny()).configs} == {1}  # a dense model: EP 1


def test_the_all_to_all_runs_over_the_node_link_within_a_node_and_the_network_across() -> None:
    links = {"bandwidth": 10, "node_bandwidth": 100, "node_latency": 2}
    config = Configuration(1, 1, 4, 1, "linear", 1, 1, zero=1, expert_parallel=4)
    inside = description(tiny(model=MOE, cluster={**links, "gpus_per_node": 4}), config)
    across = description(tiny(model=MOE, cluster={**links, "gpus_per_node": 2}), config)
    assert (inside.hardware.ep_bandwidth, inside.hardware.ep_latency) == (100, 2)
    # Across 2 nodes of 2: each GPU's own share of the network (an all-to-all aggregates no NICs), in
    # NVLink's terms; NVLink's latency for the 2 steps within a node, the network's for the 2 across.
    network = 10 * NETWORK_EFFICIENCY / BUS_EFFICIENCY
    assert (across.hardware.ep_bandwidth, across.hardware.ep_latency) == pytest.approx((network, (2 * 2 + 2 * 10) / 4))
    a2a = [derive(described).instance.forward_comm_times for described in (inside, across)]
    assert a2a[0] is not None and a2a[1] is not None and 0 < a2a[0][0] < a2a[1][0]


def test_a_bidirectional_pipeline_takes_an_even_m_and_says_why_an_odd_one_is_left_out() -> None:
    spec = tiny(training={"global_batch": 12, "pipeline_parallel": [2], "placements": ["bidirectional"]})
    configs, skipped, _ = enumerate_space(spec)
    assert configs and all(
        c.placement == "bidirectional" and c.chunks == 2 and c.microbatches % 2 == 0 for c in configs
    )
    assert "t1 p2 bidirectional b2: m 3 is odd; half the microbatches go each way" in skipped


def test_tensor_parallelism_over_nodes_is_predicted_when_it_is_the_specs_only_t() -> None:
    # The search's policy keeps t within a node when the spec gives one that is; alone, t4 over
    # nodes of 2 is a configuration, its collectives timed over the network.
    alone = enumerate_space(tiny(training={"tensor_parallel": [4]}, cluster={"gpus_per_node": 2}))
    assert {config.tensor_parallel for config in alone.configs} == {4}
    searched = enumerate_space(tiny(training={"tensor_parallel": [1, 4]}, cluster={"gpus_per_node": 2}))
    assert {config.tensor_parallel for config in searched.configs} == {1}
    assert "t4: tensor parallelism stays within a node of 2 GPUs" in searched.skipped
