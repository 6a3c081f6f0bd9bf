"""Instance: normalisation, defaults, placements, memory limits and every rejected input."""

from __future__ import annotations

import math
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipesat.models import Instance, InstanceError
from tests.bad_inputs import BAD_INSTANCES
from tests.conftest import make_instance
from tests.strategies import PROPERTY_SETTINGS, TIMES, instance_dicts


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


def test_weight_times_alone_split_the_same_whole_backward() -> None:
    instance = Instance.from_dict({"num_devices": 2, "num_microbatches": 2, "forward_times": [1, 3], "weight_times": 1})
    assert instance.backward_times == (1.0, 5.0)  # B + W = 2F
    with pytest.raises(InstanceError, match=r"weight_times\[0\] = 2 leaves nothing of the whole backward"):
        Instance.from_dict({"num_devices": 2, "num_microbatches": 2, "weight_times": 2})


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
    # 1F1B on the model cut linearly: device k holds min(p - k, m) microbatches of stages kv..kv+v-1.
    assert Instance.from_dict({"num_devices": 4, "num_microbatches": 8}).one_f_one_b_peak() == 4.0
    assert Instance.from_dict({"num_devices": 4, "num_microbatches": 2}).one_f_one_b_peak() == 2.0
    uneven = Instance.from_dict({"num_devices": 3, "num_microbatches": 8, "activation_memory": [1, 5, 10]})
    assert uneven.one_f_one_b_peak() == max(3 * 1, 2 * 5, 1 * 10)
    chunked = Instance.from_dict(
        {"num_devices": 2, "num_microbatches": 8, "chunks": 2, "activation_memory": [1, 2, 3, 4]}
    )
    assert chunked.one_f_one_b_peak() == max(2 * (1 + 2), 1 * (3 + 4))
    # The same model at every placement has the same 1x: the interleaved cut above, and a V cut.
    vshape = chunked.with_changes(placement="vshape")
    assert vshape.one_f_one_b_peak() == chunked.one_f_one_b_peak()


@pytest.mark.parametrize(("text", "factor"), [("0.5x", 0.5), ("1x", 1.0), (" 1.5X ", 1.5)])
def test_relative_memory_limit_resolves_against_one_f_one_b_peak(text: str, factor: float) -> None:
    data = {"num_devices": 3, "num_microbatches": 8, "activation_memory": [1, 5, 10], "memory_limit": text}
    instance = Instance.from_dict(data)
    assert instance.one_f_one_b_peak() == 10.0
    assert instance.memory_limit == pytest.approx((factor * 10.0,) * 3)


@pytest.mark.parametrize(("value", "expected"), [(7, 7.0), (2.5, 2.5), ("3", 3.0), (None, None), ("none", None)])
def test_absolute_memory_limit(value: object, expected: float | None) -> None:
    limits = Instance.from_dict({"num_devices": 2, "num_microbatches": 2, "memory_limit": value}).memory_limit
    assert limits == (None if expected is None else (expected, expected))


@pytest.mark.parametrize("value", [[4, "6", "0.5x"], "4, 6, 0.5x"])
def test_a_limit_per_device_from_a_list_or_comma_separated_text(value: object) -> None:
    data = {"num_devices": 3, "num_microbatches": 8, "activation_memory": [1, 5, 10], "memory_limit": value}
    instance = Instance.from_dict(data)
    assert instance.memory_limit == (4.0, 6.0, 5.0)
    assert [instance.limit_of(d) for d in range(3)] == [4.0, 6.0, 5.0]
    assert instance.over_limit([4.0, 6.5, 5.0]) == [1]
    assert instance.to_dict()["memory_limit"] == [4.0, 6.0, 5.0]
    assert Instance.from_dict(instance.to_dict()) == instance


def test_a_uniform_limit_is_written_as_one_number() -> None:
    instance = Instance.from_dict({"num_devices": 3, "num_microbatches": 8, "memory_limit": [2, 2, 2]})
    assert instance.to_dict()["memory_limit"] == 2.0


def test_a_list_of_limits_must_have_one_per_device() -> None:
    with pytest.raises(InstanceError, match="memory_limit lists 2 limits but there are 3 devices"):
        Instance.from_dict({"num_devices": 3, "num_microbatches": 8, "memory_limit": [1, 2]})


@pytest.mark.parametrize(
    ("unit", "limit", "expected"),
    [("MiB", "12GiB", 12 * 1024.0), ("GiB", "512 MiB", 0.5), ("MB", "1GB", 1000.0), ("GiB", "3", 3.0)],
)
def test_a_limit_with_a_unit_is_converted_to_the_instance_memory_unit(unit: str, limit: str, expected: float) -> None:
    data = {"num_devices": 2, "num_microbatches": 2, "memory_unit": unit, "memory_limit": limit}
    assert Instance.from_dict(data).memory_limit == pytest.approx((expected, expected))


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"memory_unit": "gigs"}, "memory_unit 'gigs' is not a unit pipesat knows; use one of B, KiB"),
        ({"time_unit": "minutes"}, "time_unit 'minutes' is not a unit pipesat knows; use one of s, ms"),
        ({"memory_unit": "MiB", "memory_limit": "12 parsecs"}, "'parsecs' is not a memory unit"),
        ({"memory_limit": "12GiB"}, "has a unit but the instance's memory has none"),
    ],
)
def test_bad_units_say_what_is_known(data: dict, message: str) -> None:
    with pytest.raises(InstanceError, match=message):
        Instance.from_dict({"num_devices": 2, "num_microbatches": 2, **data})


def test_units_round_trip_at_the_top_level_and_metadata_descriptions_are_not_units() -> None:
    instance = Instance.from_dict({"num_devices": 2, "num_microbatches": 2, "time_unit": "ms", "memory_unit": "GiB"})
    assert (instance.time_unit, instance.memory_unit) == ("ms", "GiB")
    assert Instance.from_dict(instance.to_dict()) == instance
    described = {"num_devices": 2, "num_microbatches": 2, "metadata": {"memory_unit": "ZB code units"}}
    assert Instance.from_dict(described).memory_unit == ""
    earlier = {"num_devices": 2, "num_microbatches": 2, "metadata": {"time_unit": "ms"}}
    assert Instance.from_dict(earlier).time_unit == "ms"


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
    if instance.bidirectional:  # named: the list is a V's, the name says which way microbatches go
        assert normalised["placement"] == "bidirectional"
    else:
        assert isinstance(normalised["placement"], list) and len(normalised["placement"]) == stages
    for key in ("forward_times", "backward_times", "activation_memory", "weight_memory"):
        assert len(normalised[key]) == stages
        assert all(math.isfinite(x) and x >= 0 for x in normalised[key])
    assert (normalised["weight_times"] is not None) == ("weight_times" in data)


@PROPERTY_SETTINGS
@given(
    st.integers(1, 6),
    st.integers(1, 9),
    st.sampled_from([("interleaved", 2), ("interleaved", 3), ("vshape", 2)]),
    st.tuples(TIMES, TIMES, TIMES, TIMES),
)
def test_one_model_at_every_placement_has_the_same_work_and_budget(
    p: int, m: int, layout: tuple[str, int], numbers: tuple[float, float, float, float]
) -> None:
    # Numbers given once are a device's share of the model: re-cut into chunks, each stage gets its part,
    # so every device does the same work and 1x is the same budget as on the linear cut.
    forward, backward, weight, activation = numbers
    model = {"forward_times": forward, "backward_times": backward, "weight_times": weight}
    linear = make_instance(p, m, **model, activation_memory=activation)
    placement, chunks = layout
    recut = make_instance(p, m, **model, activation_memory=activation, chunks=chunks, placement=placement)
    for d in range(p):
        work = [
            sum(i.forward_times[s] + i.backward_times[s] + i.weight_times[s] for s in i.stages_of(d))
            for i in (linear, recut)
        ]
        assert work[1] == pytest.approx(work[0])
    assert recut.one_f_one_b_peak() == pytest.approx(linear.one_f_one_b_peak())
    assert recut.with_changes(memory_limit="0.5x").memory_limit == pytest.approx(
        linear.with_changes(memory_limit="0.5x").memory_limit
    )


def test_per_device_lists_on_a_chunked_cut_are_refused_with_the_way_out() -> None:
    with pytest.raises(InstanceError, match=r"one number \(a device's share, split over its 2 chunks\) also works"):
        make_instance(2, 4, chunks=2, forward_times=[1, 2])


def test_communication_parts_are_per_stage_and_round_trip() -> None:
    instance = make_instance(
        2, 4, chunks=2, placement="vshape", forward_comm_times=0.4, backward_comm_times=[0, 0.2, 0.3, 0.1]
    )
    assert instance.forward_comm_times == (0.2, 0.2, 0.2, 0.2)  # a device's share, split over its chunks
    assert instance.backward_comm_times == (0, 0.2, 0.3, 0.1)
    assert instance.has_communication
    assert Instance.from_dict(instance.to_dict()) == instance
    plain = make_instance(2, 4)
    assert not plain.has_communication and "forward_comm_times" not in plain.to_dict()
    assert not make_instance(2, 4, forward_comm_times=0).has_communication


def test_the_same_model_at_another_placement() -> None:
    v_cut = make_instance(
        4, 8, chunks=2, placement="vshape", forward_times=[1, 2, 3, 4, 5, 6, 7, 8], weight_times=0.5, memory_limit="1x"
    )
    interleaved = v_cut.at_placement("interleaved")
    assert interleaved.forward_times == v_cut.forward_times and interleaved.placement_name() == "interleaved"
    linear = v_cut.at_placement("linear")
    assert linear.forward_times == (3, 7, 11, 15)  # each device's share of the model, exactly
    assert linear.at_placement("vshape").forward_times == (1.5, 1.5, 3.5, 3.5, 5.5, 5.5, 7.5, 7.5)  # split evenly
    for cut in (interleaved, linear):
        assert cut.memory_limit == v_cut.memory_limit and cut.one_f_one_b_peak() == v_cut.one_f_one_b_peak()
        assert sum(cut.weight_times or ()) == sum(v_cut.weight_times or ())
    assert v_cut.at_placement("interleaved", chunks=4).chunks == 4
    with pytest.raises(InstanceError, match="placement 'vshape' needs chunks 2"):
        linear.at_placement("vshape", chunks=3)


def test_a_bidirectional_instance_holds_its_model_twice_and_runs_half_its_microbatches_each_way() -> None:
    instance = make_instance(2, 4, chunks=2, placement="bidirectional", forward_times=[1, 2], weight_times=0.5)
    assert instance.placement == (0, 1, 1, 0) and instance.placement_name() == "bidirectional"
    assert instance.forward_times == (1, 2, 1, 2)  # stage 2 + i copies stage i
    assert instance.weight_times == (0.5,) * 4  # one number is each stage's: a stage is a device's share
    assert [instance.route(j) for j in range(4)] == [range(0, 2)] * 2 + [range(2, 4)] * 2
    assert instance.microbatches_at(1) == range(0, 2) and instance.microbatches_at(3) == range(2, 4)
    assert Instance.from_dict(instance.to_dict()) == instance
    linear = instance.at_placement("linear")
    assert linear.forward_times == (1, 2) and linear.at_placement("bidirectional") == instance
    assert instance.one_f_one_b_peak() == linear.one_f_one_b_peak()
    whole = make_instance(2, 4, chunks=2, placement="bidirectional", forward_times=[1, 2, 1, 2], weight_times=0.5)
    assert whole == instance  # all 2p stages given: the same copies


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"num_microbatches": 5}, "runs half the microbatches each way; num_microbatches 5 is odd"),
        ({"forward_times": [1, 2, 2, 1]}, "forward_times differs between the two copies of a bidirectional placement"),
        ({"chunks": 3}, "placement 'bidirectional' needs chunks 2, got 3"),
    ],
)
def test_a_bidirectional_instance_refuses(fields: dict, message: str) -> None:
    data = {"num_devices": 2, "num_microbatches": 4, "chunks": 2, "placement": "bidirectional"} | fields
    with pytest.raises(InstanceError, match=re.escape(message)):
        Instance.from_dict(data)


@pytest.mark.parametrize("limit", ["0.5x", "1GiB", "2000", 1500.0, [2000, "1x"], "2000,0.75x", None])
def test_with_limit_takes_every_limit_the_instance_file_takes(limit: object) -> None:
    """`with_limit("0.5x")` is the file's `memory_limit: 0.5x`, not a string read as a list of limits."""
    data = {"num_devices": 2, "num_microbatches": 4, "activation_memory": 1000, "memory_unit": "MiB"}
    base = Instance.from_dict(data)
    assert base.with_limit(limit) == Instance.from_dict({**data, "memory_limit": limit})


@pytest.mark.parametrize(("limit", "match"), [("lots", "must be a number"), ([1, 2, 3], "3 limits"), (-1, "positive")])
def test_with_limit_refuses_what_the_file_refuses(limit: object, match: str) -> None:
    with pytest.raises(InstanceError, match=match):
        Instance.from_dict({"num_devices": 2, "num_microbatches": 4}).with_limit(limit)


def test_an_instance_prints_in_one_short_line() -> None:
    """Its per-stage lists and metadata are the file's, not its repr's."""
    instance = Instance.from_dict(
        {"num_devices": 16, "num_microbatches": 64, "chunks": 8, "memory_limit": 9, "metadata": {"x": "y" * 5000}}
    )
    assert repr(instance) == "<Instance: p=16 v=8 m=64 interleaved, limit 9>"


def test_host_memory_is_read_with_units_and_kept_in_the_file() -> None:
    linked = {"num_devices": 2, "num_microbatches": 2, "host_link_bandwidth": 1, "memory_unit": "MiB"}
    instance = Instance.from_dict({**linked, "activation_memory": 512, "host_memory": "1GiB"})
    assert instance.host_memory == 1024
    assert Instance.from_dict(instance.to_dict()) == instance and instance.to_dict()["host_memory"] == 1024
    assert Instance.from_dict(linked).host_memory is None and "host_memory" not in Instance.from_dict(linked).to_dict()
    # Exactly one offload of the largest stage fits; with half of each offloaded, half of it.
    assert Instance.from_dict({**linked, "activation_memory": 512, "host_memory": 512}).host_memory == 512
    assert Instance.from_dict({**linked, "offload_fraction": 0.5, "host_memory": 0.5}).host_memory == 0.5
