"""Ops: their kinds, identity, durations, overlapped pairs, the one dependency rule and the one memory rule."""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import NamedTuple

from pipesat.models.instance import Instance


class Kind(StrEnum):
    """An op's kind. A `StrEnum`: it prints, and files hold it, as its letter (`f"{Kind.F}2"` is `F2`),
    and it equals that letter, so a kind read from a file is `Kind(text)`."""

    F = "F"
    """The forward."""
    B = "B"
    """The backward: the input gradient, or the whole backward where there are no separate Ws."""
    W = "W"
    """The weight gradient, split out of the backward."""
    O = "O"  # noqa: E741 (the letter a schedule file holds, as F, B and W)
    """An offload: a (stage, microbatch)'s activations copied to host memory over the device's
    device-to-host link, after its F (docs/offload.md)."""
    R = "R"
    """A reload: the offloaded activations copied back over the host-to-device link, before its B."""


KINDS = (Kind.F, Kind.B, Kind.W)
"""Every kind of compute op (the ops a device's order runs), in the order ops of one time are listed."""

TRANSFER_KINDS = (Kind.O, Kind.R)
"""The kinds of a host link's transfers: each runs on its own direction of the device's link."""


def backward_kinds(split_backward: bool) -> tuple[Kind, ...]:
    """The ops a microbatch's backward of a stage runs as: B then W, or one B without separate Ws."""
    return (Kind.B, Kind.W) if split_backward else (Kind.B,)


def last_kind(split_backward: bool) -> Kind:
    """The kind of a microbatch's last op on a stage: its W, or its B without separate Ws."""
    return backward_kinds(split_backward)[-1]


def op_kinds(split_backward: bool) -> tuple[Kind, ...]:
    """The kinds of a schedule's ops: F and the backward's (`backward_kinds`)."""
    return (Kind.F, *backward_kinds(split_backward))


class OpKey(NamedTuple):
    """An op's identity: (kind, stage, microbatch). A tuple: equal to, and hashed as, the plain one."""

    kind: Kind
    stage: int
    microbatch: int


def op_label(key: OpKey) -> str:
    """`F(stage 2, mb 5)`: how messages name an op."""
    kind, stage, microbatch = key
    return f"{kind}(stage {stage}, mb {microbatch})"


def op_duration(instance: Instance, kind: Kind, stage: int, split_backward: bool) -> float:
    """An op's length. A B in a schedule without separate Ws is the whole backward (B + W)."""
    if kind == Kind.F:
        return instance.forward_times[stage]
    if kind == Kind.W:
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
        weight = (OpKey(Kind.W, self.backward.stage, self.backward.microbatch),) if self.with_weight else ()
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
    if step.kind == Kind.B:
        return [step, step._replace(kind=Kind.W)]
    return [step]


def pair_error(pair: Pair) -> str | None:
    """Why `pair` cannot run as an overlapped pair, or None when it can: the rule, in one place (an F
    and a B of different microbatches; a W inside is always the B's own)."""
    forward, backward = pair.forward, pair.backward
    if forward.kind != Kind.F or backward.kind != Kind.B:
        return f"a pair runs an F with a B, not {op_label(forward)} with {op_label(backward)}"
    if forward.microbatch == backward.microbatch:
        return f"{pair_label(pair)} pairs one microbatch with itself; a pair needs two microbatches"
    return None


def pair_label(pair: Pair) -> str:
    """`F(stage 2, mb 5) with B(stage 5, mb 1)`: how messages name a pair."""
    return " with ".join(op_label(key) for key in pair.op_keys())


def communication_time(instance: Instance, kind: Kind, stage: int) -> float:
    """The communication part of an op (the expert all-to-all): 0 for W and without comm times."""
    times = {Kind.F: instance.forward_comm_times, Kind.B: instance.backward_comm_times}.get(kind)
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
    forward_comm = communication_time(instance, Kind.F, forward.stage)
    backward_comm = communication_time(instance, Kind.B, backward.stage)
    backward_time = op_duration(instance, Kind.B, backward.stage, split_backward)
    if pair.with_weight:
        backward_time += op_duration(instance, Kind.W, backward.stage, split_backward)
    forward_compute = op_duration(instance, Kind.F, forward.stage, split_backward) - forward_comm
    backward_compute = backward_time - backward_comm
    return max(forward_compute, backward_comm) + max(backward_compute, forward_comm)


def dependency(key: OpKey, instance: Instance) -> OpKey | None:
    """The op that `key` waits for directly, or None for the F of its microbatch's first stage.

    The rule, in one place, along the microbatch's route (`Instance.route`: every stage, or one copy's
    of a bidirectional instance), first stage f and last l: F(s, j) after F(s-1, j) for s > f;
    B(l, j) after F(l, j); B(s, j) after B(s+1, j); W(s, j) after B(s, j). Between stages on
    different devices the wait adds `p2p_time`. A host-link transfer (docs/offload.md): O(s, j) after
    F(s, j), R(s, j) after O(s, j), on one device.
    """
    kind, stage, microbatch = key
    if kind == Kind.O:
        return OpKey(Kind.F, stage, microbatch)
    if kind == Kind.R:
        return OpKey(Kind.O, stage, microbatch)
    if kind == Kind.W:
        return OpKey(Kind.B, stage, microbatch)
    route = instance.route(microbatch)
    if kind == Kind.F:
        return OpKey(Kind.F, stage - 1, microbatch) if stage > route.start else None
    return OpKey(Kind.F, stage, microbatch) if stage == route.stop - 1 else OpKey(Kind.B, stage + 1, microbatch)


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


def memory_change(instance: Instance, kind: Kind, stage: int, split_backward: bool) -> float:
    """What an op does to its device's held memory: the memory model, in one place.

    F allocates the stage's activation memory (M_B) at its start; B frees M_B - M_W at its end and W
    frees the rest, M_W, at its end. Without separate W ops the B frees all of M_B. At equal times a
    free comes before an allocation (held memory is a half-open interval [start F, end of the free)).
    """
    activation = instance.activation_memory[stage]
    weight = instance.weight_memory[stage] if split_backward else 0.0
    if kind == Kind.F:
        return activation
    if kind == Kind.B:
        return -(activation - weight)
    return -weight


def offload_amount(instance: Instance, stage: int) -> float:
    """What an offload of `stage` moves to the host and its reload brings back: `offload_fraction`
    of the stage's activation memory (M_B)."""
    return instance.offload_fraction * instance.activation_memory[stage]


def transfer_time(instance: Instance, stage: int) -> float:
    """How long an offload or a reload of `stage` takes on its direction of the host link: the
    amount over `host_link_bandwidth` (memory units per time unit); 0 without a link."""
    bandwidth = instance.host_link_bandwidth
    return 0.0 if bandwidth is None else offload_amount(instance, stage) / bandwidth


def transfer_change(instance: Instance, kind: Kind, stage: int) -> float:
    """What a transfer does to its device's held memory: an offload frees `offload_amount` at its end
    (the tensors stay on the device while they are copied); a reload allocates it at its start."""
    amount = offload_amount(instance, stage)
    return -amount if kind == Kind.O else amount


def expected_op_keys(instance: Instance, split_backward: bool) -> list[OpKey]:
    """Every op a complete schedule of `instance` holds, F then B then W, by stage then microbatch."""
    kinds = op_kinds(split_backward)
    return [
        OpKey(kind, s, j) for kind in kinds for s in range(instance.num_stages) for j in instance.microbatches_at(s)
    ]
