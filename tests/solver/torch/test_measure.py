"""Measuring a stage: B + W does the work of the whole backward, and recomputation keeps less from F to B,
gives the same gradients and is timed as its part of B."""

from __future__ import annotations

import dataclasses

import pytest

from pipesat.solver.torch.measure import _StageRunner
from pipesat.solver.torch.profile_spec import ProfileSpec
from tests.solver.torch.profile_specs import BLOCK, MODERN, TINY, runner

torch = pytest.importorskip("torch")
from tests.solver.torch.flop_count import CountedFlops  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.mark.parametrize(("spec", "first", "last"), [(TINY, True, False), (TINY, False, True), (MODERN, True, True)])
def test_backward_plus_weight_does_the_work_of_the_whole_backward(spec: ProfileSpec, first: bool, last: bool) -> None:
    # Counted, not timed (a wall-clock ratio on a shared machine is noise): F + B + W runs exactly the
    # FLOPs of F + the whole backward, so neither B nor W is missing or done twice.
    runner = _StageRunner(torch, spec, torch.device("cpu"), layers=1, first=first, last=last)
    stage_input = torch.randn(runner.shape, requires_grad=True)
    with CountedFlops() as split:
        runner.split_pass(stage_input)
    with CountedFlops() as whole:
        runner.full_pass(stage_input)
    assert split.total == whole.total > 0


@pytest.mark.parametrize("recompute", ["selective", "full"])
def test_recomputation_gives_the_same_gradients_and_runs_the_forward_again(recompute: str) -> None:
    plain, again = runner(BLOCK), runner(dataclasses.replace(BLOCK, recompute=recompute))
    stage_input = torch.randn(plain.shape, requires_grad=True)
    with CountedFlops() as counted_plain:
        plain.split_pass(stage_input)
    with CountedFlops() as counted_again:
        again.split_pass(stage_input)
    for (name, mine), (_, reference) in zip(
        again.stage.named_parameters(), plain.stage.named_parameters(), strict=True
    ):
        assert torch.allclose(mine.grad, reference.grad, atol=1e-6), name
    with CountedFlops() as forward:
        plain.stage(stage_input, None)
    # The whole block's forward once more, or only the attention core (whose CPU kernel torch counts no FLOPs of).
    assert counted_again.total - counted_plain.total == (forward.total if recompute == "full" else 0)
    core = "aten._scaled_dot_product_flash_attention_for_cpu"
    assert forward.calls[core] == 1 and counted_again.calls[core] == counted_plain.calls[core] + 1
    # F + B + W still does the work of F and the whole backward.
    with CountedFlops() as whole:
        again.full_pass(stage_input)
    assert counted_again.total == whole.total


def test_recomputation_keeps_less_from_f_to_b_and_times_its_part_of_b() -> None:
    held = {}
    for recompute in ("none", "selective", "full"):
        block = runner(dataclasses.replace(BLOCK, recompute=recompute))
        _, backward_ms, _, recompute_ms = block.split_pass(torch.randn(block.shape, requires_grad=True))
        held[recompute] = block.memory[0]
        assert (recompute_ms > 0) == (recompute != "none") and recompute_ms <= backward_ms
    assert held["full"] == 1 * 8 * 32 * 4  # the block's input alone (fp32)
    assert held["full"] < held["selective"] < held["none"]
