"""The README and docs/*.md hold together: every relative link reaches a file (and a heading, when it names
one), and every `pipesat` command shown in a code block uses only commands and flags that exist."""

from __future__ import annotations

import importlib.util
import re
import shlex
import unicodedata
from pathlib import Path
from types import ModuleType

import click
import pytest

from pipesat.cli import cli
from tests.conftest import ROOT

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
FENCE = re.compile(r"^(```|~~~).*?^\1[ \t]*$", flags=re.MULTILINE | re.DOTALL)
INLINE_CODE = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"!?\[(?:[^\]\n]|\n(?!\n))*\]\(([^()\s]+)(?:\s+\"[^\"]*\")?\)")
HEADING = re.compile(r"^#{1,6}[ \t]+(.+?)[ \t]*#*[ \t]*$", flags=re.MULTILINE)


def page_id(path: Path) -> str:
    return str(path.relative_to(ROOT))


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: markup dropped, lower case, punctuation removed, spaces to hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link keeps its words
    text = text.replace("`", "").strip().lower()
    kept = "".join(c for c in text if c in " -_" or unicodedata.category(c)[0] in "LN")
    return kept.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every heading's anchor in a Markdown page (a repeated heading gets -1, -2, ...)."""
    seen: dict[str, int] = {}
    found = set()
    for heading in HEADING.findall(FENCE.sub("", path.read_text(encoding="utf-8"))):
        base = slug(heading)
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def links(path: Path) -> list[str]:
    """The link targets of a page, outside code blocks and inline code."""
    text = INLINE_CODE.sub("", FENCE.sub("", path.read_text(encoding="utf-8")))
    return LINK.findall(text)


def relative_links() -> list[tuple[Path, str]]:
    return [
        (page, target)
        for page in PAGES
        for target in links(page)
        if not re.match(r"^[a-z][a-z0-9+.-]*:", target)  # http:, https:, mailto: are not checked
    ]


def test_the_pages_exist() -> None:
    assert (ROOT / "README.md").is_file()
    assert len(PAGES) > 1, "docs/*.md is empty"


@pytest.mark.parametrize(("page", "target"), relative_links(), ids=lambda v: v if isinstance(v, str) else page_id(v))
def test_each_relative_link_reaches_a_file_and_heading(page: Path, target: str) -> None:
    file_part, _, anchor = target.partition("#")
    linked = (page.parent / file_part).resolve() if file_part else page
    assert linked.exists(), f"{page_id(page)} links to {target}, which does not exist"
    assert linked.is_relative_to(ROOT), f"{page_id(page)} links outside the repository: {target}"
    if anchor and linked.suffix == ".md":
        assert anchor in anchors(linked), f"{page_id(page)} links to {target}: {page_id(linked)} has no such heading"


def test_slug_follows_github() -> None:
    assert slug("Seeing inside a solve: `--log`, reasons and `--cpsat-param`") == (
        "seeing-inside-a-solve---log-reasons-and---cpsat-param"
    )
    assert slug("4. The memory trade-off: `pareto`") == "4-the-memory-trade-off-pareto"
    assert slug("Import: torch's built-in schedules") == "import-torchs-built-in-schedules"


def shown_commands() -> list[tuple[Path, str]]:
    """Every `pipesat ...` command of a `$ ` line in a code block, each part of a pipe or a `;` list on its own,
    without its redirections and environment settings."""
    found = []
    for page in PAGES:
        for block in FENCE.finditer(page.read_text(encoding="utf-8")):
            for line in block.group(0).splitlines():
                if not line.startswith("$ "):
                    continue
                for part in re.split(r"\s*(?:\||;|&&)\s*", line.removeprefix("$ ")):
                    command = re.sub(r"^(?:\w+=\S+\s+)*", "", part.strip().strip("()"))
                    command = re.split(r"\s+\d?>", command)[0]
                    if command.startswith("pipesat "):
                        found.append((page, command))
    return found


def resolve(words: list[str]) -> tuple[click.Command, list[str], list[click.Command]]:
    """The click command a command line names, the words after its name, and the groups on the way."""
    command: click.Command = cli
    groups: list[click.Command] = []
    rest = words[1:]
    while isinstance(command, click.Group):
        groups.append(command)
        while rest and rest[0].startswith("-"):  # the group's own options (`pipesat --max-ops N`)
            option = rest.pop(0)
            param = next((p for p in command.params if option in p.opts), None)
            assert param is not None, f"pipesat has no option {option}"
            if not getattr(param, "is_flag", False):
                rest.pop(0)
        assert rest, f"{' '.join(words)} names no command"
        sub = command.get_command(click.Context(command), rest[0])
        assert sub is not None, f"{' '.join(words)}: {rest[0]} is no command of {command.name}"
        command, rest = sub, rest[1:]
    return command, rest, groups


@pytest.mark.parametrize(("page", "line"), shown_commands(), ids=lambda v: v if isinstance(v, str) else page_id(v))
def test_each_shown_command_uses_flags_that_exist(page: Path, line: str) -> None:
    command, rest, _ = resolve(shlex.split(line))
    flags = {opt for param in command.params for opt in (*param.opts, *param.secondary_opts)} | {"-h", "--help"}
    for word in rest:
        if word.startswith("-") and word != "-" and not re.match(r"^-\d", word):
            name = word.split("=", 1)[0]
            assert name in flags, f"{page_id(page)}: `{line}` uses {name}, which `pipesat {command.name}` lacks"


def test_shown_commands_are_found() -> None:
    pages = {page.name for page, _ in shown_commands()}
    assert {"README.md", "manual.md", "torch.md", "plan.md"} <= pages


def _api_page_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("api_page", ROOT / "docs" / "api_page.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_api_page_is_what_the_docstrings_make() -> None:
    """docs/api.md is generated (`python docs/api_page.py`): a docstring changed without it fails here."""
    page = ROOT / "docs" / "api.md"
    assert page.read_text(encoding="utf-8") == _api_page_module().api_page(), "run python docs/api_page.py"


def test_the_api_page_turns_numpydoc_sections_into_lists() -> None:
    doc = (
        "What it does.\n\nParameters\n----------\nx\n    The x,\n    in two lines.\n\nReturns\n-------\nint\n    Its y."
    )
    assert _api_page_module()._markdown(doc) == (
        "What it does.\n\n**Parameters**\n\n- `x`: The x, in two lines.\n\n**Returns**\n\n- `int`: Its y."
    )
