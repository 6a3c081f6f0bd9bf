"""pipesat installs as one import package, `pipesat`, and nothing generic at the top level."""

from __future__ import annotations

import ast
import inspect
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pytest

import pipesat
from pipesat import cli
from tests.conftest import ROOT

GENERIC = {"commands", "models", "solver", "cli", "tests", "benchmarks"}


def test_the_distribution_installs_only_pipesat_at_the_top_level() -> None:
    top_level = metadata.distribution("pipesat").read_text("top_level.txt")
    assert top_level is not None and top_level.split() == ["pipesat"]


def test_every_folder_of_the_code_is_a_declared_subpackage() -> None:
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert setuptools["package-dir"] == {"pipesat": "."}
    assert "py-modules" not in setuptools
    folders = {
        ".".join(("pipesat", *init.parent.relative_to(ROOT).parts))
        for top in ("commands", "models", "solver")
        for init in ROOT.joinpath(top).rglob("__init__.py")
    }
    assert set(setuptools["packages"]) == folders | {"pipesat"}


def test_the_root_holds_only_the_api_and_the_entry_point() -> None:
    """The command line's modules live in commands/; the root keeps `cli.py`, pyproject's script."""
    assert sorted(path.name for path in ROOT.glob("*.py")) == ["__init__.py", "cli.py"]


def test_the_public_api_is_at_the_top() -> None:
    assert len(set(pipesat.__all__)) == len(pipesat.__all__)
    for name in pipesat.__all__:
        assert getattr(pipesat, name) is not None
    for name in ("Instance", "Schedule", "solve", "compare", "plan", "validate", "torch_schedule", "load_instance"):
        assert name in pipesat.__all__


def test_the_public_names_are_imported_when_first_used() -> None:
    """`import pipesat` loads none of its modules (PEP 562); `from pipesat import X` imports each name of
    `__all__`, from a fresh interpreter, and `dir(pipesat)` lists them."""
    code = (
        "import sys, pipesat\n"
        "print([m for m in sys.modules if m.startswith('pipesat.')])\n"
        "for name in pipesat.__all__:\n"
        "    exec(f'from pipesat import {name}')\n"
        "print(sorted(set(pipesat.__all__) - set(dir(pipesat))), len(pipesat.__all__))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["[]", "[]", str(len(pipesat.__all__))]


def test_a_name_the_api_does_not_export_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        pipesat.nothing  # noqa: B018


def test_import_pipesat_works_from_anywhere_and_does_not_load_torch(tmp_path: Path) -> None:
    code = "import sys, pipesat; print(len(pipesat.__all__), 'torch' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [str(len(pipesat.__all__)), "False"]


def test_the_torch_layer_and_its_commands_import_without_torch(tmp_path: Path) -> None:
    """torch is an extra: its modules import torch only inside the functions that need it."""
    torch_layer = sorted(ROOT.joinpath("solver", "torch").glob("[!_]*.py"))  # all but __init__.py
    modules = [f"pipesat.solver.torch.{path.stem}" for path in torch_layer]
    imports = "".join(f"import {name}\n" for name in [*modules, "pipesat.cli"])
    code = f"import sys\nsys.modules['torch'] = None  # makes `import torch` raise ImportError\n{imports}"
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


SOURCES = sorted(
    path
    for path in ROOT.rglob("*.py")
    if not any(part.startswith(".") or part in ("build", "dist") for part in path.relative_to(ROOT).parts)
)


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_file_imports_a_generic_top_level_name(path: Path) -> None:
    """`import models` would reach a training repository's own `models/` package; pipesat's code says `pipesat.`."""
    bare = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names = (
            [node.module]
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0
            else [alias.name for alias in node.names]
            if isinstance(node, ast.Import)
            else []
        )
        bare += [name for name in names if name.split(".")[0] in GENERIC - {"tests"} or name.startswith("cli_")]
    assert not bare, f"{path.relative_to(ROOT)} imports {bare}; write pipesat.{bare[0]}"


def test_every_commands_twin_is_public_and_documented_in_numpydoc() -> None:
    """The package docstring pairs each command with its twins; each is exported, and each function
    among them says its Parameters (when it takes any), Returns and, in the docstring, its units."""
    table = [line.split() for line in (pipesat.__doc__ or "").splitlines() if line.startswith("    pipesat ")]
    commands = {" ".join(words[1:3]) if words[1] == "instance" else words[1] for words in table}
    assert commands == set(cli.COMMANDS) - {"instance"} | {"instance show", "instance from-model"}
    twins = {word.strip(",();") for words in table for word in words[2:]} & set(pipesat.__all__)
    assert {"solve", "compare", "pareto_frontier", "plan", "instance_from_model", "plot_schedule"} <= twins
    for name in sorted(twins):
        value = getattr(pipesat, name)
        if not inspect.isfunction(value):
            continue
        doc = inspect.getdoc(value) or ""
        takes = bool(inspect.signature(value).parameters)
        assert ("Parameters\n----------" in doc) == takes, name
        assert "Returns\n-------" in doc, name
