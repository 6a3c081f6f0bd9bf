"""The Megatron launch files: every flag is one Megatron-LM's (or the fork's) parser takes, every
override a Megatron-Bridge key, and they say the configuration the plan chose."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from pipesat.models import InputError
from pipesat.models.plan_result import Configuration
from pipesat.solver.evaluate.validator import validate
from pipesat.solver.launch import WRITERS, LaunchInput
from pipesat.solver.launch.megatron import layer_split
from pipesat.solver.plan.predict import predict
from pipesat.solver.plan.spec import PlanSpec
from tests.conftest import ROOT
from tests.solver.plan.conftest import MOE, tiny


def listed(name: str) -> set[str]:
    """The flags or keys of a list in docs/runtimes/ (its comment lines apart)."""
    lines = Path(ROOT, "docs", "runtimes", name).read_text().splitlines()
    return {line.strip() for line in lines if line.strip() and not line.startswith("#")}


FLAGS = {"megatron": listed("megatron-flags.txt"), "megatron-zb": listed("megatron-zb-flags.txt")}
BRIDGE_KEYS = listed("bridge-keys.txt")


def spec_of(**sections: dict[str, object]) -> PlanSpec:
    """The tiny spec (4 GPUs) with a global batch of 16 and `sections`' keys."""
    return tiny(**{**sections, "training": {"global_batch": 16, **sections.get("training", {})}})


def launch(spec: PlanSpec, config: Configuration, schedule: str, runtime: str) -> dict[str, str]:
    prediction = predict(spec, config, schedule)
    assert validate(prediction.schedule) == []
    launch_input = LaunchInput(
        spec=spec, config=config, schedule=prediction.schedule, schedule_name=prediction.made_by, launch_name="run.sh"
    )
    files = WRITERS[runtime](launch_input)
    assert next(iter(files)) == "run.sh"
    return files


def script_flags(script: str) -> dict[str, str | None]:
    """The MEGATRON_ARGS of a launch script, as the shell splits them: flag -> its value (None: a switch)."""
    body = script.split("MEGATRON_ARGS=(\n", 1)[1].split("\n)\n", 1)[0]
    words = shlex.split(body)
    flags: dict[str, str | None] = {}
    for index, word in enumerate(words):
        if word.startswith("--"):
            following = words[index + 1] if index + 1 < len(words) else "--"
            flags[word] = None if following.startswith("--") else following
    assert all(word.startswith("--") or words[index - 1].startswith("--") for index, word in enumerate(words))
    return flags


CASES = [
    # (spec sections, configuration, schedule, runtime)
    ({}, Configuration(1, 2, 2, 1, "linear", 1, 8, zero=1), "1f1b", "megatron"),
    ({}, Configuration(2, 2, 1, 2, "interleaved", 1, 16, recompute="full"), "interleaved", "megatron"),
    (
        {},
        Configuration(1, 2, 2, 2, "interleaved", 1, 8, recompute="full", recompute_layers=1),
        "interleaved",
        "megatron",
    ),
    ({}, Configuration(1, 4, 1, 1, "linear", 1, 16, recompute="selective"), "1f1b", "megatron"),
    ({"model": {"layers": 7}}, Configuration(1, 2, 2, 1, "linear", 1, 8, zero=1), "1f1b", "megatron"),
    ({"model": {"layers": 10}}, Configuration(2, 2, 1, 2, "interleaved", 1, 16), "interleaved", "megatron"),
    ({"training": {"context_parallel": [2]}}, Configuration(1, 2, 1, 1, "linear", 1, 16, 2), "1f1b", "megatron"),
    ({"model": MOE}, Configuration(1, 2, 2, 1, "linear", 1, 8, zero=1, expert_parallel=2), "1f1b", "megatron"),
    (
        {"model": {**MOE, "shared_experts": 1, "dense_layers": 2}},
        Configuration(1, 2, 2, 1, "linear", 1, 8, expert_parallel=2),
        "1f1b",
        "megatron",
    ),
    ({"training": {"sequence_parallel": True}}, Configuration(2, 2, 1, 1, "linear", 1, 16), "1f1b", "megatron"),
    ({}, Configuration(1, 2, 2, 1, "linear", 1, 8, zero=1), "zb-h1", "megatron-zb"),
    ({}, Configuration(1, 2, 2, 1, "linear", 1, 8), "zb-h2", "megatron-zb"),
    ({}, Configuration(1, 2, 2, 1, "linear", 1, 8), "zb-auto", "megatron-zb"),
    ({}, Configuration(1, 2, 2, 2, "vshape", 1, 8), "zb-v", "megatron-zb"),
    ({}, Configuration(1, 2, 2, 2, "vshape", 1, 8, recompute="full"), "v-half", "megatron-zb"),
    ({"model": {"layers": 12}}, Configuration(1, 2, 2, 2, "interleaved", 1, 8), "interleaved", "megatron-zb"),
    ({"model": MOE}, Configuration(1, 2, 2, 1, "linear", 1, 8, expert_parallel=2), "1f1b", "megatron-zb"),
]


@pytest.mark.parametrize(("sections", "config", "schedule", "runtime"), CASES, ids=lambda case: str(case))
def test_every_flag_written_is_the_frameworks(sections, config, schedule, runtime) -> None:
    spec = spec_of(**sections)
    files = launch(spec, config, schedule, runtime)
    flags = script_flags(files["run.sh"])
    assert flags and set(flags) <= FLAGS[runtime], sorted(set(flags) - FLAGS[runtime])
    assert flags["--tensor-model-parallel-size"] == str(config.tensor_parallel)
    assert flags["--pipeline-model-parallel-size"] == str(config.pipeline)
    assert flags["--micro-batch-size"] == str(config.microbatch_size)
    assert flags["--global-batch-size"] == str(spec.global_batch)
    assert flags["--num-layers"] == str(spec.model.layers)
    assert ("--use-distributed-optimizer" in flags) == (config.zero == 1)
    assert flags.get("--context-parallel-size", "1") == str(config.context_parallel)
    assert flags.get("--expert-model-parallel-size", "1") == str(config.expert_parallel)
    assert flags.get("--recompute-granularity") == {"none": None}.get(config.recompute, config.recompute)
    if config.recompute_layers:
        assert (flags["--recompute-method"], flags["--recompute-num-layers"]) == ("block", str(config.recompute_layers))
    elif config.recompute == "full":
        assert (flags["--recompute-method"], flags["--recompute-num-layers"]) == ("uniform", "1")
    layout = flags.get("--pipeline-model-parallel-layout")
    split = layer_split(LaunchInput(spec=spec, config=config, schedule=None, schedule_name="", launch_name=""))  # type: ignore[arg-type]
    if layout is not None:  # the layout says the plan's split, stage by stage
        stages = layout.split("|")
        unrolled = [re.sub(r"t\*(\d+)", lambda m: "t" * int(m[1]), stage) for stage in stages]
        assert [stage.count("t") for stage in unrolled] == list(split)
        assert unrolled[0].startswith("E") and unrolled[-1].endswith("L")
    elif config.placement == "interleaved" and len(set(split)) == 1:
        assert flags["--num-layers-per-virtual-pipeline-stage"] == str(split[0])
    if runtime == "megatron" and len(set(split)) > 1:
        assert layout is not None  # Megatron says an uneven split; the fork notes that it cannot
    if runtime == "megatron-zb" and len(set(split)) > 1:
        assert "# note: megatron-zb splits the layers evenly" in files["run.sh"]


def test_the_fork_refuses_a_split_it_cannot_make_even() -> None:
    with pytest.raises(InputError, match="megatron-zb splits the layers evenly, and 7 layers"):
        launch(
            spec_of(model={"layers": 7}), Configuration(1, 2, 2, 2, "interleaved", 1, 8), "interleaved", "megatron-zb"
        )


def test_the_forks_zero_bubble_flags_say_the_schedule() -> None:
    config = Configuration(1, 2, 2, 1, "linear", 1, 8)
    h1 = script_flags(launch(spec_of(), config, "zb-h1", "megatron-zb")["run.sh"])
    h2 = script_flags(launch(spec_of(), config, "zb-h2", "megatron-zb")["run.sh"])
    assert "--enable-zero-bubble" in h1 and h1["--zero-bubble-max-pending-backward"] == "2"
    assert h2["--zero-bubble-max-pending-backward"] == "4"
    auto = script_flags(launch(spec_of(), config, "zb-auto", "megatron-zb")["run.sh"])
    assert "--enable-zero-bubble" in auto and "--zero-bubble-max-pending-backward" not in auto
    v = Configuration(1, 2, 2, 2, "vshape", 1, 8)
    for schedule, setup in (("zb-v", "zb"), ("v-half", "half"), ("v-min", "min")):
        flags = script_flags(launch(spec_of(), v, schedule, "megatron-zb")["run.sh"])
        assert "--zero-bubble-v-schedule" in flags and flags["--zero-bubble-v-schedule-mem-setup"] == setup
        assert "--enable-optimizer-post-validation" in flags


def test_the_forks_zero_bubble_schedules_post_validate_their_step_in_half_precision_only() -> None:
    """The plan times them by their max span on that ground (`Runtime.iterates_on_span`)."""
    config = Configuration(1, 2, 2, 1, "linear", 1, 8)
    h1 = script_flags(launch(spec_of(), config, "zb-h1", "megatron-zb")["run.sh"])
    plain = script_flags(launch(spec_of(), config, "1f1b", "megatron-zb")["run.sh"])
    fp32 = script_flags(launch(spec_of(training={"bytes_per_value": 4}), config, "zb-h1", "megatron-zb")["run.sh"])
    assert "--bf16" in h1 and "--enable-optimizer-post-validation" in h1
    assert "--enable-optimizer-post-validation" not in plain and "--enable-optimizer-post-validation" not in fp32
    plain = script_flags(launch(spec_of(), config, "1f1b", "megatron-zb")["run.sh"])
    assert not {flag for flag in plain if "zero-bubble" in flag}


@pytest.mark.parametrize(("sections", "config", "schedule", "runtime"), [c for c in CASES if c[3] == "megatron"])
def test_every_bridge_override_is_a_bridge_key(sections, config, schedule, runtime) -> None:
    files = launch(spec_of(**sections), config, schedule, runtime)
    lines = [line for line in files["run-bridge.txt"].splitlines() if not line.startswith("#")]
    keys = {line.split("=", 1)[0] for line in lines}
    assert keys <= BRIDGE_KEYS, sorted(keys - BRIDGE_KEYS)
    values = dict(line.split("=", 1) for line in lines)
    assert values["model.tensor_model_parallel_size"] == str(config.tensor_parallel)
    assert values["ddp.use_distributed_optimizer"] == values["optimizer.use_distributed_optimizer"]
    if config.placement == "interleaved" and "model.pipeline_model_parallel_layout" not in values:
        assert values["model.virtual_pipeline_model_parallel_size"] == str(config.chunks)
