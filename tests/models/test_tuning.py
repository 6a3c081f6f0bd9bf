"""The tuning: its defaults are pipesat's, each field documented, and a mapping or a file of fields
read with one clear line for a field that does not exist or a value of the wrong type."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import itertools
import json
import math
from pathlib import Path

import pytest

from pipesat.models import OptionError, Tuning, load_tuning
from pipesat.models import tuning as tuning_module
from pipesat.models.errors import InputError


def test_every_field_has_a_docstring_naming_where_it_was_measured() -> None:
    tree = ast.parse(inspect.getsource(tuning_module))
    body = next(node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == "Tuning").body
    documented = {}
    for field, after in itertools.pairwise(body):
        if isinstance(field, ast.AnnAssign) and isinstance(field.target, ast.Name):
            assert isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant), field.target.id
            documented[field.target.id] = after.value.value
    assert set(documented) == {field.name for field in dataclasses.fields(Tuning)}
    for name, text in documented.items():
        assert "bench" in text or "Not measured" in text, name


def test_it_is_frozen_and_keyword_only() -> None:
    tuning = Tuning()
    with pytest.raises(dataclasses.FrozenInstanceError):
        tuning.strong_probes = False  # type: ignore[misc]
    with pytest.raises(TypeError):
        Tuning(1 / 3)  # type: ignore[misc]


def test_the_changes_are_what_differs_from_the_default() -> None:
    assert Tuning().changes() == {} and Tuning().describe() == "the defaults"
    tuned = Tuning(strong_probes=False, stall_share=math.inf)
    assert tuned.changes() == {"strong_probes": False, "stall_share": math.inf}
    assert tuned.describe() == "strong_probes=False, stall_share=inf"
    assert tuned.as_dict()["stall_share"] == "inf"  # JSON has no infinity
    assert Tuning.from_mapping(json.loads(json.dumps(tuned.as_dict(), allow_nan=False))) == tuned


def test_a_mapping_takes_each_field_of_its_type() -> None:
    tuned = Tuning.from_mapping({"makespan_phase": 0, "proof_small_ops": 10, "value_grid": False})
    assert tuned == Tuning(makespan_phase=0.0, proof_small_ops=10, value_grid=False)
    assert isinstance(tuned.makespan_phase, float)


@pytest.mark.parametrize(
    ("mapping", "message"),
    [
        (
            {"strong_probe": False},
            "here: unknown tuning field 'strong_probe'; did you mean 'strong_probes'? the fields are makespan_phase, ",
        ),
        ({"strong_probes": 1}, "here: tuning field strong_probes must be true or false, got 1"),
        ({"knapsack_nodes": True}, "here: tuning field knapsack_nodes must be a whole number, got True"),
        ({"opening_gap": "0.1"}, "here: tuning field opening_gap must be a number, got '0.1'"),
        ({"opening_share": 1.5}, "here: tuning field opening_share is a share of the time, at most 1, got 1.5"),
        ({"bisections": -1}, "here: tuning field bisections must be at least 0, got -1"),
        (["strong_probes"], "here: give field = value pairs, got list"),
    ],
)
def test_a_bad_mapping_is_one_line(mapping: object, message: str) -> None:
    with pytest.raises(OptionError) as error:
        Tuning.from_mapping(mapping, "here")  # type: ignore[arg-type]
    assert str(error.value).startswith(message) and "\n" not in str(error.value)


def test_a_file_is_toml_or_yaml(tmp_path: Path) -> None:
    toml = tmp_path / "tuning.toml"
    toml.write_text("# no probes after a stall\nstall_share = inf\n")
    yaml = tmp_path / "tuning.yaml"
    yaml.write_text("stall_share: .inf\n")
    assert load_tuning(toml) == load_tuning(yaml) == Tuning(stall_share=math.inf)
    yaml.write_text("strong_probes: false\n")
    assert load_tuning(yaml) == Tuning(strong_probes=False)
    yaml.write_text("")
    assert load_tuning(yaml) == Tuning()
    with pytest.raises(InputError, match="no such file"):
        load_tuning(tmp_path / "missing.toml")
