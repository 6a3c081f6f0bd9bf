"""Megatron's activation-offload options, written where the chosen configuration's schedule offloads."""

from __future__ import annotations

import shlex

import pytest

from pipesat.solver.launch import WRITERS, LaunchInput
from pipesat.solver.launch.offload_flags import DENSE_MODULES, offloaded_share
from pipesat.solver.plan.space import enumerate_space
from pipesat.solver.plan.tasks import AssessTask, assess
from tests.solver.launch.test_megatron import BRIDGE_KEYS, FLAGS
from tests.solver.plan.conftest import tiny
from tests.solver.plan.test_offload import ONE_LAYOUT
from tests.strategies import assert_valid


def chosen(offload: str) -> LaunchInput:
    """The tiny V layout at sequence 4096 on 440 MiB GPUs, offloading `offload`, with its assessed schedule
    (PipeOffload full (V) with offload: tests/solver/plan/test_offload.py)."""
    spec = tiny(
        model={"seq_len": 4096},
        cluster={"gpu_memory": "440MiB", "host_link_bandwidth": 2000},
        training={**ONE_LAYOUT, "offload": [offload]},
    )
    (config,) = enumerate_space(spec).configs
    found = assess(AssessTask(spec=spec, config=config)).found
    assert found is not None
    schedule = assert_valid(found.schedule)
    return LaunchInput(spec=spec, config=config, schedule=schedule, schedule_name=found.made_by, launch_name="run.sh")


def arguments(script: str) -> list[str]:
    """The MEGATRON_ARGS of a launch script, as the shell splits them."""
    return shlex.split(script.split("MEGATRON_ARGS=(\n", 1)[1].split("\n)\n", 1)[0])


def after(words: list[str], flag: str) -> list[str]:
    """The values the shell passes after `flag`, up to the next flag."""
    start = words.index(flag) + 1
    end = next((index for index in range(start, len(words)) if words[index].startswith("--")), len(words))
    return words[start:end]


def test_mainline_megatron_gets_fine_grained_offloading_of_every_module_at_the_schedules_share() -> None:
    launch = chosen("full")
    share = offloaded_share(launch)
    assert 0 < share <= 1
    files = WRITERS["megatron"](launch)
    words = arguments(files["run.sh"])
    flags = {word for word in words if word.startswith("--")}
    assert flags <= FLAGS["megatron"], sorted(flags - FLAGS["megatron"])
    assert "--fine-grained-activation-offloading" in flags
    assert after(words, "--offload-modules") == list(DENSE_MODULES)
    assert after(words, "--activation-offload-fraction") == [f"{share:.4g}"]
    bridge = files["run-bridge.txt"].splitlines()
    keys = {line.split("=", 1)[0] for line in bridge if not line.startswith("#")}
    assert keys <= BRIDGE_KEYS, sorted(keys - BRIDGE_KEYS)
    assert "model.fine_grained_activation_offloading=true" in bridge
    assert f"model.offload_modules=[{','.join(DENSE_MODULES)}]" in bridge


def test_the_fork_gets_pipeoffloads_options_and_says_it_runs_its_own_order() -> None:
    launch = chosen("full")
    script = WRITERS["megatron-zb"](launch)["run.sh"]
    words = arguments(script)
    flags = {word for word in words if word.startswith("--")}
    assert flags <= FLAGS["megatron-zb"], sorted(flags - FLAGS["megatron-zb"])
    assert {"--enable-zb-runtime", "--cpu-offload"} <= flags
    assert after(words, "--offload-chunk-num") == ["2"]  # full: both chunks of a V device
    assert float(after(words, "--offload-time")[0]) > 0
    assert "# note: the fork's PipeOffload runs its own offload order" in script


@pytest.mark.parametrize("runtime", ["megatron", "megatron-zb"])
def test_a_schedule_that_does_not_offload_gets_no_offload_option(runtime: str) -> None:
    launch = chosen("none")
    assert offloaded_share(launch) == 0
    script = WRITERS[runtime](launch)["run.sh"]
    assert "offload" not in script
