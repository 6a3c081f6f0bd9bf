"""Activation offload as a dimension of the plan (`training.offload`, `solver.plan.offload`)."""

from __future__ import annotations

import pytest

from pipesat.models import InputError
from pipesat.models.plan_result import Outcome
from pipesat.models.tolerance import fits
from pipesat.solver.evaluate.metrics import link_busy
from pipesat.solver.instances.cost_model import instance_bandwidth
from pipesat.solver.plan.executors import LocalExecutor
from pipesat.solver.plan.measure import iteration_lines
from pipesat.solver.plan.predict import parse_configuration, predict
from pipesat.solver.plan.search import PlanOptions, plan
from pipesat.solver.plan.space import enumerate_space
from pipesat.solver.plan.spec import PlanSpec
from pipesat.solver.plan.tasks import AssessTask, _fitted, assess
from tests.solver.plan.conftest import tiny
from tests.strategies import assert_valid

ONE_LAYOUT = {
    "tensor_parallel": [1],
    "pipeline_parallel": [4],
    "placements": ["vshape"],
    "microbatch_sizes": [1],
    "recompute": ["none"],
}
"""The tiny spec pinned to one layout, V on 4 devices (a device holds two stages)."""


def needs_offload(offload: list[str]) -> PlanSpec:
    """The tiny model at sequence 4096 on 240 MiB GPUs: one microbatch's two stages on a device need
    140 MiB of activations, its budget is 90, and offloaded it needs 76 (one stage's and what the
    link leaves of the other)."""
    return tiny(
        model={"seq_len": 4096},
        cluster={"gpu_memory": "240MiB", "host_link_bandwidth": 2000},
        training={**ONE_LAYOUT, "offload": offload},
    )


def test_the_host_link_is_the_gpus_and_in_the_instances_units() -> None:
    assert tiny(cluster={"gpu": "A100-40GB"}).cluster.host_link_bandwidth == 32.0
    assert tiny(cluster={"gpu": "H100-SXM"}).cluster.host_link_bandwidth == 64.0
    assert tiny().cluster.host_link_bandwidth is None  # no gpu, none given: no link
    assert instance_bandwidth(1) == pytest.approx(1e9 / 2**20 / 1e3)  # GB/s in MiB a ms
    spec = needs_offload(["full"])
    (config,) = enumerate_space(spec).configs
    fitted = _fitted(spec, config, None)
    assert fitted.derivation is not None
    assert fitted.derivation.instance.host_link_bandwidth == pytest.approx(instance_bandwidth(2000))


def test_a_layout_that_fits_only_with_offload_is_refused_without_it() -> None:
    spec = needs_offload(["none"])
    (config,) = enumerate_space(spec).configs
    assessed = assess(AssessTask(spec=spec, config=config))
    assert (
        assessed.found is None and "140.062 MiB of activations (one microbatch through its stages)" in assessed.refused
    )


def test_a_layout_that_fits_only_with_offload_is_ranked_with_offload_and_validated() -> None:
    spec = needs_offload(["none", "full"])
    configs = enumerate_space(spec).configs
    assert sorted(config.offload for config in configs) == ["full", "none"]
    result = plan(spec, LocalExecutor(2), PlanOptions(time_budget=10, seed=0))
    by_offload = {item.config.offload: item for item in result.results}
    assert by_offload["none"].outcome == Outcome.REFUSED
    best = by_offload["full"]
    assert best.outcome == Outcome.SOLVED and best.measure is not None
    assert result.best is not None and result.best.config.offload == "full"
    assert best.config.label == "t1 p4 d1 vshape b1 m4 full-offload"
    schedule = result.best_schedule
    assert schedule is not None and schedule.transfers, "the best schedule offloads"
    assert_valid(schedule)
    parts = best.measure.breakdown
    assert fits(parts.total_ms, best.measure.iteration_ms) and fits(best.measure.iteration_ms, parts.total_ms)
    assert parts.host_link_ms >= 0


def test_the_handwritten_offload_schedule_is_pipeoffloads_and_the_breakdown_shows_its_link() -> None:
    """At 440 MiB PipeOffload full (V) fits (its peak, 256 MiB on the last device, is V-Half's 385 less
    what its offloads move); at 240 only the one-at-a-time order with everything offloaded does."""
    spec = tiny(
        model={"seq_len": 4096},
        cluster={"gpu_memory": "440MiB", "host_link_bandwidth": 2000},
        training={**ONE_LAYOUT, "offload": ["full"]},
    )
    (config,) = enumerate_space(spec).configs
    assessed = assess(AssessTask(spec=spec, config=config))
    assert assessed.found is not None and assessed.found.made_by == "pipeoffload-full-v"
    schedule = assert_valid(assessed.found.schedule)
    assert schedule.transfers and all(busy > 0 for busy in link_busy(schedule))
    fitted = _fitted(spec, config, None)
    assert fitted.derivation is not None
    text = "\n".join(iteration_lines(spec, config, fitted.derivation, schedule))
    assert "offloaded and reloaded; host links busy" in text and "host link" in text


def test_offload_on_a_placement_pipeoffload_does_not_run_is_left_out_with_a_line() -> None:
    spec = tiny(
        training={"tensor_parallel": [1], "pipeline_parallel": [2], "offload": ["none", "full"]},
        cluster={"host_link_bandwidth": 32},
    )
    space = enumerate_space(spec)
    assert {config.placement for config in space.configs if config.offload == "full"} == {"linear", "vshape"}
    assert any(
        "interleaved offload full: PipeOffload's schedules run linear and vshape only" in line for line in space.skipped
    )


@pytest.mark.parametrize(
    ("sections", "message"),
    [
        (
            {"training": {"offload": ["most"]}},
            r"training\.offload must be a list of offload settings out of none, selective, full",
        ),
        (
            {"training": {"offload": ["full"]}},
            r"training\.offload full needs a host link; give cluster\.host_link_bandwidth",
        ),
        ({"cluster": {"host_link_bandwidth": -1}}, r"cluster\.host_link_bandwidth must be a positive number"),
    ],
)
def test_bad_offload_keys_are_one_line(sections: dict, message: str) -> None:
    with pytest.raises(InputError, match=message) as error:
        tiny(**sections)
    assert "\n" not in str(error.value)


def test_a_configuration_that_offloads_is_predicted_with_pipeoffloads_schedule_over_the_link() -> None:
    spec = needs_offload(["none", "full"])
    config, schedule = parse_configuration("t1 p4 d1 vshape b1 m4 full-offload")
    assert config.offload == "full" and schedule is None and parse_configuration(config.label) == (config, None)
    found = predict(spec, config)
    assert found.made_by == "pipeoffload-full-v" and found.schedule.transfers
    assert found.derivation.instance.host_link_bandwidth == pytest.approx(2000e9 / 2**20 / 1e3)
    assert_valid(found.schedule)
    with pytest.raises(InputError, match="PipeOffload's schedules run linear and vshape pipelines only"):
        predict(spec, parse_configuration("t1 p2 d2 interleaved v2 b1 m2 full-offload")[0])
    with pytest.raises(InputError, match=r"needs a host link; give cluster\.host_link_bandwidth"):
        predict(tiny(), parse_configuration("t1 p4 d1 vshape b1 m4 full-offload")[0])
