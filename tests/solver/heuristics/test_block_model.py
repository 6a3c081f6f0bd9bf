"""The building-block model: its interval and copies against what the block's ops need."""

from __future__ import annotations

from hypothesis import given, settings

from pipesat.models import Instance, Kind, op_duration
from pipesat.solver.heuristics.block_model import find_block
from pipesat.solver.heuristics.v_blocks import limit_budget
from tests.solver.heuristics.vshape import vshape, vshape_instances
from tests.strategies import PROPERTY_SETTINGS


def _busy(instance: Instance, device: int) -> float:
    """A device's work for one microbatch: F, B and W of each of its stages."""
    kinds = (Kind.F, Kind.B, Kind.W)
    return sum(op_duration(instance, kind, stage, True) for stage in instance.stages_of(device) for kind in kinds)


@given(instance=vshape_instances())
@settings(PROPERTY_SETTINGS, max_examples=12)
def test_the_interval_is_at_least_each_devices_work_for_one_microbatch(instance: Instance) -> None:
    block = find_block(instance, limit_budget(instance), time_limit=0.5)
    if block is None:
        return
    devices = range(instance.num_devices)
    assert all(block.interval >= _busy(instance, device) - 1e-9 for device in devices)
    # Each device's ops modulo T do not overlap: their starts on the circle, in order, leave room for each op.
    for device in devices:
        ops = sorted(
            (block.ticks[kind, stage] % block.period, op_duration(instance, kind, stage, True) * block.scale)
            for kind in (Kind.F, Kind.B, Kind.W)
            for stage in instance.stages_of(device)
        )
        for (start, length), (following, _) in zip(ops, [*ops[1:], (ops[0][0] + block.period, 0.0)], strict=True):
            assert start + length <= following + 1e-6


def test_a_limit_of_one_microbatch_a_stage_gives_one_copy_each_and_more_memory_a_shorter_interval() -> None:
    instance = vshape(4, 8)  # a chunk's activation is 0.5: a device's two stages hold 1.0
    tight = find_block(instance, [1.0] * 4, time_limit=2.0)
    roomy = find_block(instance, [3.0] * 4, time_limit=2.0)
    assert tight is not None and roomy is not None and tight.optimal and roomy.optimal
    assert tight.copies == (1,) * 8
    # One copy of stage 0 lives its whole chain: 16 F and B of 1 and its W; the other Ws fit in the gaps.
    assert tight.interval == 17.0
    assert roomy.interval == 6.0  # the work per microbatch: no idle time at steady state


def test_no_block_under_less_than_one_microbatch() -> None:
    assert find_block(vshape(2, 4), [0.9] * 2, time_limit=1.0) is None
