"""A runtime holds a plan's schedules, placements and knobs to what it runs, and sets its defaults."""

from __future__ import annotations

import pytest

from pipesat.models import InputError
from pipesat.models.names import SPLIT_OUT
from pipesat.models.plan_result import Configuration
from pipesat.solver.plan.runtimes import RUNTIMES
from pipesat.solver.plan.schedules import SCHEDULE_NAMES, placements_of
from tests.solver.plan.conftest import tiny


def test_megatron_runs_its_two_pipelines_with_its_optimizer_and_fp32_main_grads() -> None:
    spec = tiny(training={"runtime": "megatron"})
    assert spec.schedules == ("1f1b", "interleaved")
    assert spec.placements == ("linear", "interleaved") and spec.zero == (1,)
    assert spec.training.grad_bytes == 4.0
    assert tiny(training={"runtime": "megatron", "zero": [0]}).zero == (0,)  # the spec's own, within Megatron's


def test_torchtitan_defaults_to_fsdp_and_the_fork_to_plain_replicas() -> None:
    assert tiny(training={"runtime": "torchtitan"}).zero == (3,)
    assert tiny(training={"runtime": "megatron-zb"}).zero == (0,)
    assert "vshape" in tiny(training={"runtime": "megatron-zb"}).placements


def test_any_and_torch_keep_the_plan_as_it_is() -> None:
    plain, torch = tiny(), tiny(training={"runtime": "torch"})
    assert plain.schedules is None and torch.schedules == SCHEDULE_NAMES
    assert plain.placements == torch.placements and plain.zero == torch.zero


@pytest.mark.parametrize(
    ("training", "words"),
    [
        ({"runtime": "megatron", "schedules": ["1f1b", "zb-h1"]}, "training.schedules zb-h1 is not run by megatron"),
        ({"runtime": "megatron", "zero": [1, 3]}, "training.zero 3 is not run by megatron"),
        ({"runtime": "megatron", "placements": ["vshape"]}, "training.placements vshape is not run by megatron"),
        ({"runtime": "torchtitan", "recompute_layers": [2]}, "torchtitan recomputes every layer of a stage or none"),
        ({"runtime": "megatorn"}, "did you mean 'megatron'?"),
        ({"runtime": "torch", "offload": ["none", "full"]}, "training.offload full is not run by torch"),
    ],
)
def test_what_a_runtime_cannot_run_is_one_line(training: dict[str, object], words: str) -> None:
    with pytest.raises(InputError, match=words):
        tiny(training=training)


def test_each_runtime_names_only_schedules_and_placements_pipesat_has() -> None:
    for runtime in RUNTIMES.values():
        assert set(runtime.schedules) <= set(SCHEDULE_NAMES)
        ran = {placement for name in runtime.schedules for placement in placements_of(name)}
        assert set(runtime.placements) <= ran, runtime.name


def test_a_fused_schedule_with_w_split_out_runs_only_as_a_csv() -> None:
    split_1f1b = f"1F1B{SPLIT_OUT}"
    assert RUNTIMES["torch"].runs_schedule(split_1f1b) and RUNTIMES["torch"].runs_schedule("cp-sat from zb-h1")
    for name in ("megatron", "megatron-zb", "torchtitan"):
        assert not RUNTIMES[name].runs_schedule(split_1f1b) and not RUNTIMES[name].runs_schedule("cp-sat")
    assert RUNTIMES["megatron-zb"].runs_schedule("zb-h1") and not RUNTIMES["megatron"].runs_schedule("zb-h1")
    zero3 = Configuration(1, 2, 2, 1, "linear", 1, 4, zero=3)
    assert RUNTIMES["torchtitan"].runs(zero3, "1f1b") and not RUNTIMES["megatron"].runs(zero3, "1f1b")


def test_only_the_megatrons_run_a_configuration_that_offloads() -> None:
    offloaded = Configuration(1, 2, 2, 1, "linear", 1, 4, zero=1, offload="full")
    assert [name for name, runtime in RUNTIMES.items() if runtime.runs(offloaded)] == ["megatron", "megatron-zb"]
    resident = Configuration(1, 2, 2, 1, "linear", 1, 4, zero=1)
    assert all(runtime.runs(resident) for runtime in RUNTIMES.values() if 1 in runtime.zero)
