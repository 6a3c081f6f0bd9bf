"""A layer's exposed communication and the p2p time: tensor parallelism's collectives (and what B's
overlap hides), the pipeline's scatter and gather, ring attention's exchange and the experts' all-to-all."""

from __future__ import annotations

import dataclasses

import pytest

from pipesat.solver.instances import communication
from pipesat.solver.instances.collectives import Collective, Link, collective_ms
from pipesat.solver.instances.communication import (
    all_to_all_ms,
    backward_exchange_ms,
    block_exchange_ms,
    kv_exchange_ms,
    p2p_time,
)
from pipesat.solver.instances.cost_model import head_cost, layer_cost
from pipesat.solver.instances.description import Hardware, Training, Transformer
from pipesat.solver.instances.layer_work import layer_gemms, layer_passes
from pipesat.solver.instances.pass_times import roofline
from pipesat.solver.instances.roofline import Gemm, attention_ms
from tests.solver.instances.transformers import A100, GPT_1_5B, LLAMA_8B, MOE, B, H, S


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


def test_bs_overlap_picks_its_gemms_by_key_so_a_renamed_label_changes_no_time(monkeypatch: pytest.MonkeyPatch) -> None:
    linked = dataclasses.replace(A100, tp_bandwidth=100, tp_latency=3)
    training = Training(tensor_parallel=4, sequence_parallel=True, overlap_tp_comm=True)
    models = (GPT_1_5B, LLAMA_8B, MOE)
    before = [backward_exchange_ms(model, training, linked) for model in models]
    gemms = communication.layer_gemms

    def renamed(model: Transformer, training: Training) -> tuple[Gemm, ...]:
        return tuple(dataclasses.replace(gemm, name="renamed") for gemm in gemms(model, training))

    monkeypatch.setattr(communication, "layer_gemms", renamed)
    for model, time in zip(models, before, strict=True):
        apart = 2 * block_exchange_ms(model, training, linked)
        assert backward_exchange_ms(model, training, linked) == time < apart  # the overlap still hides some
