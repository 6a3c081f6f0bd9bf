"""The pairs the CP-SAT model may run: only where they gain, every one of them, and hints that fit."""

from __future__ import annotations

from pipesat.models import OpKey, Pair, pair_duration
from pipesat.solver.cpsat.pairs import model_steps, pair_candidates
from pipesat.solver.cpsat.scale import choose_scale, scaled_instance
from tests.conftest import make_instance, moe_instance


def _candidates(instance, split: bool, first_in_first_out: bool = True) -> dict[Pair, int]:
    scale = choose_scale(instance, "makespan")
    return pair_candidates(instance, scaled_instance(instance, scale), scale, split, first_in_first_out)


def test_no_communication_no_pairs() -> None:
    assert _candidates(make_instance(2, 4, chunks=2, placement="vshape"), False) == {}


def test_every_pair_of_a_later_forward_with_an_earlier_backward_on_one_device() -> None:
    instance = moe_instance(2, 3)  # B's compute covers F's all-to-all: no pair with its W inside gains
    candidates = _candidates(instance, split=True)
    device_stages = {0: (0, 3), 1: (1, 2)}
    expected = {
        Pair(OpKey("F", f, j), OpKey("B", b, k))
        for stages in device_stages.values()
        for f in stages
        for b in stages
        for j in range(3)
        for k in range(j)
    }
    assert set(candidates) == expected
    scale = choose_scale(instance, "makespan").time
    assert all(length == pair_duration(instance, pair, True) * scale for pair, length in candidates.items())
    # Without symmetry breaking a backward of a later microbatch may be paired too.
    assert len(_candidates(instance, split=True, first_in_first_out=False)) == 2 * len(expected)


def test_the_w_inside_is_offered_only_where_it_hides_the_forwards_all_to_all() -> None:
    # F's all-to-all (0.9) outlasts B's compute (1 - 0.5): the W's compute hides the rest.
    times = {"forward_times": 1, "backward_times": 1, "weight_times": 1}
    instance = make_instance(1, 2, **times, forward_comm_times=0.9, backward_comm_times=0.5)
    shapes = {pair.with_weight for pair in _candidates(instance, split=True)}
    assert shapes == {False, True}
    fused = _candidates(instance, split=False)
    assert fused and not any(pair.with_weight for pair in fused)


def test_hints_run_pairs_the_model_does_not_offer_one_op_after_the_other() -> None:
    instance = moe_instance(2, 3)
    candidates = _candidates(instance, split=True)
    offered = Pair(OpKey("F", 0, 1), OpKey("B", 0, 0))
    with_weight = offered._replace(with_weight=True)  # not offered: it would only delay B's end
    same_device_f = OpKey("F", 0, 2)
    orders = [[offered, with_weight, same_device_f]]
    assert model_steps(orders, candidates) == [[offered, offered, OpKey("W", 0, 0), same_device_f]]
    assert model_steps(orders, {}) == [[*offered.op_keys(), *with_weight.op_keys(), same_device_f]]
