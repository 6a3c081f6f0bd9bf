"""Instance: normalisation, defaults, placements, memory limits and every rejected input."""

from __future__ import annotations

import math

import pytest
from hypothesis import given

from models import Instance, InstanceError
from models.instance import placement_devices
from tests.bad_inputs import BAD_INSTANCES
from tests.strategies import PROPERTY_SETTINGS, instance_dicts


@pytest.mark.parametrize(("data", "message"), BAD_INSTANCES)
def test_bad_input_is_rejected_with_its_message(data: dict, message: str) -> None:
    with pytest.raises(InstanceError) as caught:
        Instance.from_dict(data)
    text = str(caught.value)
    assert message in text
    assert "\n" not in text


def test_non_mapping_is_rejected() -> None:
    with pytest.raises(InstanceError, match="an instance must be a mapping of keys to values, got list"):
        Instance.from_dict([4, 8])


@pytest.mark.parametrize("missing", ["num_devices", "num_microbatches"])
def test_missing_count_is_named(missing: str) -> None:
    data = {"num_devices": 2, "num_microbatches": 2}
    del data[missing]
    with pytest.raises(InstanceError, match=f"missing {missing}"):
        Instance.from_dict(data)


def test_scalar_stands_for_a_list() -> None:
    instance = Instance.from_dict(
        {"num_devices": 3, "num_microbatches": 2, "forward_times": 1.5, "backward_times": 2, "weight_times": 0.5}
    )
    assert instance.forward_times == (1.5, 1.5, 1.5)
    assert instance.backward_times == (2.0, 2.0, 2.0)
    assert instance.weight_times == (0.5, 0.5, 0.5)


def test_defaults() -> None:
    instance = Instance.from_dict({"num_devices": 2, "num_microbatches": 4, "forward_times": [1, 3]})
    assert instance.chunks == 1
    assert instance.placement == (0, 1)
    assert instance.backward_times == (2.0, 6.0)  # twice the forward
    assert instance.weight_times is None and not instance.split_backward
    assert instance.p2p_time == 0.0
    assert instance.activation_memory == (1.0, 1.0)
    assert instance.weight_memory == (0.0, 0.0)
    assert instance.memory_limit is None


def test_split_defaults_weight_memory_to_half_the_activation() -> None:
    instance = Instance.from_dict(
        {"num_devices": 2, "num_microbatches": 2, "chunks": 2, "weight_times": 1, "activation_memory": [2, 4, 6, 8]}
    )
    assert instance.split_backward
    assert instance.weight_memory == (1.0, 2.0, 3.0, 4.0)


def test_chunked_default_activation_splits_a_device_evenly() -> None:
    instance = Instance.from_dict({"num_devices": 2, "num_microbatches": 2, "chunks": 2})
    assert instance.activation_memory == (0.5,) * 4


def test_earlier_tool_aliases() -> None:
    instance = Instance.from_dict({"num_stages": 5, "num_batches": 7})
    assert (instance.num_devices, instance.num_microbatches) == (5, 7)
    same = Instance.from_dict({"num_stages": 5, "num_devices": 5, "num_batches": 7})
    assert same == instance


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


@pytest.mark.parametrize(("name", "v"), [("linear", 1), ("interleaved", 2), ("vshape", 2)])
def test_placement_name_recognises_named_placements(name: str, v: int) -> None:
    instance = Instance.from_dict({"num_devices": 3, "num_microbatches": 1, "chunks": v, "placement": name})
    assert instance.placement_name() == name


def test_placement_name_is_case_insensitive_and_chunks_default_to_interleaved() -> None:
    vshape = Instance.from_dict({"num_devices": 2, "num_microbatches": 1, "placement": " VShape ", "chunks": 2})
    assert vshape.placement == (0, 1, 1, 0)
    chunked = Instance.from_dict({"num_devices": 2, "num_microbatches": 1, "chunks": 2})
    assert chunked.placement == (0, 1, 0, 1)


def test_unknown_key_without_a_close_match_lists_the_known_keys() -> None:
    with pytest.raises(InstanceError, match="unknown key 'zzz'; known keys: num_devices, num_microbatches, chunks"):
        Instance.from_dict({"num_devices": 2, "num_microbatches": 1, "zzz": 1})


def test_explicit_placement_infers_chunks() -> None:
    instance = Instance.from_dict({"num_devices": 2, "num_microbatches": 1, "placement": [1, 0, 0, 1]})
    assert instance.chunks == 2
    assert instance.stages_of(0) == [1, 2]
    assert instance.stages_of(1) == [0, 3]
    assert instance.placement_name() == "custom"


def test_one_f_one_b_peak_by_hand() -> None:
    # Device d holds min(p - d, m) microbatches of all its stages' activations; the largest is the peak.
    assert Instance.from_dict({"num_devices": 4, "num_microbatches": 8}).one_f_one_b_peak() == 4.0
    assert Instance.from_dict({"num_devices": 4, "num_microbatches": 2}).one_f_one_b_peak() == 2.0
    uneven = Instance.from_dict({"num_devices": 3, "num_microbatches": 8, "activation_memory": [1, 5, 10]})
    assert uneven.one_f_one_b_peak() == max(3 * 1, 2 * 5, 1 * 10)
    chunked = Instance.from_dict(
        {"num_devices": 2, "num_microbatches": 8, "chunks": 2, "activation_memory": [1, 2, 3, 4]}
    )
    assert chunked.one_f_one_b_peak() == max(2 * (1 + 3), 1 * (2 + 4))


@pytest.mark.parametrize(("text", "factor"), [("0.5x", 0.5), ("1x", 1.0), (" 1.5X ", 1.5)])
def test_relative_memory_limit_resolves_against_one_f_one_b_peak(text: str, factor: float) -> None:
    data = {"num_devices": 3, "num_microbatches": 8, "activation_memory": [1, 5, 10], "memory_limit": text}
    instance = Instance.from_dict(data)
    assert instance.one_f_one_b_peak() == 10.0
    assert instance.memory_limit == pytest.approx(factor * 10.0)


@pytest.mark.parametrize(("value", "expected"), [(7, 7.0), (2.5, 2.5), ("3", 3.0), (None, None), ("none", None)])
def test_absolute_memory_limit(value: object, expected: float | None) -> None:
    assert Instance.from_dict({"num_devices": 2, "num_microbatches": 2, "memory_limit": value}).memory_limit == expected


def test_with_changes_validates_again() -> None:
    instance = Instance.from_dict({"num_devices": 2, "num_microbatches": 2})
    assert instance.with_changes(num_microbatches=5).num_microbatches == 5
    with pytest.raises(InstanceError, match="num_microbatches must be at least 1"):
        instance.with_changes(num_microbatches=0)


@PROPERTY_SETTINGS
@given(instance_dicts())
def test_to_dict_round_trips_and_is_fully_normalised(data: dict) -> None:
    instance = Instance.from_dict(data)
    normalised = instance.to_dict()
    assert Instance.from_dict(normalised) == instance
    stages = instance.num_devices * instance.chunks
    assert isinstance(normalised["placement"], list) and len(normalised["placement"]) == stages
    for key in ("forward_times", "backward_times", "activation_memory", "weight_memory"):
        assert len(normalised[key]) == stages
        assert all(math.isfinite(x) and x >= 0 for x in normalised[key])
    assert (normalised["weight_times"] is not None) == ("weight_times" in data)
