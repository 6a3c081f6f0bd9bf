"""Placements: a name's stage-to-device list, and a placement read from a name, a list or nothing."""

from __future__ import annotations

import pytest

from pipesat.models import Instance, InstanceError
from pipesat.models.placement import parse_placement, placement_devices


@pytest.mark.parametrize(
    ("name", "p", "v", "expected"),
    [
        ("linear", 3, 1, (0, 1, 2)),
        ("interleaved", 3, 2, (0, 1, 2, 0, 1, 2)),
        ("interleaved", 2, 3, (0, 1, 0, 1, 0, 1)),
        ("vshape", 3, 2, (0, 1, 2, 2, 1, 0)),
        ("vshape", 1, 2, (0, 0)),
    ],
)
def test_named_placements(name: str, p: int, v: int, expected: tuple[int, ...]) -> None:
    assert placement_devices(name, p, v) == expected
    instance = Instance.from_dict({"num_devices": p, "num_microbatches": 1, "chunks": v, "placement": name})
    assert instance.placement == expected
    for device in range(p):
        assert [instance.placement[s] for s in instance.stages_of(device)] == [device] * v


def test_a_placement_is_read_from_nothing_a_name_or_a_list() -> None:
    assert parse_placement(None, 2, 1) == (0, 1)  # linear
    assert parse_placement(None, 2, 2) == (0, 1, 0, 1)  # interleaved
    assert parse_placement(" VShape ", 2, 2) == (0, 1, 1, 0)
    assert parse_placement([1, 0, 0, 1], 2, 2) == (1, 0, 0, 1)
    with pytest.raises(InstanceError, match="placement must be a name"):
        parse_placement(3, 2, 1)
