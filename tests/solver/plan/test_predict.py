"""One configuration predicted as it runs: the grammar read back from the plan's labels, the checks
against the cluster, the framework's schedule, and layouts the search leaves out by policy."""

from __future__ import annotations

import pytest

from pipesat.models import InputError
from pipesat.models.plan_result import MEMORY_ERROR, Configuration, MemoryFit
from pipesat.solver.evaluate.validator import validate
from pipesat.solver.plan.predict import parse_configuration, predict
from pipesat.solver.plan.space import enumerate_space
from tests.solver.plan.conftest import tiny


def test_every_label_of_a_plan_reads_back_as_its_configuration() -> None:
    spec = tiny(training={"recompute": ["none", "full"], "recompute_layers": [0, 2], "zero": [0, 1]})
    configs = enumerate_space(spec).configs
    assert len(configs) > 10
    for config in configs:
        assert parse_configuration(config.label) == (config, None)


def test_the_words_in_any_order_with_a_schedule_and_the_short_recomputations() -> None:
    config, schedule = parse_configuration("zb-h1 full m4 b1 d1 p4 t1")
    assert config == Configuration(1, 4, 1, 1, "linear", 1, 4, recompute="full") and schedule == "zb-h1"
    config, schedule = parse_configuration("t4 p2 d8 interleaved v2 b1 m16 full zero1 interleaved")
    assert (config.placement, config.chunks, config.zero, schedule) == ("interleaved", 2, 1, "interleaved")
    assert parse_configuration("t1 p2 d2 v3 b1 m2")[0].placement == "interleaved"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("t1 p4 d1 b1 m4 fast", "'fast' is not a word of a configuration"),
        ("t1 p4 d1 b1 m4 t2", "'t2' is not a word of a configuration"),
        ("t1 p4 b1 m4", "gives no d;"),
    ],
)
def test_a_text_that_is_not_a_configuration_is_refused_in_one_line(text: str, message: str) -> None:
    with pytest.raises(InputError, match=message):
        parse_configuration(text)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("t1 p2 d1 b1 m4", "t1 p2 d1 linear b1 m4: t·cp·p·d = 2 GPUs, the cluster has 4 (cluster.gpus)"),
        (
            "t1 p2 d2 b1 m4",
            "b·m·d = 8 sequences an iteration, the global batch is 4 (training.global_batch): with d2 b1, m = 2",
        ),
        ("t1 p4 d1 b1 m4 interleaved1f1b", "Interleaved 1F1B: needs chunks >= 2 with interleaved placement"),
    ],
)
def test_a_configuration_that_does_not_fit_is_refused_in_one_line(text: str, message: str) -> None:
    with pytest.raises(InputError) as raised:
        predict(tiny(), *parse_configuration(text))
    assert message in str(raised.value) and "\n" not in str(raised.value)


def test_the_framework_schedule_runs_when_none_is_named() -> None:
    spec = tiny()
    linear = predict(spec, *parse_configuration("t1 p4 d1 b1 m4"))
    interleaved = predict(spec, *parse_configuration("t1 p2 d2 interleaved v2 b1 m2"))
    assert (linear.made_by, interleaved.made_by) == ("1f1b", "interleaved")
    assert validate(linear.schedule) == [] and validate(interleaved.schedule) == []
    assert linear.measure.breakdown.total_ms == pytest.approx(linear.measure.iteration_ms)
    assert linear.refusal == linear.over_budget == linear.outside_search == ""
    zb = predict(spec, *parse_configuration("t1 p4 d1 b1 m4 zb-h1"))
    assert zb.made_by == "zb-h1" and zb.measure.iteration_ms < linear.measure.iteration_ms


def test_tensor_parallelism_over_nodes_is_predicted_when_asked_for() -> None:
    spec = tiny(cluster={"gpus_per_node": 2})
    assert any(
        "tensor parallelism stays within a node" in line
        for line in enumerate_space(tiny(cluster={"gpus_per_node": 2}, training={"tensor_parallel": [1, 4]})).skipped
    )
    found = predict(spec, *parse_configuration("t4 p1 d1 b1 m4"))
    assert found.outside_search == "t4: tensor parallelism stays within a node of 2 GPUs"
    assert validate(found.schedule) == [] and found.measure.breakdown.tensor_parallel_ms > 0


@pytest.mark.parametrize(
    ("memory", "refusal"), [("0.25GiB", "device 0 needs at least"), ("0.05GiB", "model state does not fit: ")]
)
def test_a_configuration_the_plan_refuses_by_memory_is_predicted_with_the_reason(memory: str, refusal: str) -> None:
    found = predict(tiny(cluster={"gpu_memory": memory}), *parse_configuration("t1 p1 d4 b1 m1 zero1"))
    assert found.refusal.startswith(refusal) and found.measure.iteration_ms > 0
    assert found.refusal.endswith(f"beyond the memory estimate's {MEMORY_ERROR:.0%} error too")
    assert found.memory_fit is MemoryFit.REFUSED
    assert validate(found.schedule) == []


def test_a_configuration_over_its_budget_within_the_error_is_predicted_tight_not_refused() -> None:
    found = predict(tiny(cluster={"gpu_memory": "0.3GiB"}), *parse_configuration("t1 p1 d4 b1 m1 zero1"))
    assert found.memory_fit is MemoryFit.TIGHT and found.refusal == ""
    assert found.usable_memory < found.measure.memory_per_gpu <= found.usable_memory / (1 - MEMORY_ERROR)
    assert found.over_budget.startswith("device 0 peaks at")  # its activations, against the plain budget
    assert validate(found.schedule) == []
