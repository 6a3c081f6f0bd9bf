"""The layers: each part of pipesat imports only the parts below it (docs/design.md)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.conftest import ROOT

BELOW_SOLVE = {"models", "solver.evaluate", "solver.heuristics", "solver.cpsat", "solver.portfolio"}
ALLOWED: dict[str, set[str]] = {
    "models": set(),
    "solver.evaluate": {"models"},
    "solver.heuristics": {"models", "solver.evaluate"},
    "solver.cpsat": {"models", "solver.evaluate"},
    "solver.report": {"models", "solver.evaluate"},
    "solver.io": {"models", "solver.evaluate"},
    "solver.instances": {"models"},
    "solver.torch": {"models", "solver.evaluate", "solver.heuristics", "solver.io", "solver.instances"},
    "solver.portfolio": {"models", "solver.evaluate", "solver.heuristics"},
    "solver.solve": BELOW_SOLVE,
    "solver.studies": BELOW_SOLVE | {"solver.solve", "solver.report", "solver.torch"},
    "solver.plan": BELOW_SOLVE | {"solver.solve", "solver.instances"},
}
"""What each layer may import of pipesat besides itself; `cli.py` and `cli_options.py` may import all."""


def layer_of(module: str) -> str:
    """`solver.evaluate.metrics` -> `solver.evaluate`; `solver.solve` -> `solver.solve`; `models.ops` -> `models`."""
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] == "solver" else parts[0]


def imported_layers(path: Path) -> set[str]:
    """The pipesat layers a source file imports."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            names = (
                [node.module] if node.module != "pipesat.solver" else [f"pipesat.solver.{a.name}" for a in node.names]
            )
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            continue
        inside = [name.removeprefix("pipesat.") for name in names if name.startswith("pipesat.") or name == "pipesat"]
        found |= {layer_of(name) for name in inside}
    return found


SOURCES = sorted(
    [
        *ROOT.joinpath("models").rglob("*.py"),
        *ROOT.joinpath("solver").rglob("*/*.py"),
        *(path for path in ROOT.joinpath("solver").glob("*.py") if path.name != "__init__.py"),
    ]
)


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_each_module_imports_only_the_layers_below_it(path: Path) -> None:
    module = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
    layer = layer_of(module)
    assert layer in ALLOWED, f"{module} is in no known layer; add {layer} to ALLOWED and to docs/design.md"
    upward = imported_layers(path) - ALLOWED[layer] - {layer}
    assert not upward, f"{module} imports {sorted(upward)}, which {layer} may not use"


def test_solver_has_at_most_eight_top_level_modules() -> None:
    assert len(list(ROOT.joinpath("solver").glob("*.py"))) <= 8


def test_the_layer_rule_can_fail(tmp_path: Path) -> None:
    upward = tmp_path / "bounds.py"
    upward.write_text("from pipesat.solver.solve import solve\nfrom pipesat.models import Instance\nimport models\n")
    assert imported_layers(upward) == {"solver.solve", "models"}
