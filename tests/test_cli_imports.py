"""The command line starts fast: importing it, `--help` and `--version` load none of OR-Tools,
matplotlib, torch or ray (nor numpy); each command imports what it needs when it runs."""

from __future__ import annotations

import subprocess
import sys

import pytest

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


def test_the_check_can_fail() -> None:
    assert heavy_imports("import numpy") == ["numpy"]
