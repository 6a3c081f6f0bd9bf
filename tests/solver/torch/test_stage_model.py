"""The stage a profile measures: its parameters' shapes (grouped-query, SwiGLU, one GPU's tensor-parallel
share), its dtype, and the deferred weight gradients, which add up to those of one whole backward."""

from __future__ import annotations

import dataclasses

import pytest

from pipesat.solver.torch.measure import _StageRunner
from pipesat.solver.torch.profile_spec import ProfileSpec
from tests.solver.torch.profile_specs import BLOCK, MODERN, ONE_STAGE, TINY, runner

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.usefixtures("one_thread")


def test_a_bf16_stage_runs_and_keeps_its_gradients_in_bf16() -> None:
    runner = _StageRunner(torch, dataclasses.replace(TINY, dtype="bf16"), torch.device("cpu"), 1, False, False)
    stage_input = torch.randn(runner.shape, dtype=torch.bfloat16, requires_grad=True)
    output = runner.stage(stage_input, None)
    assert output.dtype == torch.bfloat16 and output.shape == (1, 32, 64)
    runner.split_pass(stage_input)
    for name, param in runner.stage.named_parameters():
        assert param.dtype == param.grad.dtype == torch.bfloat16, name
        assert param.grad.shape == param.shape, name


def test_grouped_query_attention_and_swiglu_have_the_cost_model_shapes() -> None:
    runner = _StageRunner(torch, MODERN, torch.device("cpu"), layers=1, first=False, last=False)
    shapes = {name: tuple(param.shape) for name, param in runner.stage.named_parameters() if name.endswith("weight")}
    # q: h = 32; k and v: one key/value head of size h/heads = 16 each.
    assert shapes == {
        "blocks.0.attention.qkv.weight": (32 + 2 * 16, 32),
        "blocks.0.attention.proj.weight": (32, 32),
        "blocks.0.mlp.gate.weight": (48, 32),
        "blocks.0.mlp.up.weight": (48, 32),
        "blocks.0.mlp.down.weight": (32, 48),
    }


@pytest.mark.parametrize("spec", [ONE_STAGE, MODERN])
def test_split_backward_gives_the_same_gradients_as_one_backward(spec: ProfileSpec) -> None:
    runner = _StageRunner(torch, spec, torch.device("cpu"), layers=1, first=True, last=True)
    runner.split_pass(None)
    split = {name: param.grad.clone() for name, param in runner.stage.named_parameters()}
    runner.stage.zero_grad(set_to_none=True)
    runner.store.deferring = False
    loss = runner.stage(runner.stage.embed(runner.tokens), runner.targets)
    loss.backward()
    for name, param in runner.stage.named_parameters():
        assert torch.allclose(split[name], param.grad, atol=1e-6), name


def test_a_tensor_parallel_block_is_one_gpus_share() -> None:
    shard = runner(dataclasses.replace(BLOCK, tensor_parallel=2))
    shapes = {name: tuple(param.shape) for name, param in shard.stage.named_parameters() if name.endswith("weight")}
    # q: 2 heads of 8; k and v: 1 head of 8 each; the output projection takes the 16 back to h = 32.
    assert shapes == {
        "blocks.0.attention.qkv.weight": (16 + 2 * 8, 32),
        "blocks.0.attention.proj.weight": (32, 16),
        "blocks.0.mlp.gate.weight": (24, 32),
        "blocks.0.mlp.up.weight": (24, 32),
        "blocks.0.mlp.down.weight": (32, 24),
    }
    output = shard.stage(torch.randn(shard.shape), None)
    assert output.shape == (1, 8, 32)
