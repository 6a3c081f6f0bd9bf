"""Ops: their kinds, identity, durations, the one dependency rule and the one memory rule."""

from __future__ import annotations

from typing import NamedTuple

from pipesat.models.instance import Instance

KINDS = ("F", "B", "W")


class OpKey(NamedTuple):
    """An op's identity: (kind, stage, microbatch). A tuple: equal to, and hashed as, the plain one."""

    kind: str
    stage: int
    microbatch: int


def op_label(key: OpKey) -> str:
    """`F(stage 2, mb 5)`: how messages name an op."""
    kind, stage, microbatch = key
    return f"{kind}(stage {stage}, mb {microbatch})"


def op_duration(instance: Instance, kind: str, stage: int, split_backward: bool) -> float:
    """An op's length. A B in a schedule without separate Ws is the whole backward (B + W)."""
    if kind == "F":
        return instance.forward_times[stage]
    if kind == "W":
        return instance.weight_times[stage] if instance.weight_times is not None else 0.0
    if split_backward or instance.weight_times is None:
        return instance.backward_times[stage]
    return instance.backward_times[stage] + instance.weight_times[stage]


def dependency(key: OpKey, num_stages: int) -> OpKey | None:
    """The op that `key` waits for directly, or None for F of stage 0.

    The rule, in one place: F(s, j) after F(s-1, j); B(S-1, j) after F(S-1, j); B(s, j) after
    B(s+1, j); W(s, j) after B(s, j). Between stages on different devices the wait adds `p2p_time`.
    """
    kind, stage, microbatch = key
    if kind == "F":
        return OpKey("F", stage - 1, microbatch) if stage > 0 else None
    if kind == "B":
        return OpKey("F", stage, microbatch) if stage == num_stages - 1 else OpKey("B", stage + 1, microbatch)
    return OpKey("B", stage, microbatch)


def memory_change(instance: Instance, kind: str, stage: int, split_backward: bool) -> float:
    """What an op does to its device's held memory: the memory model, in one place.

    F allocates the stage's activation memory (M_B) at its start; B frees M_B - M_W at its end and W
    frees the rest, M_W, at its end. Without separate W ops the B frees all of M_B. At equal times a
    free comes before an allocation (held memory is a half-open interval [start F, end of the free)).
    """
    activation = instance.activation_memory[stage]
    weight = instance.weight_memory[stage] if split_backward else 0.0
    if kind == "F":
        return activation
    if kind == "B":
        return -(activation - weight)
    return -weight


def expected_op_keys(instance: Instance, split_backward: bool) -> list[OpKey]:
    """Every op a complete schedule of `instance` holds, F then B then W, by stage then microbatch."""
    kinds = KINDS if split_backward else KINDS[:2]
    return [
        OpKey(kind, s, j)
        for kind in kinds
        for s in range(instance.num_stages)
        for j in range(instance.num_microbatches)
    ]
