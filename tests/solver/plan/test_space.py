from __future__ import annotations

import time

import pytest

from pipesat.models import InstanceError
from pipesat.models.limits import allow_ops
from pipesat.solver.instances.from_model import derive
from pipesat.solver.plan.space import PlanLimits, description, divisors, enumerate_space, spans_nodes
from pipesat.solver.plan.spec import load_spec
from tests.conftest import ROOT
from tests.solver.plan.conftest import tiny


def test_the_issue_space_has_every_shape_and_nothing_else() -> None:
    spec = load_spec(ROOT / "instances/plan/gpt-1.3b-16gpu.yaml")
    configs, skipped = enumerate_space(spec)
    assert len(configs) == 33
    assert configs == sorted(configs)
    for config in configs:
        assert config.tensor_parallel * config.pipeline * config.data_parallel == 16
        assert config.data_parallel * config.microbatch_size * config.microbatches == 64
        assert config.microbatches >= config.pipeline
        assert config.chunks == (1 if config.placement == "linear" else 2)
        assert config.placement == "linear" or config.pipeline > 1
    assert {c.pipeline for c in configs} == {1, 2, 4, 8, 16}
    # 16 devices x 2 chunks is 32 stages for 24 layers: refused, and said so.
    assert any("24 layers cannot fill 32 stages" in line for line in skipped)


def test_tensor_parallel_degrees_must_divide_and_stay_in_a_node() -> None:
    spec = tiny(training={"tensor_parallel": [1, 2, 3]}, cluster={"gpus_per_node": 4})
    configs, skipped = enumerate_space(spec)
    assert {c.tensor_parallel for c in configs} == {1, 2}
    assert any(line.startswith("t3: does not divide") for line in skipped)
    spec = tiny(training={"tensor_parallel": [1, 4]}, cluster={"gpus_per_node": 2})
    _, skipped = enumerate_space(spec)
    assert any("within a node of 2 GPUs" in line for line in skipped)


def test_microbatch_sizes_and_placements_can_be_narrowed() -> None:
    spec = tiny(training={"global_batch": 8, "microbatch_sizes": [2], "placements": ["linear"]})
    configs, _ = enumerate_space(spec)
    assert configs and all(c.microbatch_size == 2 and c.placement == "linear" for c in configs)


def test_links_follow_the_rank_order() -> None:
    assert not spans_nodes(1, 16, 8)
    assert not spans_nodes(8, 1, 8)
    assert spans_nodes(2, 8, 8)
    assert spans_nodes(16, 1, 8)
    assert divisors(12) == [1, 2, 3, 4, 6, 12]


def test_descriptions_use_the_node_link_within_a_node_and_derive() -> None:
    spec = tiny(cluster={"node_bandwidth": 300, "gpus_per_node": 2})
    configs, _ = enumerate_space(spec)
    by_label = {c.label: c for c in configs}
    within = description(spec, by_label["t1 p2 d2 linear b1 m2"])  # pipeline ranks 2 apart: across nodes
    assert within.hardware.bandwidth == 10
    spec = tiny(cluster={"node_bandwidth": 300, "gpus_per_node": 8})
    inside = description(spec, by_label["t1 p4 d1 linear b1 m4"])
    assert inside.hardware.bandwidth == 300
    derivation = derive(inside)
    assert derivation.instance.num_devices == 4 and derivation.instance.memory_limit is not None


def test_divisors_come_from_the_prime_factors() -> None:
    assert [divisors(n) for n in (1, 2, 12, 49)] == [[1], [1, 2], [1, 2, 3, 4, 6, 12], [1, 7, 49]]
    assert all(divisors(n) == [k for k in range(1, n + 1) if n % k == 0] for n in range(1, 500))
    start = time.monotonic()
    assert divisors(2**40 - 87) == [1, 2**40 - 87]  # a prime: the most trial divisions a plan's cap allows
    assert len(divisors(2**20 * 3**10)) == 21 * 11
    assert time.monotonic() - start < 5


def test_the_space_is_checked_before_any_work() -> None:
    spec = tiny(cluster={"gpus": 1024}, training={"global_batch": 4096})
    configs, _ = enumerate_space(spec)
    assert len(configs) == 24
    largest = r"^the largest pipeline, t1 p8 d128 linear b1 m32: 768 ops \(8 devices x 1 chunks x 32 microbatches"
    with pytest.raises(InstanceError, match=largest), allow_ops(700):
        enumerate_space(spec)
    limits = PlanLimits(max_configurations=len(configs))
    assert enumerate_space(spec, limits).configs == configs  # the cap itself is allowed
