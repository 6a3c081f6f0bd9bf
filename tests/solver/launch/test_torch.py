"""The plain torch launch: every import, call and keyword it writes is torch's (held against
docs/runtimes/torch-names.txt), and its constants are the configuration's."""

from __future__ import annotations

import ast

import pytest

from tests.conftest import ROOT
from tests.solver.launch.conftest import PIPELINES, launch_files, name_lists, predicted

NAMES = name_lists("torch-names.txt")
STANDARD = {"str", "Path", "with_name"}
"""The standard library's calls the launch makes (the CSV's path beside the file)."""
OWN = {"build_mesh", "build_schedule"}
"""The launch's own functions."""


def constants(text: str) -> dict[str, object]:
    return {
        node.targets[0].id: ast.literal_eval(node.value)
        for node in ast.parse(text).body
        if isinstance(node, ast.Assign)
        and isinstance(node.targets[0], ast.Name)
        and node.targets[0].id != "SCHEDULE_CSV"
    }


@pytest.mark.parametrize("text", [*PIPELINES, "t1 p1 d32 b1 m8 zero1"])
def test_every_name_written_is_torchs(text: str) -> None:
    tree = ast.parse(launch_files("torch", text)["launch.py"])
    compile(tree, "launch.py", "exec")
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module != "pathlib":
            assert {f"{node.module}.{alias.name}" for alias in node.names} <= NAMES["imports"]
        if isinstance(node, ast.Call):
            name = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")
            assert name in NAMES["calls"] | STANDARD, f"{name} is not torch's"
            assert {keyword.arg for keyword in node.keywords} <= NAMES["keywords"]
            if name == "_load_csv":
                assert ast.literal_eval(node.keywords[0].value) in NAMES["formats"]
        if isinstance(node, ast.FunctionDef):
            assert node.name in OWN


def test_the_constants_are_the_configurations() -> None:
    config, schedule, _ = predicted(PIPELINES[0])
    written = constants(launch_files("torch", PIPELINES[0])["launch.py"])
    assert written["MESH_SHAPE"] == (4, 2, 1, 4) and written["MESH_DIMS"] == ("pp", "dp", "cp", "tp")
    assert written["NUM_STAGES"] == schedule.instance.num_stages == 8
    assert written["RANK_STAGES"] == [sorted(schedule.instance.stages_of(rank)) for rank in range(4)]
    assert written["MICROBATCHES"] == config.microbatches and written["ZERO"] == 1
    assert sum(written["STAGE_LAYERS"]) == 32  # type: ignore[arg-type]


def test_without_a_pipeline_the_launch_holds_the_degrees_alone() -> None:
    files = launch_files("torch", "t1 p1 d32 b1 m8 zero1")
    assert list(files) == ["launch.py"]
    assert "build_schedule" not in files["launch.py"] and constants(files["launch.py"])["MESH_SHAPE"] == (1, 32, 1, 1)


def test_the_page_shows_the_launch_as_it_is_written() -> None:
    page = (ROOT / "docs" / "runtimes" / "torch.md").read_text()
    files = launch_files("torch", "t1 p2 d16 b1 m16 zero1 zb-auto", "torch.py")
    assert f"```python\n{files['torch.py'].rstrip()}\n```" in page
