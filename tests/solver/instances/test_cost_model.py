"""The analytic cost model: the ZB paper's layer exactly, then today's layers (GQA, SwiGLU, causal
flash attention, no dropout), tensor and sequence parallelism, recomputation, and bad descriptions."""

from __future__ import annotations

import dataclasses
import math

import pytest

from pipesat.models import InstanceError
from pipesat.solver.instances.collectives import Collective, Link, collective_ms
from pipesat.solver.instances.communication import all_to_all_ms, kv_exchange_ms, p2p_time
from pipesat.solver.instances.cost_model import NO_COST, head_cost, layer_cost, stage_costs, stage_times
from pipesat.solver.instances.description import ZB_PAPER_TRAINING, Hardware, Pipeline, Training, Transformer
from pipesat.solver.instances.description_checks import check_description
from pipesat.solver.instances.layer_split import layer_split
from pipesat.solver.instances.layer_work import layer_gemms, layer_passes, linear_flops, score_flops
from pipesat.solver.instances.pass_times import roofline
from pipesat.solver.instances.roofline import attention_ms, gemm_ms, memory_ms

# The 1.5B setting of the ZB paper's Table 5 (docs/reference.md; h 2304, a 24, s 1024).
GPT_1_5B = Transformer(layers=24, hidden=2304, heads=24, seq_len=1024, microbatch_size=1, vocab=50257)
# Llama 3 8B's published configuration.
LLAMA_8B = Transformer(32, 4096, 32, 4096, vocab=128256, kv_heads=8, ffn_hidden=14336)
A100 = Hardware(tflops=312, efficiency=0.5, bandwidth=50, latency=10)
S, B, H, A = 1024, 1, 2304, 24


def test_the_zb_papers_layer_follows_its_formulas_exactly() -> None:
    cost = layer_cost(GPT_1_5B, ZB_PAPER_TRAINING, A100)
    assert cost.forward_flops == S * B * H * (24 * H + 4 * S)
    assert cost.backward_flops == S * B * H * (24 * H + 8 * S)
    assert cost.weight_flops == 24 * S * B * H * H
    assert cost.activation_bytes == S * B * (34 * H + 5 * A * S)
    assert cost.weight_bytes == 32 * S * B * H
    assert cost.backward_flops + cost.weight_flops == 2 * cost.forward_flops


def test_flash_attention_keeps_no_scores_and_recomputes_qk_in_b() -> None:
    flash = dataclasses.replace(ZB_PAPER_TRAINING, flash_attention=True)
    cost = layer_cost(GPT_1_5B, flash, A100)
    softmax_statistics = 4 * A * S * B  # fp32, one per head and token
    assert cost.activation_bytes == 34 * S * B * H + softmax_statistics
    assert cost.backward_flops == S * B * H * (24 * H + 10 * S)  # the ZB paper's flash variant


def test_causal_flash_attention_does_half_the_score_flops() -> None:
    causal = dataclasses.replace(ZB_PAPER_TRAINING, flash_attention=True, causal=True)
    assert score_flops(GPT_1_5B, causal) == 2 * S * S * B * H
    # Without flash the full s x s scores are computed and masked.
    assert score_flops(GPT_1_5B, dataclasses.replace(ZB_PAPER_TRAINING, causal=True)) == 4 * S * S * B * H


def test_todays_default_layer_without_dropout_keeps_32_values_of_2_bytes_a_token() -> None:
    # GELU MLP, multi-head attention, causal flash attention, no dropout: 34sbh less the two masks.
    cost = layer_cost(GPT_1_5B, Training(), A100)
    assert cost.activation_bytes == 32 * S * B * H + 4 * A * S * B
    assert cost.weight_bytes == 32 * S * B * H


def test_grouped_query_attention_and_swiglu_change_the_matmuls() -> None:
    n, h, g_d, f = 4096, 4096, 8 * 128, 14336
    assert LLAMA_8B.kv_width == g_d
    assert linear_flops(LLAMA_8B) == 2 * n * h * (h + 2 * g_d) + 2 * n * h * h + 6 * n * h * f
    # With every head its own key/value head and a 4h GELU MLP, the matmuls are the ZB paper's 24sbh².
    assert linear_flops(GPT_1_5B) == 24 * S * B * H * H
    mha = dataclasses.replace(LLAMA_8B, kv_heads=32)
    assert layer_cost(mha, Training(), A100).activation_bytes > layer_cost(LLAMA_8B, Training(), A100).activation_bytes


def test_swiglu_keeps_gate_up_and_down_inputs() -> None:
    n, h, f = 4096, 4096, 14336
    cost = layer_cost(LLAMA_8B, Training(), A100)
    attention = 2 * (n * h * 2 + n * h + 2 * n * 1024 + n * h) + 4 * 32 * n  # norm, QKV in, Q, K, V, output
    mlp = 2 * (2 * n * h + 3 * n * f)
    assert cost.activation_bytes == attention + mlp


@pytest.mark.parametrize("t", [1, 2, 4, 8])
def test_tensor_parallel_memory_is_korthikantis_formula(t: int) -> None:
    # Korthikanti et al., Table 2: s·b·h·(10 + 24/t + 5a·s/(h·t)) without sequence parallelism, a t-th of
    # 34 s·b·h + 5a·s²·b with it.
    training = dataclasses.replace(ZB_PAPER_TRAINING, tensor_parallel=t)
    cost = layer_cost(GPT_1_5B, training, A100)
    assert cost.activation_bytes == pytest.approx(S * B * H * (10 + 24 / t + 5 * A * S / (H * t)))
    assert cost.forward_flops == pytest.approx(S * B * H * (24 * H + 4 * S) / t)
    if t > 1:
        parallel = layer_cost(GPT_1_5B, dataclasses.replace(training, sequence_parallel=True), A100)
        assert parallel.activation_bytes == pytest.approx((34 * S * B * H + 5 * A * S * S * B) / t)


def test_tensor_parallel_collectives_are_timed_only_with_their_bandwidth() -> None:
    training = dataclasses.replace(Training(), tensor_parallel=4, overlap_tp_comm=False)
    untimed = layer_cost(GPT_1_5B, training, A100)
    assert untimed.forward_comm_ms == untimed.backward_comm_ms == 0
    linked = dataclasses.replace(A100, tp_bandwidth=100, tp_latency=3)
    timed = layer_cost(GPT_1_5B, training, linked)
    one = collective_ms(Collective.ALL_REDUCE, S * B * H * 2, 4, Link(100, 3))
    assert timed.forward_comm_ms == pytest.approx(2 * one) and timed.backward_comm_ms == pytest.approx(2 * one)
    # Sequence parallelism's all-gather and reduce-scatter move the same bytes in as many steps.
    parallel = layer_cost(GPT_1_5B, dataclasses.replace(training, sequence_parallel=True), linked)
    assert parallel.forward_comm_ms == pytest.approx(timed.forward_comm_ms)
    full = layer_cost(GPT_1_5B, dataclasses.replace(training, recompute="full"), linked)
    assert full.backward_comm_ms == pytest.approx(4 * one)  # F's again before B's
    # The head's column-parallel matmul reduces its input's gradient in B.
    head = head_cost(GPT_1_5B, training, linked)
    assert (head.forward_comm_ms, head.backward_comm_ms) == (0, pytest.approx(one))


def test_bs_input_gradient_reduction_shows_only_beyond_the_column_parallel_weight_gradient() -> None:
    # Megatron's asynchronous communication: each block's input-gradient all-reduce (reduce-scatter with
    # sequence parallelism) runs beside its column-parallel matmul's weight gradient (QKV; the MLP's up).
    linked = dataclasses.replace(A100, tp_bandwidth=100, tp_latency=3)
    rate = 312e12 * 0.5 / 1e3  # the flat model's FLOPs a ms
    for parallel in (False, True):
        training = Training(tensor_parallel=4, sequence_parallel=parallel, overlap_tp_comm=True)
        reduce = Collective.REDUCE_SCATTER if parallel else Collective.ALL_REDUCE
        one = collective_ms(reduce, S * B * H * 2, 4, Link(100, 3))
        gather = collective_ms(Collective.ALL_GATHER, S * B * H * 2, 4, Link(100, 3)) if parallel else 0.0
        weight_gradients = [gemm.flops / rate for gemm in layer_gemms(GPT_1_5B, training)]
        qkv, up = weight_gradients[0], weight_gradients[2]  # QKV, output, up, down
        exposed = sum(gather + max(0.0, one - under) for under in (qkv, up))
        assert layer_cost(GPT_1_5B, training, linked).backward_comm_ms == pytest.approx(exposed)
        apart = layer_cost(GPT_1_5B, dataclasses.replace(training, overlap_tp_comm=False), linked)
        assert apart.backward_comm_ms == pytest.approx(2 * (gather + one)) and exposed < 2 * (gather + one)
    # A slow link shows almost all of it; full recomputation runs F's exchanges again, not hidden.
    slow = dataclasses.replace(A100, tp_bandwidth=1, tp_latency=3)
    hidden = layer_cost(GPT_1_5B, Training(tensor_parallel=4, overlap_tp_comm=True), slow)
    assert hidden.backward_comm_ms > 0.95 * hidden.forward_comm_ms
    full = layer_cost(GPT_1_5B, Training(tensor_parallel=4, recompute="full", overlap_tp_comm=True), slow)
    assert full.backward_comm_ms == pytest.approx(hidden.backward_comm_ms + hidden.forward_comm_ms)


def test_without_sequence_parallelism_megatron_sends_a_slice_a_gpu_and_gathers_it() -> None:
    # The pipeline link at 50 GB/s, NVLink at 300 (an A100 node's): a slice each and a gather is faster.
    linked = dataclasses.replace(A100, tp_bandwidth=300, tp_latency=3)
    whole = S * B * H * 2  # one microbatch's n·h activation in bytes
    latency_ms, link_ms = A100.latency / 1e3, 1e3 / (A100.bandwidth * 1e9)
    gather = collective_ms(Collective.ALL_GATHER, whole, 4, Link(300, 3))
    sliced = p2p_time(GPT_1_5B, Training(tensor_parallel=4), linked)
    assert sliced == pytest.approx(latency_ms + whole / 4 * link_ms + gather)
    apart = p2p_time(GPT_1_5B, Training(tensor_parallel=4, scatter_gather_p2p=False), linked)
    assert apart == pytest.approx(latency_ms + whole * link_ms) and sliced < apart
    # Sequence parallelism's activation is a slice already; one GPU sends it whole.
    for flag in (True, False):
        training = Training(tensor_parallel=4, sequence_parallel=True, scatter_gather_p2p=flag)
        assert p2p_time(GPT_1_5B, training, linked) == pytest.approx(latency_ms + whole / 4 * link_ms)
    assert p2p_time(GPT_1_5B, Training(), linked) == pytest.approx(latency_ms + whole * link_ms)


def test_recomputation_trades_memory_for_backward_flops() -> None:
    selective = layer_cost(GPT_1_5B, dataclasses.replace(ZB_PAPER_TRAINING, recompute="selective"), A100)
    assert selective.activation_bytes == 34 * S * B * H  # no scores kept
    assert selective.backward_flops == S * B * H * (24 * H + 12 * S)  # the attention core's forward again
    full = layer_cost(GPT_1_5B, dataclasses.replace(ZB_PAPER_TRAINING, recompute="full"), A100)
    zb = layer_cost(GPT_1_5B, ZB_PAPER_TRAINING, A100)
    assert full.activation_bytes == 2 * S * B * H  # the layer's input only
    assert full.backward_flops == zb.backward_flops + zb.forward_flops
    assert full.weight_bytes == full.activation_bytes  # capped: W frees at most what F allocated


@pytest.mark.parametrize("model", [LLAMA_8B, None], ids=["dense", "moe"])
def test_recompute_layers_recomputes_a_stages_first_layers_and_keeps_the_rest(model: Transformer | None) -> None:
    # Megatron's block method: 3 of a stage's 5 layers recomputed in full, 2 keeping their activations;
    # of a mixture of experts (2 dense layers first), each layer at its own kind's cost.
    model = model or dataclasses.replace(MOE, layers=8, dense_layers=2)
    full, kept = Training(recompute="full"), Training()
    partial = Training(recompute="full", recompute_layers=3)
    split = (3, 5) if model.layers == 8 else (27, 5)
    stage = stage_costs(model, partial, A100, split)[1].cost
    first = sum(split[:1])
    expected = NO_COST
    for training, start, count in ((full, first, 3), (kept, first + 3, 2)):
        dense, moe = model.layer_kinds(start, count)
        expected = expected.plus(layer_cost(model.dense(), training, A100), dense)
        if moe:
            expected = expected.plus(layer_cost(model, training, A100), moe)
    if model.vocab:
        expected = expected.plus(head_cost(model, partial, A100))
    assert stage == expected
    # Every layer of the 5-layer stage recomputed when the count reaches 5 (or is 0): full recomputation.
    for every in (0, 5, 9):
        training = Training(recompute="full", recompute_layers=every)
        assert stage_costs(model, training, A100, split)[1] == stage_costs(model, full, A100, split)[1]


def test_recomputing_some_layers_lies_between_none_and_all() -> None:
    costs = [
        stage_costs(LLAMA_8B, training, A100, (32,))[0].cost
        for training in (Training(), Training(recompute="full", recompute_layers=16), Training(recompute="full"))
    ]
    none, half, full = costs
    assert none.activation_bytes > half.activation_bytes > full.activation_bytes
    assert none.recompute_ms == 0 < half.recompute_ms == pytest.approx(full.recompute_ms / 2)
    assert none.activation_bytes + full.activation_bytes == pytest.approx(2 * half.activation_bytes)


def test_the_head_is_split_over_tensor_parallelism() -> None:
    head = head_cost(GPT_1_5B, Training(), A100)
    assert head.forward_flops == head.backward_flops == head.weight_flops == 2 * S * B * H * 50257
    assert head.activation_bytes == S * B * (H + 50257) * 2
    split = head_cost(GPT_1_5B, Training(tensor_parallel=2), A100)
    assert split.forward_flops == head.forward_flops / 2
    assert split.activation_bytes == S * B * (H + 50257 / 2) * 2


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


def test_sequence_parallelism_splits_the_norms_and_adds_every_gpu_would_repeat() -> None:
    hardware = Hardware(gpu="H100-SXM")
    training = Training(tensor_parallel=4)
    repeated = layer_passes(LLAMA_8B, training).forward.elementwise_bytes
    split = layer_passes(LLAMA_8B, dataclasses.replace(training, sequence_parallel=True)).forward.elementwise_bytes
    n, h, f, kv = 4096, 4096, 14336, 1024
    assert repeated == pytest.approx(2 * (10 * n * h + (3 * n * f + 2 * n * (h + kv)) / 4))
    assert split == pytest.approx(2 * (10 * n * h + 3 * n * f + 2 * n * (h + kv)) / 4)
    parallel = layer_cost(LLAMA_8B, dataclasses.replace(training, sequence_parallel=True), hardware)
    assert parallel.forward_ms < layer_cost(LLAMA_8B, training, hardware).forward_ms


def test_tensor_parallelism_costs_more_gpu_time_the_wider_it_goes() -> None:
    # Llama 3 8B's layer at 8192 tokens on H100s: per-GPU time x t, over the time on one GPU.
    model = dataclasses.replace(LLAMA_8B, seq_len=8192)
    hardware = Hardware(gpu="H100-SXM")
    one = sum(stage_times(layer_cost(model, Training(), hardware)))
    overheads = [
        t * sum(stage_times(layer_cost(model, Training(tensor_parallel=t), hardware))) / one - 1 for t in (2, 4, 8)
    ]
    assert overheads == sorted(overheads)
    # Measured on 8B models (the issue): 7-11% at t = 2.
    assert 0.05 < overheads[0] < 0.15


def test_context_parallelism_splits_the_tokens_and_hides_the_ring_under_the_attention() -> None:
    hardware = Hardware(gpu="H100-SXM")
    whole = layer_cost(LLAMA_8B, Training(), hardware)
    split = layer_cost(LLAMA_8B, Training(context_parallel=2), hardware)
    assert split.activation_bytes == whole.activation_bytes / 2
    assert split.forward_flops == whole.forward_flops / 2 and split.weight_flops == whole.weight_flops / 2
    # NVLink passes 2 x 2048 tokens of keys and values faster than the attention computes.
    assert split.forward_comm_ms == split.backward_comm_ms == 0
    slow = dataclasses.replace(hardware, cp_bandwidth=0.1)
    training = Training(context_parallel=2)
    passes = layer_passes(LLAMA_8B, training)
    ring = collective_ms(Collective.ALL_GATHER, 2 * 2 * 2048 * 1024 * 2, 2, Link(0.1, 2))
    assert kv_exchange_ms(LLAMA_8B, training, slow) == pytest.approx(ring)
    gpu = roofline(slow)
    assert gpu is not None
    exposed = layer_cost(LLAMA_8B, training, slow)
    assert exposed.forward_comm_ms == pytest.approx(ring - attention_ms(passes.forward.attention_flops, gpu))
    assert exposed.backward_comm_ms == pytest.approx(2 * ring - attention_ms(passes.backward.attention_flops, gpu))


def test_chunks_cut_the_model_into_p_times_v_stages() -> None:
    assert layer_split(GPT_1_5B, Pipeline(devices=4, microbatches=8, chunks=2)) == (3,) * 8
    assert layer_split(GPT_1_5B, Pipeline(8, 24, layers_per_stage=(2, 3, 3, 4, 4, 3, 3, 2))) == (2, 3, 3, 4, 4, 3, 3, 2)


@pytest.mark.parametrize(
    ("record", "changes", "message"),
    [
        (GPT_1_5B, {"heads": 0}, "heads must be at least 1, got 0"),
        (GPT_1_5B, {"vocab": -1}, "vocab must be at least 0, got -1"),
        (GPT_1_5B, {"layers": 2.0}, "layers must be a whole number, got 2.0"),
        (Training(), {"tensor_parallel": 0}, "tensor_parallel must be at least 1, got 0"),
        (Training(), {"recompute": "some"}, "recompute must be one of none, selective, full, got 'some'"),
        (Training(), {"bytes_per_value": 0}, "bytes_per_value must be a positive number, got 0"),
        (A100, {"tflops": -1}, "tflops must be a positive number, got -1"),
        (A100, {"efficiency": 1.5}, "efficiency must be in (0, 1] (the fraction of peak throughput reached), got 1.5"),
        (A100, {"latency": -1}, "latency must be a non-negative number, got -1"),
        (A100, {"bandwidth": math.inf}, "bandwidth must be a number, got inf"),
        (Pipeline(8, 24), {"devices": 0}, "devices must be at least 1, got 0"),
        (
            Pipeline(8, 24),
            {"layers_per_stage": (3, -1)},
            "layers_per_stage must be whole numbers of at least 0, got [3, -1]",
        ),
    ],
)
def test_a_bad_key_is_refused_when_its_record_is_made(record: object, changes: dict, message: str) -> None:
    with pytest.raises(InstanceError) as error:
        dataclasses.replace(record, **changes)
    assert str(error.value) == message


@pytest.mark.parametrize(
    ("model", "training", "pipeline", "message"),
    [
        (GPT_1_5B, Training(), Pipeline(7, 24), "24 layers do not split evenly over 7 x 1 = 7 stages; add --balance"),
        (GPT_1_5B, Training(), Pipeline(8, 24, layers_per_stage=(3,) * 7), "layers per stage lists 7 counts"),
        (
            dataclasses.replace(GPT_1_5B, heads=25),
            Training(),
            Pipeline(8, 24),
            "hidden 2304 is not divisible by heads 25",
        ),
        (
            dataclasses.replace(LLAMA_8B, kv_heads=5),
            Training(),
            Pipeline(8, 24),
            "heads 32 is not divisible by kv_heads 5",
        ),
        (LLAMA_8B, Training(tensor_parallel=16), Pipeline(8, 24), "tensor parallelism 16 does not divide kv_heads 8"),
        (LLAMA_8B, Training(sequence_parallel=True), Pipeline(8, 24), "give --tensor-parallel 2 or more"),
        (LLAMA_8B, Training(context_parallel=3), Pipeline(8, 24), "context parallelism 3 does not divide seq_len 4096"),
        (
            LLAMA_8B,
            Training(tensor_parallel=8, sequence_parallel=True, context_parallel=1024),
            Pipeline(8, 24),
            "sequence parallelism needs seq_len 4096 / context parallelism 1024 divisible by tensor parallelism 8",
        ),
        (LLAMA_8B, Training(zero=1), Pipeline(8, 24), "give --data-parallel 2 or more"),
        (
            LLAMA_8B,
            Training(recompute="selective", recompute_layers=2),
            Pipeline(8, 24),
            "recompute_layers counts layers recomputed in full, but recompute is selective; give --recompute full",
        ),
        (GPT_1_5B, Training(), Pipeline(8, 24, layers_per_stage=(3,) * 8, balance=True), "not both"),
    ],
)
def test_keys_that_do_not_fit_together_give_one_clear_line(
    model: Transformer, training: Training, pipeline: Pipeline, message: str
) -> None:
    with pytest.raises(InstanceError) as error:
        check_description(model, training, A100, pipeline)
        layer_split(model, pipeline)
    assert message in str(error.value) and "\n" not in str(error.value)


# A small mixture of experts: 16 routed experts of width 512, each token to 2 of them and to 1 shared
# expert; its dense layer (`MOE.dense()`) a SwiGLU MLP of width 2816.
MOE = Transformer(4, 1024, 8, 2048, ffn_hidden=2816, experts=16, top_k=2, shared_experts=1, expert_ffn_hidden=512)


def test_a_mixture_of_experts_layer_does_top_k_and_shared_expert_mlps_a_token_and_the_router() -> None:
    h, f_e, n = 1024, 512, 2048
    attention = 2 * h * (h + 2 * h) + 2 * h * h
    assert linear_flops(MOE) / n == attention + 6 * (2 + 1) * h * f_e + 2 * h * 16
    assert linear_flops(MOE.dense()) / n == attention + 6 * h * 2816
    # Expert parallelism moves the experts, not the work: each GPU's experts take n·k routed copies.
    for ep in (1, 4, 16):
        training = Training(expert_parallel=ep, data_parallel=16)
        passes = layer_passes(MOE, training)
        assert passes.forward.flops == pytest.approx(linear_flops(MOE) + score_flops(MOE, training))
        routed = [gemm for gemm in layer_gemms(MOE, training) if gemm.name.startswith("routed experts")]
        assert len(routed) == 2 * 16 // ep and {gemm.m for gemm in routed} == {n * 2 * ep / 16}


def test_the_all_to_all_is_none_without_expert_parallelism_and_grows_with_ep_and_a_slower_link() -> None:
    nvlink, network = Hardware(gpu="H100-SXM", ep_bandwidth=450, ep_latency=2), Hardware(gpu="H100-SXM")
    assert network.ep_bandwidth == 50  # by default the data-parallel link: the network
    times = {ep: all_to_all_ms(MOE, Training(expert_parallel=ep, data_parallel=16), nvlink) for ep in (1, 2, 8)}
    assert times[1] == 0 and 0 < times[2] < times[8]
    one = 2 * 2048 * 1024 * 2  # k routed copies of n·h values, 2 bytes each
    training = Training(expert_parallel=8, data_parallel=16)
    assert times[8] == pytest.approx(collective_ms(Collective.ALL_TO_ALL, one, 8, Link(450, 2)))
    assert all_to_all_ms(MOE, training, network) > 5 * times[8]
    assert all_to_all_ms(MOE.dense(), training, nvlink) == 0  # a dense layer has none
    # Dispatch and combine in F, their mirrors in B (and F's again with full recomputation): the
    # communication part of the op times.
    layer = layer_cost(MOE, training, network)
    a2a = all_to_all_ms(MOE, training, network)
    assert layer.forward_a2a_ms == layer.backward_a2a_ms == pytest.approx(2 * a2a)
    assert layer.forward_comm_ms == pytest.approx(2 * a2a)
    full = layer_cost(MOE, dataclasses.replace(training, recompute="full"), network)
    assert full.backward_a2a_ms == pytest.approx(4 * a2a)


def test_the_routed_tokens_keep_their_expert_activations() -> None:
    training, n, h, k, f_e = Training(), 2048, 1024, 2, 512
    moe, dense = layer_cost(MOE, training, A100), layer_cost(MOE.dense(), training, A100)
    dense_mlp = 3 * n * 2816 * 2
    routed = (2 * n * k * h + 3 * n * k * f_e) * 2  # dispatched input and outputs; gate, up, down input
    shared = 3 * n * f_e * 2
    router = n * 16 * 4
    assert moe.activation_bytes - dense.activation_bytes == routed + shared + router - dense_mlp


@pytest.mark.parametrize(
    ("changes", "training", "message"),
    [
        ({"top_k": 17}, Training(), "top_k 17 is more than the 16 experts"),
        ({"dense_layers": 4}, Training(), "dense_layers 4 leaves none of the 4 layers a mixture of experts"),
        ({"experts": 0}, Training(), "shared_experts is given but experts is 0"),
        ({}, Training(expert_parallel=3, data_parallel=3), "expert parallelism 3 does not divide the 16 experts"),
        ({}, Training(expert_parallel=4, data_parallel=2), "expert parallelism 4 does not divide data parallelism 2"),
        ({}, Training(tensor_parallel=3), "tensor parallelism 3 does not divide heads 8"),
        ({"expert_ffn_hidden": 500}, Training(tensor_parallel=8), "does not divide expert_ffn_hidden 500"),
        ({}, Training(data_parallel=2, zero=3), "ZeRO 3 with experts is not modelled"),
    ],
)
def test_mixture_of_experts_keys_that_do_not_fit_are_one_line(
    changes: dict[str, int], training: Training, message: str
) -> None:
    with pytest.raises(InstanceError, match=message):
        check_description(dataclasses.replace(MOE, **changes), training, A100, Pipeline(devices=1, microbatches=1))
