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
    "solver.result": {"models", "solver.evaluate", "solver.portfolio"},
    "solver.problem_bounds": {"models", "solver.evaluate", "solver.portfolio"},
    "solver.span_phases": {"models", "solver.evaluate", "solver.cpsat", "solver.portfolio", "solver.result"},
    "solver.solve": BELOW_SOLVE | {"solver.result", "solver.problem_bounds", "solver.span_phases"},
    "solver.studies": BELOW_SOLVE | {"solver.solve", "solver.report", "solver.torch"},
    "solver.plan": BELOW_SOLVE | {"solver.solve", "solver.instances"},
    "solver.launch": {"models", "solver.evaluate", "solver.instances", "solver.io", "solver.plan", "solver.torch"},
}
"""What each layer may import of pipesat besides itself; `cli.py` and `commands/` may import all."""


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


def module_of(path: Path, root: Path) -> str:
    """`solver/torch/profile.py` -> `solver.torch.profile`; `models/__init__.py` -> `models`."""
    return ".".join(path.relative_to(root).with_suffix("").parts).removesuffix(".__init__")


def import_graph(root: Path) -> dict[str, set[str]]:
    """Each module of models/ and solver/ under `root` and those of them it imports: the submodule for
    `from pipesat.solver.torch import profile`, the package (its `__init__`) for `from pipesat.models import Instance`."""
    paths = {module_of(path, root): path for top in ("models", "solver") for path in root.joinpath(top).rglob("*.py")}
    graph = {}
    for module, path in paths.items():
        imported = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("pipesat."):
                named = node.module.removeprefix("pipesat.")
                imported |= ({f"{named}.{alias.name}" for alias in node.names} & paths.keys()) or {named}
            elif isinstance(node, ast.Import):
                imported |= {alias.name.removeprefix("pipesat.") for alias in node.names}
        graph[module] = imported & paths.keys()
    return graph


def import_cycle(graph: dict[str, set[str]]) -> list[str]:
    """A circle of imports (its modules in order, the first again at the end), or [] when there is none."""
    done: set[str] = set()
    path: list[str] = []

    def visit(module: str) -> list[str]:
        if module in path:
            return [*path[path.index(module) :], module]
        if module in done:
            return []
        path.append(module)
        for imported in sorted(graph[module]):
            if cycle := visit(imported):
                return cycle
        path.pop()
        done.add(module)
        return []

    for module in sorted(graph):
        if cycle := visit(module):
            return cycle
    return []


def test_the_modules_import_one_way() -> None:
    cycle = import_cycle(import_graph(ROOT))
    assert not cycle, f"import circle: {' -> '.join(cycle)}; move what they share to a module both can import"


def test_an_import_circle_is_found(tmp_path: Path) -> None:
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "__init__.py").write_text("from pipesat.models.a import A\n")
    (tmp_path / "models" / "a.py").write_text("from pipesat.models.b import B\nA = 1\n")
    (tmp_path / "models" / "b.py").write_text("def f():\n    from pipesat.models import a\n")
    (tmp_path / "models" / "c.py").write_text("from pipesat.models import A\n")
    graph = import_graph(tmp_path)
    assert graph == {"models": {"models.a"}, "models.a": {"models.b"}, "models.b": {"models.a"}, "models.c": {"models"}}
    assert import_cycle(graph) == ["models.a", "models.b", "models.a"]
    assert import_cycle(graph | {"models.b": set()}) == []


def test_the_layer_rule_can_fail(tmp_path: Path) -> None:
    upward = tmp_path / "bounds.py"
    upward.write_text("from pipesat.solver.solve import solve\nfrom pipesat.models import Instance\nimport models\n")
    assert imported_layers(upward) == {"solver.solve", "models"}
