"""No module of models/ or solver/ grows past the size where one job fits (issue 43)."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import ROOT

MAX_LINES = 500


def line_counts(root: Path) -> dict[str, int]:
    """Lines of each module of models/ and solver/ under `root`, by its path from there."""
    return {
        path.relative_to(root).as_posix(): len(path.read_text(encoding="utf-8").splitlines())
        for top in ("models", "solver")
        for path in sorted(root.joinpath(top).rglob("*.py"))
    }


def too_long(counts: dict[str, int]) -> list[str]:
    """`path: N lines` of each module over MAX_LINES."""
    return [f"{path}: {lines} lines" for path, lines in counts.items() if lines > MAX_LINES]


def test_no_module_is_over_500_lines() -> None:
    over = too_long(line_counts(ROOT))
    assert not over, f"over {MAX_LINES} lines, cut along their seams: {'; '.join(over)}"


def test_the_size_rule_can_fail(tmp_path: Path) -> None:
    (tmp_path / "solver").mkdir()
    (tmp_path / "solver" / "long.py").write_text("x = 1\n" * (MAX_LINES + 1))
    (tmp_path / "solver" / "short.py").write_text("x = 1\n" * MAX_LINES)
    assert too_long(line_counts(tmp_path)) == [f"solver/long.py: {MAX_LINES + 1} lines"]
