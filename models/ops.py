"""Ops: their kinds, identity, durations, overlapped pairs, the one dependency rule and the one memory rule."""

from __future__ import annotations

from collections.abc import Mapping
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


class Pair(NamedTuple):
    """An overlapped pair: the F of one microbatch run together with the B of another, on one device.

    With `with_weight` the B's own W runs inside the pair too (DualPipe's F&B chunk with the whole
    backward); otherwise a split schedule runs that W on its own later. The pair's ops all start and
    end together and last `pair_duration`. Its F and B are of different microbatches.
    """

    forward: OpKey
    backward: OpKey
    with_weight: bool = False

    def op_keys(self) -> tuple[OpKey, ...]:
        """The ops in the pair: F, B, and the B's W when it is inside."""
        weight = (OpKey("W", self.backward.stage, self.backward.microbatch),) if self.with_weight else ()
        return (self.forward, self.backward, *weight)


Step = OpKey | Pair
"""One entry of a device's order: an op run alone, or an overlapped pair."""


def step_keys(step: Step) -> tuple[OpKey, ...]:
    """The ops a step runs: the op itself, or a pair's ops."""
    return step.op_keys() if isinstance(step, Pair) else (step,)


def split_out_weight(step: Step) -> list[Step]:
    """A step of a fused-backward schedule in a split one, the same work: a whole-backward B becomes
    its B then its W; a pair's whole backward keeps its W inside the pair."""
    if isinstance(step, Pair):
        return [step._replace(with_weight=True)]
    if step.kind == "B":
        return [step, step._replace(kind="W")]
    return [step]


def pair_error(pair: Pair) -> str | None:
    """Why `pair` cannot run as an overlapped pair, or None when it can: the rule, in one place (an F
    and a B of different microbatches; a W inside is always the B's own)."""
    forward, backward = pair.forward, pair.backward
    if forward.kind != "F" or backward.kind != "B":
        return f"a pair runs an F with a B, not {op_label(forward)} with {op_label(backward)}"
    if forward.microbatch == backward.microbatch:
        return f"{pair_label(pair)} pairs one microbatch with itself; a pair needs two microbatches"
    return None


def pair_label(pair: Pair) -> str:
    """`F(stage 2, mb 5) with B(stage 5, mb 1)`: how messages name a pair."""
    return " with ".join(op_label(key) for key in pair.op_keys())


def communication_time(instance: Instance, kind: str, stage: int) -> float:
    """The communication part of an op (the expert all-to-all): 0 for W and without comm times."""
    times = {"F": instance.forward_comm_times, "B": instance.backward_comm_times}.get(kind)
    return 0.0 if times is None else times[stage]


def pair_duration(instance: Instance, pair: Pair, split_backward: bool) -> float:
    """How long an overlapped pair lasts: the overlap model, in one place (docs/design.md, pairs).

    Each op is compute then communication (F: compute c_F with all-to-all a_F; B, with its W when
    inside the pair: c_B with a_B). The pair runs on two streams, a compute stream and a
    communication stream: B's communication hides under F's compute and F's under B's compute,
    each as far as it fits, so the pair lasts `max(c_F, a_B) + max(c_B, a_F)`: at least the sum of
    the computes, at least the sum of the communications, and never longer than the two ops one
    after the other. Without communication it is exactly F + B (no gain, no loss).
    """
    forward, backward = pair.forward, pair.backward
    forward_comm = communication_time(instance, "F", forward.stage)
    backward_comm = communication_time(instance, "B", backward.stage)
    backward_time = op_duration(instance, "B", backward.stage, split_backward)
    if pair.with_weight:
        backward_time += op_duration(instance, "W", backward.stage, split_backward)
    forward_compute = op_duration(instance, "F", forward.stage, split_backward) - forward_comm
    backward_compute = backward_time - backward_comm
    return max(forward_compute, backward_comm) + max(backward_compute, forward_comm)


def dependency(key: OpKey, instance: Instance) -> OpKey | None:
    """The op that `key` waits for directly, or None for the F of its microbatch's first stage.

    The rule, in one place, along the microbatch's route (`Instance.route`: every stage, or one copy's
    of a bidirectional instance), first stage f and last l: F(s, j) after F(s-1, j) for s > f;
    B(l, j) after F(l, j); B(s, j) after B(s+1, j); W(s, j) after B(s, j). Between stages on
    different devices the wait adds `p2p_time`.
    """
    kind, stage, microbatch = key
    if kind == "W":
        return OpKey("B", stage, microbatch)
    route = instance.route(microbatch)
    if kind == "F":
        return OpKey("F", stage - 1, microbatch) if stage > route.start else None
    return OpKey("F", stage, microbatch) if stage == route.stop - 1 else OpKey("B", stage + 1, microbatch)


def input_ready(key: OpKey, instance: Instance, end: Mapping[OpKey, float]) -> float | None:
    """When `key`'s input is there, given the end times of the ops placed so far: 0 for a microbatch's
    first F, the end of the op it waits for (`dependency`) plus `p2p_time` when that op ran on another
    device, or None while that op is not placed. The list schedulers that place ops in time order use it."""
    before = dependency(key, instance)
    if before is None:
        return 0.0
    if before not in end:
        return None
    across = instance.placement[before.stage] != instance.placement[key.stage]
    return end[before] + (instance.p2p_time if across else 0.0)


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
        OpKey(kind, s, j) for kind in kinds for s in range(instance.num_stages) for j in instance.microbatches_at(s)
    ]
