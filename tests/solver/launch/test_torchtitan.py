"""The torchtitan launch: every field, class and schedule name it writes is torchtitan's (held against
docs/runtimes/torchtitan-fields.txt), and its values are the configuration's."""

from __future__ import annotations

import ast
from typing import Any

import pytest

from tests.conftest import ROOT
from tests.solver.launch.conftest import PIPELINES, SPEC, launch_files, name_lists

NAMES = name_lists("torchtitan-fields.txt")
SECTIONS = {("config", "parallelism"): "parallelism", ("config", "training"): "training", ("config",): "config"}
"""The attribute path a launch assigns to -> the list its field must be in."""


def assignments(text: str) -> dict[tuple[str, ...], Any]:
    """`config.parallelism.x = value` lines of the launch file -> {("parallelism", "x"): the value's AST}."""
    found: dict[tuple[str, ...], Any] = {}
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Attribute):
            path, target = [], node.targets[0]
            while isinstance(target, ast.Attribute):
                path.insert(0, target.attr)
                target = target.value
            assert isinstance(target, ast.Name) and target.id == "config"
            found[tuple(path)] = node.value
    return found


def value(node: Any) -> Any:
    return ast.literal_eval(node)


CONFIGURATIONS = [*PIPELINES, "t1 p1 d32 b1 m8 zero1", "t8 p1 d4 b2 m32 selective", "t4 p2 d4 b1 m64 zero0"]


@pytest.mark.parametrize("text", CONFIGURATIONS)
def test_every_name_written_is_torchtitans(text: str) -> None:
    launch = launch_files("torchtitan", text)["launch.py"]
    tree = ast.parse(launch)
    compile(tree, "launch.py", "exec")
    for path, node in assignments(launch).items():
        *owner, field = ("config", *path)
        assert field in NAMES[SECTIONS[tuple(owner)]], f"{'.'.join((*owner, field))} is not torchtitan's"
        if field == "pipeline_parallel_schedule":
            assert value(node) in NAMES["schedules"]
        if field == "fsdp_reshard_after_forward":
            assert value(node) in NAMES["fsdp_reshard_after_forward"]
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module != "pathlib":
            assert {f"{node.module}.{alias.name}" for alias in node.names} <= NAMES["imports"]
        if isinstance(node, ast.Attribute) and node.attr == "Config" and isinstance(node.value, ast.Name):
            assert node.value.id in NAMES["activation_checkpoint"] or node.value.id == "Trainer"


@pytest.mark.parametrize("text", CONFIGURATIONS)
def test_the_values_are_the_configurations(text: str) -> None:
    from pipesat.solver.plan.predict import parse_configuration

    config, _ = parse_configuration(text)
    written = {
        path: value(node)
        for path, node in assignments(launch_files("torchtitan", text)["launch.py"]).items()
        if not isinstance(node, ast.Name | ast.Call)
    }
    degrees = [
        written["parallelism", name]
        for name in (
            "tensor_parallel_degree",
            "context_parallel_degree",
            "pipeline_parallel_degree",
            "data_parallel_replicate_degree",
            "data_parallel_shard_degree",
        )
    ]
    gpus = 1
    for degree in degrees:
        gpus *= degree
    assert gpus == SPEC.cluster.gpus
    assert written["parallelism", "pipeline_parallel_degree"] == config.pipeline
    seq = SPEC.model.seq_len
    assert written["training", "num_tokens_per_train_step"] == SPEC.global_batch * seq
    assert written["training", "num_tokens_per_microbatch_per_dp_rank"] == config.microbatch_size * seq
    dp = written["parallelism", "data_parallel_replicate_degree"] * written["parallelism", "data_parallel_shard_degree"]
    steps = SPEC.global_batch * seq // (config.microbatch_size * seq * dp)
    assert steps == config.microbatches  # pipeline microbatches, or gradient accumulation without a pipeline
    if config.pipeline > 1:
        assert written["parallelism", "num_pp_microbatches"] == config.microbatches
        parts = written["parallelism", "module_fqns_per_model_part"]
        assert len(parts) == config.pipeline * config.chunks
        modules = [name for part in parts for name in part]
        layers = [f"layers.{i}" for i in range(SPEC.model.layers)]
        assert modules == ["tok_embeddings", *layers, "norm", "lm_head"]
        v_layout = written["parallelism", "pipeline_parallel_schedule"] in ("ZBVZeroBubble", "DualPipeV")
        assert v_layout == (config.placement == "vshape")
    else:
        assert not any(
            field.startswith(("pipeline_parallel_", "num_pp"))
            for *_, field in written
            if field != "pipeline_parallel_degree"
        )


def test_recomputation_and_zero_are_written_as_torchtitans_nearest() -> None:
    full = launch_files("torchtitan", PIPELINES[0])["launch.py"]
    assert "config.activation_checkpoint = FullAC.Config()" in full
    assert "# ZeRO 1 has no torchtitan form" in full and 'fsdp_reshard_after_forward = "never"' in full
    layers = launch_files("torchtitan", "t1 p4 d8 b1 m32 4-layer-recompute zero1")["launch.py"]
    assert "# every layer: torchtitan has no form of recomputing a stage's first 4 alone" in layers
    assert "config.activation_checkpoint = None" in launch_files("torchtitan", PIPELINES[1])["launch.py"]
    assert "SelectiveAC.Config()" in launch_files("torchtitan", PIPELINES[2])["launch.py"]
    assert 'fsdp_reshard_after_forward = "always"' in launch_files("torchtitan", PIPELINES[4])["launch.py"]
    ddp = assignments(launch_files("torchtitan", "t4 p2 d4 b1 m64 zero0")["launch.py"])
    assert (
        value(ddp["parallelism", "data_parallel_replicate_degree"]),
        value(ddp["parallelism", "data_parallel_shard_degree"]),
    ) == (4, 1)


def test_without_a_pipeline_no_csv_is_written() -> None:
    assert list(launch_files("torchtitan", "t1 p1 d32 b1 m8 zero1")) == ["launch.py"]


def test_the_page_shows_the_launch_as_it_is_written() -> None:
    page = (ROOT / "docs" / "runtimes" / "torchtitan.md").read_text()
    files = launch_files("torchtitan", "t1 p2 d16 b1 m16 zero1 zb-auto", "torchtitan.py")
    assert f"```python\n{files['torchtitan.py'].rstrip()}\n```" in page
    assert "\n".join(",".join(row.split(",")[:16]) + ",..." for row in files["torchtitan.csv"].splitlines()) in page
