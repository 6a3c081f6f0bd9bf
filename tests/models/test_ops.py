"""Ops: durations, the expected op set, the one dependency rule and the one memory rule."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipesat.models import (
    KINDS,
    Instance,
    Kind,
    OpKey,
    Pair,
    dependency,
    expected_op_keys,
    last_kind,
    memory_change,
    op_duration,
    op_kinds,
    pair_duration,
    step_keys,
)
from pipesat.models.ops import split_out_weight
from tests.conftest import make_instance
from tests.strategies import PROPERTY_SETTINGS, instances


def test_a_kind_is_written_as_its_letter() -> None:
    # Labels, schedule files and torch CSV cells hold the letter: a (str, Enum) would print `Kind.F`.
    assert [f"{kind}2" for kind in KINDS] == ["F2", "B2", "W2"]
    assert json.dumps([Kind.B]) == '["B"]' and Kind("W") is Kind.W and Kind.F == "F"


def test_the_kinds_of_a_split_and_a_fused_schedule() -> None:
    assert op_kinds(split_backward=True) == KINDS == (Kind.F, Kind.B, Kind.W)
    assert op_kinds(split_backward=False) == (Kind.F, Kind.B)
    assert (last_kind(True), last_kind(False)) == (Kind.W, Kind.B)


def test_op_duration_fused_backward_is_b_plus_w(split_instance: Instance) -> None:
    assert op_duration(split_instance, "F", 0, split_backward=True) == 1.0
    assert op_duration(split_instance, "B", 0, split_backward=True) == 1.0
    assert op_duration(split_instance, "W", 0, split_backward=True) == 0.5
    assert op_duration(split_instance, "B", 0, split_backward=False) == 1.5


def test_op_duration_without_weight_times(one_f_one_b_instance: Instance) -> None:
    assert op_duration(one_f_one_b_instance, "B", 3, split_backward=False) == 2.0


def test_expected_op_keys(split_instance: Instance) -> None:
    fused = expected_op_keys(split_instance, split_backward=False)
    split = expected_op_keys(split_instance, split_backward=True)
    assert len(fused) == 2 * 2 * 2 and len(set(fused)) == len(fused)
    assert len(split) == 3 * 2 * 2 and set(fused) < set(split)
    assert {key for key in split if key[0] == "W"} == {("W", s, j) for s in range(2) for j in range(2)}


@pytest.mark.parametrize(
    ("key", "before"),
    [
        (("F", 0, 3), None),  # the first forward waits for nothing
        (("F", 2, 3), ("F", 1, 3)),  # a forward waits for the stage before
        (("B", 3, 3), ("F", 3, 3)),  # the last stage's backward waits for its own forward
        (("B", 1, 3), ("B", 2, 3)),  # any other backward waits for the stage after
        (("W", 1, 3), ("B", 1, 3)),  # a W waits for its own B
        (("W", 3, 3), ("B", 3, 3)),
    ],
)
def test_dependency_of_each_kind(key: tuple[str, int, int], before: tuple[str, int, int] | None) -> None:
    assert dependency(key, make_instance(4, 8)) == before


@pytest.mark.parametrize("num_stages", [1, 2, 5])
def test_dependencies_chain_a_microbatch_down_and_back_with_w_beside_its_b(num_stages: int) -> None:
    # Following the rule back from B of stage 0 walks F up the stages and B down again, once each.
    instance = make_instance(num_stages, 8)
    chain = [("B", 0, 7)]
    while (before := dependency(chain[-1], instance)) is not None:
        chain.append(before)
    forwards = [("F", s, 7) for s in range(num_stages)]
    backwards = [("B", s, 7) for s in reversed(range(num_stages))]
    assert chain[::-1] == forwards + backwards
    for stage in range(num_stages):
        assert dependency(("W", stage, 7), instance) == ("B", stage, 7)


@PROPERTY_SETTINGS
@given(instances(), st.booleans())
def test_every_dependency_is_an_op_of_the_same_microbatch_in_the_schedule(instance: Instance, split: bool) -> None:
    split = split and instance.split_backward
    keys = set(expected_op_keys(instance, split))
    for key in keys:
        before = dependency(key, instance)
        assert before is None or (before in keys and before[2] == key[2])


@PROPERTY_SETTINGS
@given(instances(), st.booleans())
def test_each_microbatch_frees_what_it_allocates(instance: Instance, split: bool) -> None:
    split = split and instance.split_backward
    kinds = op_kinds(split)
    for stage in range(instance.num_stages):
        changes = {kind: memory_change(instance, kind, stage, split) for kind in kinds}
        assert changes["F"] == instance.activation_memory[stage] > 0  # F allocates M_B
        assert all(changes[kind] <= 0 for kind in kinds[1:])  # B and W only free
        assert sum(changes.values()) == 0


def test_memory_change_of_split_and_fused_backward(split_instance: Instance) -> None:
    # M_B = 2, M_W = 1: with W ops B frees M_B - M_W and W the rest; without them B frees all of M_B.
    assert memory_change(split_instance, "F", 1, split_backward=True) == 2
    assert memory_change(split_instance, "B", 1, split_backward=True) == -1
    assert memory_change(split_instance, "W", 1, split_backward=True) == -1
    assert memory_change(split_instance, "B", 1, split_backward=False) == -2


def _pair_instance(forward_comm: float, backward_comm: float, split: bool = True) -> Instance:
    """One device: F = 2, B = 3 (the activation part; W = 1), with the given communication parts."""
    weight = {"weight_times": 1} if split else {}
    return Instance.from_dict(
        {
            "num_devices": 1,
            "num_microbatches": 2,
            "forward_times": 2,
            "backward_times": 3,
            **weight,
            "forward_comm_times": forward_comm,
            "backward_comm_times": backward_comm,
        }
    )


PAIR = Pair(OpKey("F", 0, 1), OpKey("B", 0, 0))


@pytest.mark.parametrize(
    ("forward_comm", "backward_comm", "expected"),
    [
        (0, 0, 5),  # nothing to hide: F + B
        (0.5, 1, 3.5),  # each hides under the other's compute: the computes, 1.5 + 2
        (1.5, 1, 3),  # B's communication outlasts F's compute: max(0.5, 1) + max(2, 1.5)
        (2, 3, 5),  # all communication: nothing to hide it under, the communications add up
    ],
)
def test_pair_duration_hides_each_communication_under_the_other_compute(
    forward_comm: float, backward_comm: float, expected: float
) -> None:
    instance = _pair_instance(forward_comm, backward_comm)
    forward_compute, backward_compute = 2 - forward_comm, 3 - backward_comm
    length = pair_duration(instance, PAIR, split_backward=True)
    assert length == max(forward_compute, backward_comm) + max(backward_compute, forward_comm)
    assert length == expected
    assert length >= forward_compute + backward_compute and length >= forward_comm + backward_comm
    assert length <= 2 + 3


def test_pair_with_weight_inside_hides_more_only_when_the_forward_communication_outlasts_b() -> None:
    with_weight = PAIR._replace(with_weight=True)
    # B's compute (3) covers F's communication (1.9): the W inside adds its own time.
    covered = _pair_instance(1.9, 0)
    assert pair_duration(covered, with_weight, True) == pair_duration(covered, PAIR, True) + 1
    # B's compute (3 - 2.5) does not: the W's compute hides the rest of it.
    uncovered = _pair_instance(1.5, 2.5)
    assert pair_duration(uncovered, PAIR, True) == max(0.5, 2.5) + max(0.5, 1.5)
    assert pair_duration(uncovered, with_weight, True) == max(0.5, 2.5) + max(1.5, 1.5)
    # In a schedule that fuses the backward, the pair's B is the whole backward (B + W = 4).
    assert pair_duration(_pair_instance(0.5, 1), PAIR, False) == max(1.5, 1) + max(3, 0.5)
    assert pair_duration(_pair_instance(0.5, 1, split=False), PAIR, False) == max(1.5, 1) + max(2, 0.5)


def test_split_out_weight_keeps_a_pairs_w_inside() -> None:
    assert split_out_weight(OpKey("B", 1, 2)) == [OpKey("B", 1, 2), OpKey("W", 1, 2)]
    assert split_out_weight(OpKey("F", 1, 2)) == [OpKey("F", 1, 2)]
    assert split_out_weight(PAIR) == [PAIR._replace(with_weight=True)]
    assert PAIR._replace(with_weight=True).op_keys() == (OpKey("F", 0, 1), OpKey("B", 0, 0), OpKey("W", 0, 0))
    assert step_keys(OpKey("F", 0, 0)) == (OpKey("F", 0, 0),)
