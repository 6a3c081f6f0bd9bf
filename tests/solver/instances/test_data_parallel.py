"""Data-parallel exchanges: Megatron's buckets, the overlap timeline, what the compute hides and what it
cannot (the last bucket's reduction, the first bucket's gather), and ZeRO-3's exchanges in the ops."""

from __future__ import annotations

import dataclasses

import pytest

from pipesat.solver.heuristics import run_heuristic
from pipesat.solver.instances.collectives import Collective, Link, collective_ms
from pipesat.solver.instances.cost_model import stage_costs
from pipesat.solver.instances.data_parallel import (
    buckets,
    gradient_reduction,
    overlapped_ms,
    sharded_op_ms,
    weight_gather,
)
from pipesat.solver.instances.description import Hardware, Pipeline, Training, Transformer
from pipesat.solver.instances.explain import command_line, explain
from pipesat.solver.instances.from_model import Description, derive
from pipesat.solver.instances.model_state import stage_units
from tests.strategies import assert_valid

LINK = Link(bandwidth=50, latency=10)
LLAMA_8B = Transformer(32, 4096, 32, 4096, vocab=128256, kv_heads=8, ffn_hidden=14336)
H100 = Hardware(tflops=989, efficiency=0.45)
PARAMETERS = 2.1e9  # a device of Llama 3 8B on 4 pipeline devices: 53 buckets of 40M


def test_buckets_are_megatrons_40m_parameters_or_1m_a_replica() -> None:
    assert buckets(100e6, 8) == [40e6, 40e6, 20e6]
    assert buckets(128e6, 64) == [64e6, 64e6]
    assert buckets(30e6, 2) == [30e6]


@pytest.mark.parametrize(
    ("compute", "before", "after", "expected"),
    [
        # Reductions after each unit: only the last one sticks out.
        ([1, 1, 1], [0, 0, 0], [0.5, 0.5, 0.5], 3.5),
        # Reductions longer than the compute queue up behind each other.
        ([1, 1, 1], [0, 0, 0], [2, 2, 2], 7.0),
        # Gathers: the first before anything; the next issued when a unit starts (one prefetched).
        ([1, 1, 1], [0.5, 0.5, 0.5], [0, 0, 0], 3.5),
        ([1, 1, 1], [2, 2, 2], [0, 0, 0], 7.0),
        # Both, on one stream in the order they are issued.
        ([2, 2], [1, 1], [1, 1], 6.0),
    ],
)
def test_the_overlap_timeline(compute: list[float], before: list[float], after: list[float], expected: float) -> None:
    assert overlapped_ms(compute, before, after) == pytest.approx(expected)


def test_without_overlap_the_whole_reduction_is_exposed() -> None:
    training = Training(data_parallel=8, overlap_grad_reduce=False)
    expected = sum(collective_ms(Collective.ALL_REDUCE, bucket * 4, 8, LINK) for bucket in buckets(PARAMETERS, 8))
    reduction = gradient_reduction(training, PARAMETERS, 100.0, LINK)
    assert reduction.exposed_ms == reduction.total_ms == pytest.approx(expected)
    # 53 buckets of 40M fp32 gradients at 80% of 50 GB/s: about 2 x 7/8 x 8.4 GB / 40 GB/s.
    assert expected == pytest.approx(2 * 7 / 8 * PARAMETERS * 4 / 40e9 * 1e3, rel=0.1)


def test_overlap_exposes_less_and_at_least_the_last_bucket() -> None:
    training = Training(data_parallel=8)
    last = collective_ms(Collective.ALL_REDUCE, buckets(PARAMETERS, 8)[-1] * 4, 8, LINK)
    whole = gradient_reduction(dataclasses.replace(training, overlap_grad_reduce=False), PARAMETERS, 100.0, LINK)
    for backward_ms in (0.0, 100.0, 300.0, 1e4):
        reduction = gradient_reduction(training, PARAMETERS, backward_ms, LINK)
        assert last - 1e-9 <= reduction.exposed_ms <= whole.exposed_ms + 1e-9
        assert reduction.total_ms == pytest.approx(whole.total_ms)
    # A backward far longer than the reduction hides all of it but the last bucket.
    assert gradient_reduction(training, PARAMETERS, 1e4, LINK).exposed_ms == pytest.approx(last)
    # A backward of 0 hides nothing.
    assert gradient_reduction(training, PARAMETERS, 0.0, LINK).exposed_ms == pytest.approx(whole.exposed_ms)
    assert gradient_reduction(training, PARAMETERS, 100.0, LINK).exposed_ms < whole.exposed_ms


def test_zero_1_and_2_reduce_scatter_and_gather_the_weights_zero_3_in_its_ops() -> None:
    plain, zero1 = Training(data_parallel=8), Training(data_parallel=8, zero=1, overlap_grad_reduce=False)
    scattered = sum(collective_ms(Collective.REDUCE_SCATTER, b * 4, 8, LINK) for b in buckets(PARAMETERS, 8))
    assert gradient_reduction(zero1, PARAMETERS, 100.0, LINK).exposed_ms == pytest.approx(scattered)
    assert scattered < gradient_reduction(dataclasses.replace(plain, overlap_grad_reduce=False), PARAMETERS, 0, LINK)[0]
    assert weight_gather(plain, PARAMETERS, 100.0, LINK).total_ms == 0
    for zero in (1, 2):
        gather = weight_gather(Training(data_parallel=8, zero=zero), PARAMETERS, 100.0, LINK)
        first = collective_ms(Collective.ALL_GATHER, buckets(PARAMETERS, 8)[-1] * 2, 8, LINK)
        assert first - 1e-9 <= gather.exposed_ms < gather.total_ms
    unhidden = weight_gather(Training(data_parallel=8, zero=1, overlap_param_gather=False), PARAMETERS, 100.0, LINK)
    assert unhidden.exposed_ms == unhidden.total_ms
    zero3 = Training(data_parallel=8, zero=3)
    assert gradient_reduction(zero3, PARAMETERS, 100.0, LINK).total_ms == 0
    assert weight_gather(zero3, PARAMETERS, 100.0, LINK).total_ms == 0
    assert gradient_reduction(Training(), PARAMETERS, 100.0, LINK).total_ms == 0  # one replica


def test_zero_3_gathers_before_f_and_b_and_reduce_scatters_after_w() -> None:
    training = Training(data_parallel=8, zero=3)
    stage = stage_costs(LLAMA_8B, training, H100, (8, 8, 8, 8))[0]
    units = stage_units(LLAMA_8B, training, stage)
    assert len(units) == 9  # the embedding and 8 layers
    gather = [collective_ms(Collective.ALL_GATHER, unit * 2, 8, LINK) for unit in units]
    reduce = [collective_ms(Collective.REDUCE_SCATTER, unit * 4, 8, LINK) for unit in units]
    forward, backward, weight = sharded_op_ms(LLAMA_8B, training, stage, (100.0, 150.0, 50.0), LINK)
    assert forward.total_ms == pytest.approx(sum(gather)) and backward.total_ms == pytest.approx(sum(gather))
    assert weight.total_ms == pytest.approx(sum(reduce))
    # The embedding is a lookup: its gather and the first layer's come before any compute.
    assert forward.exposed_ms >= gather[0] + gather[1] - 1e-9
    # The backward starts with the last layer; the last reduction is the embedding's.
    assert backward.exposed_ms >= gather[-1] - 1e-9 and weight.exposed_ms >= reduce[0] - 1e-9
    unhidden = sharded_op_ms(
        LLAMA_8B,
        dataclasses.replace(training, overlap_param_gather=False, overlap_grad_reduce=False),
        stage,
        (100.0, 150.0, 50.0),
        LINK,
    )
    assert [part.exposed_ms for part in unhidden] == pytest.approx([sum(gather), sum(gather), sum(reduce)])
    assert all(
        part.exposed_ms == 0
        for part in sharded_op_ms(LLAMA_8B, Training(data_parallel=8, zero=2), stage, (1, 1, 1), LINK)
    )


def test_zero_3s_reductions_hide_under_the_whole_backward_not_under_w_alone() -> None:
    # FSDP runs a unit's B and W together: a unit's reduce-scatter runs beside the B and W of the units
    # before it, so B and W together expose what the backward's whole exchange does beyond B + W.
    training = Training(data_parallel=8, zero=3)
    stage = stage_costs(LLAMA_8B, training, H100, (8, 8, 8, 8))[1]  # no embedding: every unit a layer
    units = stage_units(LLAMA_8B, training, stage)
    gather = [collective_ms(Collective.ALL_GATHER, unit * 2, 8, LINK) for unit in units][::-1]
    reduce = [collective_ms(Collective.REDUCE_SCATTER, unit * 4, 8, LINK) for unit in units][::-1]
    backward_ms, weight_ms = 60.0, 20.0
    _, backward, weight = sharded_op_ms(LLAMA_8B, training, stage, (30.0, backward_ms, weight_ms), LINK)
    compute = [(backward_ms + weight_ms) / len(units)] * len(units)
    whole = overlapped_ms(compute, gather, reduce) - (backward_ms + weight_ms)
    assert whole > 0 and backward.exposed_ms + weight.exposed_ms == pytest.approx(whole)
    # Hidden under W alone (the gathers not overlapped), the same reductions expose more.
    apart = dataclasses.replace(training, overlap_param_gather=False)
    alone = sharded_op_ms(LLAMA_8B, apart, stage, (30.0, backward_ms, weight_ms), LINK)[2]
    assert alone.exposed_ms > weight.exposed_ms


def test_from_model_adds_zero_3s_exposed_exchange_to_the_op_times() -> None:
    training = Training(data_parallel=8, zero=3)
    description = Description(LLAMA_8B, training, H100, Pipeline(devices=4, microbatches=8))
    untimed = derive(description)
    linked = dataclasses.replace(description, hardware=dataclasses.replace(H100, dp_bandwidth=50))
    timed = derive(linked)
    for kind in ("forward_times", "backward_times", "weight_times"):
        before, after = getattr(untimed.instance, kind), getattr(timed.instance, kind)
        assert all(late > early for early, late in zip(before, after, strict=True))
    assert_valid(run_heuristic("1f1b", timed.instance))
    lines = explain(linked, timed)
    assert any(line.startswith("model state per GPU: parameters x 2.25 bytes (2/8 weight") for line in lines)
    assert any("ZeRO 3 in the ops, over the data-parallel link (50 GB/s" in line for line in lines)
    assert any("not timed (give hardware.dp_bandwidth" in line for line in explain(description, untimed))
    assert "--zero 3" in command_line(linked) and "--dp-bandwidth 50" in command_line(linked)
