"""DualPipe and DualPipeV: torch's order, DeepSeek's published bubbles and activation memory, their pairs."""

from __future__ import annotations

import pytest

from pipesat.models import Instance, OpKey, Pair, pair_duration
from pipesat.solver.heuristics import NotApplicable, run_heuristic
from pipesat.solver.heuristics.dual_pipe import dual_pipe_orders, dual_pipe_v_orders
from tests.conftest import make_instance, moe_instance
from tests.solver.heuristics.helpers import run_valid


@pytest.mark.parametrize(("p", "m"), [(2, 4), (3, 7), (4, 8), (4, 10), (8, 20)])
def test_the_order_is_torchs_schedule_dualpipev(p: int, m: int) -> None:
    pytest.importorskip("torch")
    from pipesat.solver.torch.import_schedule import torch_builtin_orders

    instance = moe_instance(p, m)
    assert [list(order) for order in dual_pipe_v_orders(instance)] == torch_builtin_orders("DualPipeV", p, m, 2).orders


@pytest.mark.parametrize("p", [2, 4, 6, 8])
@pytest.mark.parametrize("microbatches_per_device", [2, 3])
@pytest.mark.parametrize("comm", [0.0, 0.2, 0.45])
def test_published_bubble_and_activation_memory(p: int, microbatches_per_device: int, comm: float) -> None:
    """DeepSeek's DualPipeV: bubble (PP/2 - 1)(F&B + B - 3W) and PP + 1 chunks of activations, where PP = 2p
    stages, B the whole backward and F&B an F overlapped with a whole backward, with F = B = W per chunk
    (the formula's setting) and no p2p; the bubble is the idlest device's (makespan less its busy time)."""
    instance = moe_instance(p, microbatches_per_device * p, comm=comm)
    schedule, metrics = run_valid("dualpipe-v", instance)
    forward, whole_backward, weight = 0.5, 1.0, 0.5  # per chunk: a device's F = B = W = 1, split over 2 chunks
    pair = Pair(OpKey("F", 0, 1), OpKey("B", 1, 0), with_weight=True)
    overlapped = pair_duration(instance, pair, split_backward=True)
    # Each chunk's all-to-all (comm / 2) hides under the other op's compute: the pair saves both.
    assert overlapped == pytest.approx(forward + whole_backward - comm)
    published = (2 * p / 2 - 1) * (overlapped + whole_backward - 3 * weight)
    assert max(metrics.makespan - busy for busy in metrics.busy) == pytest.approx(published)
    assert metrics.max_peak_memory == pytest.approx((2 * p + 1) * instance.activation_memory[0])
    assert schedule.has_pairs


def test_a_fused_backward_runs_whole_backwards_and_pairs_them() -> None:
    instance = make_instance(3, 6, chunks=2, placement="vshape", forward_comm_times=0.3, backward_comm_times=0.5)
    schedule, _ = run_valid("dualpipe-v", instance)
    assert not schedule.split_backward and schedule.has_pairs


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        ({"chunks": 2, "placement": "interleaved"}, "needs chunks 2 with vshape placement"),
        ({"chunks": 2, "placement": "vshape", "num_microbatches": 7}, "needs at least 2p = 8 microbatches"),
    ],
)
def test_what_it_needs(data: dict, reason: str) -> None:
    instance = Instance.from_dict({"num_devices": 4, "num_microbatches": 8} | data)
    with pytest.raises(NotApplicable, match=reason):
        run_heuristic("dualpipe-v", instance)


def test_it_beats_zb_v_on_a_moe_instance_and_loses_its_edge_without_communication() -> None:
    """With the all-to-all 30% of a layer, DualPipeV's pairs hide it and it beats ZB-V, as published;
    without communication a pair is its two ops one after the other and ZB-V's zero bubble wins."""
    moe = moe_instance(4, 16, p2p_time=0.05)
    assert run_valid("dualpipe-v", moe)[1].makespan < run_valid("zb-v", moe)[1].makespan
    plain = moe.with_changes(forward_comm_times=None, backward_comm_times=None)
    assert run_valid("dualpipe-v", plain)[1].makespan > run_valid("zb-v", plain)[1].makespan


@pytest.mark.parametrize("p", [2, 4, 6, 8])
@pytest.mark.parametrize("microbatches_per_device", [2, 3])
@pytest.mark.parametrize("comm", [0.0, 0.2, 0.45])
def test_dual_pipe_published_bubble_and_memory(p: int, microbatches_per_device: int, comm: float) -> None:
    """DeepSeek's DualPipe on PP = p devices: bubble (PP/2 - 1)(F&B + B - 3W) and PP + 1 stages of
    activations, with F = B = W per stage (the formula's setting), B the whole backward, no p2p. Each
    device holds a stage of both copies, twice a linear device's share of the model (here its weight
    gradients' work; `from-model`'s test counts the parameters)."""
    instance = moe_instance(p, microbatches_per_device * p, placement="bidirectional", comm=comm)
    schedule, metrics = run_valid("dualpipe", instance)
    forward, whole_backward, weight = 1.0, 2.0, 1.0  # per stage: each stage is a whole device's share
    pair = Pair(OpKey("F", 0, 1), OpKey("B", 2 * p - 1, instance.num_microbatches - 1), with_weight=True)
    overlapped = pair_duration(instance, pair, split_backward=True)
    assert overlapped == pytest.approx(forward + whole_backward - 2 * comm)
    published = (p / 2 - 1) * (overlapped + whole_backward - 3 * weight)
    assert max(metrics.makespan - busy for busy in metrics.busy) == pytest.approx(published)
    assert metrics.max_peak_memory == pytest.approx((p + 1) * instance.activation_memory[0])
    linear = instance.at_placement("linear")
    assert all(
        sum(instance.weight_times[s] for s in instance.stages_of(d)) == 2 * linear.weight_times[d] for d in range(p)
    )
    assert schedule.has_pairs


def test_dual_pipe_feeds_both_ends_in_mirrored_orders() -> None:
    """Rank r and rank p-1-r run the same order with the two copies' roles swapped: the first rank
    starts the first copy's microbatches, the last rank the replica's."""
    p, m = 4, 8
    orders = dual_pipe_orders(moe_instance(p, m, placement="bidirectional"))
    assert orders[0][0] == OpKey("F", 0, 0) and orders[p - 1][0] == OpKey("F", p, m // 2)

    def mirrored(key: OpKey) -> OpKey:
        stage = key.stage + p if key.stage < p else key.stage - p
        return key._replace(stage=stage, microbatch=(key.microbatch + m // 2) % m)

    for r in range(p):
        assert [
            Pair(mirrored(s.forward), mirrored(s.backward), s.with_weight) if isinstance(s, Pair) else mirrored(s)
            for s in orders[r]
        ] == list(orders[p - 1 - r])


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        ({"placement": "vshape"}, "needs chunks 2 with bidirectional placement"),
        ({"num_devices": 3, "num_microbatches": 6}, "needs an even number of devices"),
        ({"num_microbatches": 6}, "needs at least 2p = 8 microbatches, p each way"),
    ],
)
def test_what_dual_pipe_needs(data: dict, reason: str) -> None:
    instance = Instance.from_dict(
        {"num_devices": 4, "num_microbatches": 8, "chunks": 2, "placement": "bidirectional"} | data
    )
    with pytest.raises(NotApplicable, match=reason):
        run_heuristic("dualpipe", instance)


def test_only_dual_pipe_serves_the_bidirectional_placement() -> None:
    instance = moe_instance(4, 8, placement="bidirectional")
    for name in ("gpipe", "zb-v", "dualpipe-v"):
        with pytest.raises(NotApplicable, match="not the bidirectional placement"):
            run_heuristic(name, instance)


def test_dual_pipe_and_dual_pipe_v_beat_zb_v_and_1f1b_on_a_moe_model() -> None:
    """The same MoE model (a device's F = B = W = 1, all-to-all 30% of a layer, p2p 0.05) cut for each
    schedule's placement: both DualPipes hide the all-to-all under their pairs and beat ZB-V and 1F1B."""
    vshape = moe_instance(4, 16, p2p_time=0.05)
    makespans = {
        name: run_valid(name, vshape.at_placement(placement))[1].makespan
        for name, placement in [
            ("dualpipe", "bidirectional"),
            ("dualpipe-v", "vshape"),
            ("zb-v", "vshape"),
            ("1f1b", "linear"),
        ]
    }
    assert max(makespans["dualpipe"], makespans["dualpipe-v"]) < min(makespans["zb-v"], makespans["1f1b"])
