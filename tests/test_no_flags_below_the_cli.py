"""Below the command line, messages, comments and docstrings name keys, not flags: `models` and
`solver` say `training.tensor_parallel` or `` `time_limit` ``, and the command line says the flag
(`commands.flags`)."""

from __future__ import annotations

import io
import re
import tokenize
from pathlib import Path

import pytest

from tests.conftest import ROOT

FLAG = re.compile(r"--[a-z]")
TEXT = {tokenize.STRING, tokenize.COMMENT, getattr(tokenize, "FSTRING_MIDDLE", tokenize.STRING)}
"""The tokens that hold words: string literals (docstrings, messages, f-strings' text) and comments."""
SOURCES = sorted(path for top in ("models", "solver") for path in ROOT.joinpath(top).rglob("*.py"))


def flags_in(source: str) -> list[tuple[int, str]]:
    """(line, text) of each string literal or comment of `source` that names a flag."""
    tokens = tokenize.generate_tokens(io.StringIO(source).readline)
    return [(token.start[0], token.string) for token in tokens if token.type in TEXT and FLAG.search(token.string)]


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_flag_is_named_below_the_command_line(path: Path) -> None:
    found = flags_in(path.read_text(encoding="utf-8"))
    assert not found, (
        f"{path.relative_to(ROOT)}:{found[0][0]} names a flag ({found[0][1]}); name the key (commands/flags.py)"
    )


def test_the_search_finds_a_flag_in_a_message_a_comment_and_a_docstring_but_not_in_code() -> None:
    source = '"""Use --log."""\nx = f"give --tensor-parallel {t}"  # or --zero\ny = a --b\nz = "--" + name\n'
    assert [line for line, _ in flags_in(source)] == [1, 2, 2]
