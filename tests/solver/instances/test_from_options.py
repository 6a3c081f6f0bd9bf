"""Instances from command-line options: list values, placements, a file overridden by options."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipesat.models import InstanceError
from pipesat.solver.instances.from_options import build_instance, parse_numbers
from tests.conftest import INSTANCES_DIR


def test_parse_numbers_one_or_many() -> None:
    assert parse_numbers("forward_times", None) is None
    assert parse_numbers("forward_times", "2") == 2.0
    assert parse_numbers("forward_times", "1 2,3") == [1.0, 2.0, 3.0]


@pytest.mark.parametrize(
    ("text", "message"),
    [("", "`forward_times` needs at least one number"), ("1 x", "`forward_times` takes numbers, got '1 x'")],
)
def test_parse_numbers_names_the_key(text: str, message: str) -> None:
    with pytest.raises(InstanceError, match=message):
        parse_numbers("forward_times", text)


def test_build_instance_from_options() -> None:
    instance = build_instance(num_devices=2, num_microbatches=4, forward_times="1 2,3 4", chunks=2, placement="0,1,1,0")
    assert instance.forward_times == (1.0, 2.0, 3.0, 4.0)
    assert instance.placement == (0, 1, 1, 0)
    assert build_instance(num_devices=2, num_microbatches=4, backward_times="3").backward_times == (3.0, 3.0)


def test_build_instance_options_override_the_file() -> None:
    path = INSTANCES_DIR / "sample_config.yaml"
    assert build_instance(path, num_microbatches=12).num_microbatches == 12
    assert build_instance(config=path) == build_instance(path, path)


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({}, "give an instance file, or at least `num_devices` and `num_microbatches`"),
        ({"num_devices": 4}, "give an instance file"),
        ({"num_devices": 4, "num_microbatches": 8, "placement": "0,x"}, "`placement` list must be device numbers"),
        ({"instance_file": Path("a.yaml"), "config": Path("b.yaml")}, "give the instance once"),
    ],
)
def test_build_instance_refuses(arguments: dict, message: str) -> None:
    with pytest.raises(InstanceError, match=message):
        build_instance(**arguments)


@pytest.mark.parametrize(
    ("limit", "message"),
    [
        ("20GiB,20GiB", "`memory_limit` lists 2 limits but there are 5 devices"),
        ("20XB", "`memory_limit` '20XB': 'XB' is not a memory unit"),
        ("-1", "`memory_limit` must be positive"),
    ],
)
def test_a_bad_option_is_blamed_on_its_key_not_the_file(limit: str, message: str) -> None:
    path = INSTANCES_DIR / "sample_config.yaml"
    with pytest.raises(InstanceError) as raised:
        build_instance(path, memory_limit=limit)
    assert str(raised.value).startswith(message)


def test_a_bad_file_value_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("num_devices: 2\nnum_microbatches: 2\nforward_times: -1\n", encoding="utf-8")
    with pytest.raises(InstanceError, match=r"^.*bad\.yaml: forward_times"):
        build_instance(path, memory_limit="1x")
