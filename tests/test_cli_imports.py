"""The command line starts fast: importing it, `--help` and `--version` load none of OR-Tools,
matplotlib, torch or ray (nor numpy); each command imports what it needs when it runs, so that its
help and a refusal of its inputs start fast too."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import ROOT

HEAVY = {"ortools", "matplotlib", "numpy", "torch", "ray"}


def heavy_imports(code: str) -> list[str]:
    """The heavy packages in `sys.modules` after running `code` in a fresh interpreter."""
    report = f"import sys\nprint(sorted({{m.split('.')[0] for m in sys.modules}} & set({sorted(HEAVY)!r})))"
    done = subprocess.run([sys.executable, "-c", f"{code}\n{report}"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return list(eval(done.stdout.splitlines()[-1]))


def test_importing_the_command_line_imports_no_heavy_package() -> None:
    assert heavy_imports("import pipesat.cli") == []


@pytest.mark.parametrize("args", [["--help"], ["--version"], ["no-such-command"]])
def test_help_version_and_a_usage_error_import_no_heavy_package(args: list[str]) -> None:
    code = f"from pipesat.cli import cli\ntry:\n    cli({args!r}, prog_name='pipesat')\nexcept SystemExit:\n    pass"
    assert heavy_imports(code) == []


COMMAND_MODULES = sorted(f"pipesat.commands.{path.stem}" for path in ROOT.joinpath("commands").glob("[!_]*.py"))


@pytest.mark.parametrize("module", COMMAND_MODULES)
def test_a_command_module_imports_no_solver_library(module: str) -> None:
    """A command's help and a refusal of its options (a file that is not there) load no OR-Tools,
    matplotlib or numpy: the command imports them in its body, once its inputs are checked."""
    assert heavy_imports(f"import {module}") == []


@pytest.mark.parametrize("args", [["solve", "--help"], ["plan", "missing.yaml"], ["solve", "missing.json"]])
def test_a_command_help_and_refusal_import_no_solver_library(args: list[str]) -> None:
    code = f"from pipesat.cli import cli\ntry:\n    cli({args!r}, prog_name='pipesat')\nexcept SystemExit:\n    pass"
    assert heavy_imports(code) == []


def test_the_check_can_fail() -> None:
    assert heavy_imports("import numpy") == ["numpy"]
