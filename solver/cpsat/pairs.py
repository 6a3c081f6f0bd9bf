"""Which overlapped pairs the CP-SAT model may choose, and how long each lasts in ticks.

A pair is worth offering only where it can gain: on an instance whose ops carry communication, an
F and a B of another microbatch on one device whose pair (`models.ops.pair_duration`) is shorter
than the two ops one after the other. A pair that gains nothing is never needed: running its F
then its B takes the device for the same time, ends the F earlier and frees the same memory at the
same moment. For the same reason the pair with the B's W inside is offered only where it is
shorter than the pair without it followed by the W, which happens when the F's communication
outlasts the B's compute; otherwise the W inside only delays the B's end.

With first-in-first-out microbatches (symmetry breaking) only pairs whose B is of an earlier
microbatch than their F can run together: any later microbatch's B waits, through its own
forwards, for this F of a later microbatch number. (On a bidirectional placement this holds for
the microbatches of one way; an F and a B of the two ways may pair in either order.) The candidates are every such pair, none left
out, so the model's optimum and bounds hold over all schedules with pairs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pipesat.models import Instance, Kind, OpKey, Pair, Step, op_duration, pair_duration
from pipesat.solver.cpsat.scale import TickScale, to_ticks


def pair_candidates(
    instance: Instance, ticks: Instance, scale: TickScale, split_backward: bool, first_in_first_out: bool
) -> dict[Pair, int]:
    """Every pair the model may run, with its length in ticks (`ticks` is the instance in ticks).

    The length is the exact one floored, like every time (a relaxation), and at most the pair's
    length from the times in ticks, so that orders timed at those (the hints) fit the model.
    """
    if not instance.has_communication:
        return {}
    p = instance.num_devices
    weight_variants = (False, True) if split_backward else (False,)
    lengths: dict[Pair, float] = {}  # by shape: the stages and the W, for microbatches 1 and 0
    for device in range(p):
        stages = instance.stages_of(device)
        for forward_stage in stages:
            for backward_stage in stages:
                for with_weight in weight_variants:
                    shape = Pair(OpKey(Kind.F, forward_stage, 1), OpKey(Kind.B, backward_stage, 0), with_weight)
                    length = pair_duration(instance, shape, split_backward)
                    apart = op_duration(instance, Kind.F, forward_stage, split_backward) + op_duration(
                        instance, Kind.B, backward_stage, split_backward
                    )
                    if with_weight:
                        weight = op_duration(instance, Kind.W, backward_stage, split_backward)
                        without = pair_duration(instance, shape._replace(with_weight=False), split_backward)
                        if length >= without + weight:
                            continue
                        apart += weight
                    if length < apart:
                        lengths[shape] = length
    candidates: dict[Pair, int] = {}
    for shape, length in lengths.items():
        in_ticks = min(to_ticks(length, scale.time), int(pair_duration(ticks, shape, split_backward)))
        for j in instance.microbatches_at(shape.forward.stage):
            for k in instance.microbatches_at(shape.backward.stage):
                same_route = instance.route(j) == instance.route(k)
                if j == k or (first_in_first_out and same_route and k > j):
                    continue
                pair = Pair(
                    shape.forward._replace(microbatch=j), shape.backward._replace(microbatch=k), shape.with_weight
                )
                candidates[pair] = in_ticks
    return candidates


def model_steps(orders: Sequence[Sequence[Step]], candidates: Mapping[Pair, int]) -> list[list[Step]]:
    """The orders as the model can run them: a pair of a kind it does not offer (one that gains
    nothing, see the module notes) runs as its ops one after the other, or without its W inside;
    this never makes an order slower."""
    shapes = {(pair.forward.stage, pair.backward.stage, pair.with_weight) for pair in candidates}
    steps: list[list[Step]] = []
    for order in orders:
        device_steps: list[Step] = []
        for step in order:
            if not isinstance(step, Pair) or (step.forward.stage, step.backward.stage, step.with_weight) in shapes:
                device_steps.append(step)
            elif step.with_weight and (step.forward.stage, step.backward.stage, False) in shapes:
                device_steps += [step._replace(with_weight=False), step.op_keys()[2]]
            else:
                device_steps += list(step.op_keys())
        steps.append(device_steps)
    return steps
