"""A pass's compute time: FLOPs at the flat rate without a gpu, its shapes on the roofline with one."""

from __future__ import annotations

import pytest

from pipesat.solver.instances.cost_model import layer_cost, stage_times
from pipesat.solver.instances.description import Hardware, Training
from pipesat.solver.instances.layer_work import layer_gemms, layer_passes
from pipesat.solver.instances.pass_times import roofline
from pipesat.solver.instances.roofline import attention_ms, gemm_ms, memory_ms
from tests.solver.instances.transformers import A100, LLAMA_8B


def test_without_a_gpu_times_are_todays_flops_at_the_flat_rate() -> None:
    cost = layer_cost(LLAMA_8B, Training(recompute="full"), A100)
    rate = 312e12 * 0.5 / 1e3
    assert cost.forward_ms == cost.forward_flops / rate and cost.weight_ms == cost.weight_flops / rate
    assert cost.backward_ms == pytest.approx(cost.backward_flops / rate)
    assert cost.recompute_ms == pytest.approx(cost.forward_ms)  # full: the forward again
    assert stage_times(cost) == (cost.forward_ms, cost.backward_ms, cost.weight_ms)  # nothing communicated
    # An efficiency given with a gpu is the same flat model at the gpu's peak.
    flat = layer_cost(LLAMA_8B, Training(), Hardware(gpu="H100-SXM", efficiency=0.5))
    assert flat.forward_ms == flat.forward_flops / (989e12 * 0.5 / 1e3)


def test_the_shape_model_times_each_pass_from_its_gemms_attention_and_elementwise_work() -> None:
    hardware = Hardware(gpu="H100-SXM")
    gpu = roofline(hardware)
    assert gpu is not None
    training = Training(tensor_parallel=2, recompute="full")
    cost, passes = layer_cost(LLAMA_8B, training, hardware), layer_passes(LLAMA_8B, training)
    gemms = layer_gemms(LLAMA_8B, training)
    forward = sum(gemm_ms(gemm, 2, gpu) for gemm in gemms) + attention_ms(passes.forward.attention_flops, gpu)
    forward += memory_ms(passes.forward.elementwise_bytes, gpu)
    assert cost.forward_ms == pytest.approx(forward)
    assert cost.weight_ms == pytest.approx(sum(gemm_ms(gemm.weight_gradient(), 2, gpu) for gemm in gemms))
    assert cost.recompute_ms == pytest.approx(cost.forward_ms)
    assert cost.backward_ms == pytest.approx(passes.backward.ms(2, gpu) + cost.recompute_ms)
    # The FLOPs stay the analytic model's, whichever way they are timed.
    assert cost.forward_flops == pytest.approx(layer_cost(LLAMA_8B, training, A100).forward_flops)
    # Elementwise work (its norms and adds repeated on both GPUs) is a tenth of F; flash attention's
    # backward does 2.5 times its forward's FLOPs.
    assert 0.05 < memory_ms(passes.forward.elementwise_bytes, gpu) / cost.forward_ms < 0.15
    assert passes.backward.attention_flops == 2.5 * passes.forward.attention_flops
