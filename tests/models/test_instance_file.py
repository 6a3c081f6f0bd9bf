"""Instance files: every bundled file loads, the earlier tool's configs load unchanged, parse errors say where."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from pipesat.models import InputError, InstanceError, load_instance
from tests.conftest import INSTANCES_DIR

# instances/plan/ holds `pipesat plan` specs, not instances (tests/solver/plan/test_spec.py reads them).
INSTANCE_FILES = sorted(
    p
    for p in INSTANCES_DIR.rglob("*")
    if p.suffix.lower() in (".yaml", ".yml", ".json") and INSTANCES_DIR / "plan" not in p.parents
)


def test_instances_folder_is_not_empty() -> None:
    assert len(INSTANCE_FILES) >= 2


@pytest.mark.parametrize("path", INSTANCE_FILES, ids=lambda p: str(p.relative_to(INSTANCES_DIR)))
def test_every_bundled_instance_loads(path: Path) -> None:
    instance = load_instance(path)
    assert instance.num_stages == len(instance.placement) == len(instance.forward_times)
    assert instance.name  # the file's own name, or its stem


@pytest.mark.parametrize("name", ["sample_config.json", "sample_config.yaml"])
def test_earlier_tool_config_loads_unchanged(name: str) -> None:
    path = INSTANCES_DIR / name
    raw = json.loads(path.read_text()) if path.suffix == ".json" else yaml.safe_load(path.read_text())
    instance = load_instance(path)
    assert instance.num_devices == raw["num_stages"]
    assert instance.num_microbatches == raw["num_batches"]
    assert list(instance.forward_times) == raw["forward_times"]
    assert list(instance.backward_times) == raw["backward_times"]
    assert instance.output_file == raw["output_file"]
    assert instance.name == "sample_config"
    assert not instance.split_backward and instance.chunks == 1


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_invalid_yaml_says_line_and_column(tmp_path: Path) -> None:
    path = _write(tmp_path, "broken.yaml", "num_stages: 4\nnum_batches: [1, 2\nforward_times: 1\n")
    with pytest.raises(InputError, match=r"broken\.yaml:3:\d+: not valid YAML"):
        load_instance(path)


def test_invalid_json_says_line_and_column(tmp_path: Path) -> None:
    path = _write(tmp_path, "broken.json", '{"num_stages": 4,\n "num_batches": 8,,}\n')
    with pytest.raises(InputError, match=r"broken\.json:2:19: not valid JSON"):
        load_instance(path)


@pytest.mark.parametrize(("name", "text"), [("list.yaml", "- 1\n- 2\n"), ("empty.yaml", ""), ("num.json", "4")])
def test_file_must_hold_a_mapping(tmp_path: Path, name: str, text: str) -> None:
    with pytest.raises(InstanceError, match="an instance file must hold a mapping"):
        load_instance(_write(tmp_path, name, text))


def test_missing_file_and_directory(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"nope\.yaml: no such file"):
        load_instance(tmp_path / "nope.yaml")
    with pytest.raises(InputError, match="is a folder, not a regular file; the instance file must be one"):
        load_instance(tmp_path)


def test_content_errors_name_the_file(tmp_path: Path) -> None:
    path = _write(tmp_path, "typo.yaml", "num_stages: 4\nnum_batchs: 8\n")
    with pytest.raises(InstanceError, match=r"typo\.yaml: unknown key 'num_batchs'; did you mean 'num_batches'\?"):
        load_instance(path)


def test_overrides_replace_the_files_keys_and_aliases() -> None:
    instance = load_instance(INSTANCES_DIR / "sample_config.yaml", num_devices=5, num_microbatches=3, p2p_time=0.5)
    assert (instance.num_devices, instance.num_microbatches, instance.p2p_time) == (5, 3, 0.5)
    unchanged = load_instance(INSTANCES_DIR / "sample_config.yaml", num_microbatches=None)
    assert unchanged.num_microbatches == 8


def test_yaml_nan_is_rejected(tmp_path: Path) -> None:
    path = _write(tmp_path, "nan.yaml", "num_stages: 2\nnum_batches: 2\nforward_times: [1, .nan]\n")
    with pytest.raises(InstanceError, match=r"nan\.yaml: forward_times\[1\] must be a finite number"):
        load_instance(path)
