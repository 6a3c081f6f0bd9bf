"""The files pipesat reads and writes: input documents (instance and schedule files, YAML or JSON),
read safely, and every output written atomically.

Every input document is read the same way, so no file can crash pipesat or make it run out of
memory: a file that cannot be read or parsed is one `InputError` line (with file:line:col where the
parser knows it); a key given twice is an error, not "the last one wins"; `NaN` and `Infinity` are
refused; YAML aliases may not expand past `MAX_VALUES` values (an "alias bomb" of a few lines would
otherwise grow to gigabytes); nesting deeper than `MAX_DEPTH` and files larger than `MAX_FILE_BYTES`
are refused.

Every file pipesat writes goes first to a temporary file in the same folder, which then replaces the
target in one step (`write_atomically`): a kill or a full disk leaves the old file whole, never a
truncated one. Only regular files are written (`writable_target`): a folder, a device, a FIFO or a
socket at the path is refused, and a symbolic link is followed, so the file it points to is replaced
and the link stays.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from pipesat.models.errors import InputError

MAX_FILE_BYTES = 1 << 30
MAX_VALUES = 1_000_000
MAX_DEPTH = 100


def read_document(path: str | Path, what: str, json_only: bool = False) -> Any:
    """The parsed contents of `path`: JSON when its suffix is `.json` or `json_only`, else YAML.

    `what` names the file in messages ("instance file", "schedule file").
    """
    path = Path(path)
    text = _read_text(path, what)
    data = _parse_json(path, text) if json_only or path.suffix.lower() == ".json" else _parse_yaml(path, text)
    _check_depth(path, data)
    return data


def _read_text(path: Path, what: str) -> str:
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            raise InputError(f"{path}: larger than {MAX_FILE_BYTES >> 20} MiB; this is not a {what}")
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise InputError(f"{path}: is a directory, not a {what}") from None
    except (OSError, UnicodeDecodeError) as error:
        raise InputError(f"{path}: cannot read ({error})") from None


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    data: dict[str, Any] = {}
    for key, value in pairs:
        if key in data:
            raise _DuplicateKey(key)
        data[key] = value
    return data


class _DuplicateKey(ValueError):
    def __init__(self, key: Any) -> None:
        super().__init__(key)
        self.key = key


def _no_constant(name: str) -> Any:
    raise ValueError(name)


def _parse_json(path: Path, text: str) -> Any:
    try:
        return json.loads(text, object_pairs_hook=_unique_keys, parse_constant=_no_constant)
    except json.JSONDecodeError as error:
        raise InputError(f"{path}:{error.lineno}:{error.colno}: not valid JSON: {error.msg}") from None
    except _DuplicateKey as error:
        raise InputError(f"{path}: the key {error.key!r} is given twice; keep one") from None
    except ValueError as error:
        raise InputError(f"{path}: {error} is not a finite number; write a number") from None
    except RecursionError:
        raise InputError(f"{path}: nested too deeply (more than {MAX_DEPTH} levels)") from None


class _Loader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing a key given twice in one mapping."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        self.flatten_mapping(node)
        seen = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            try:
                duplicate = key in seen
            except TypeError:
                continue  # an unhashable key: the base class says what is wrong
            if duplicate:
                raise yaml.constructor.ConstructorError(
                    None, None, f"the key {key!r} is given twice; keep one", key_node.start_mark
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def _parse_yaml(path: Path, text: str) -> Any:
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _check_expansion(path, node)
        return loader.construct_document(node)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
        problem = getattr(error, "problem", None) or "cannot parse"
        raise InputError(f"{where}: not valid YAML: {problem}") from None
    except RecursionError:
        raise InputError(f"{path}: nested too deeply (more than {MAX_DEPTH} levels)") from None
    finally:
        loader.dispose()


def _check_expansion(path: Path, root: yaml.Node) -> None:
    """Refuse a YAML document whose aliases would expand it past MAX_VALUES values.

    Aliases make the node graph a DAG; its expanded size is counted without expanding it, children
    before parents, each node once.
    """
    size: dict[int, int] = {}
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        if id(node) in size:
            continue
        children = _children(node)
        if not children_done:
            stack.append((node, True))
            stack.extend((child, False) for child in children if id(child) not in size)
            continue
        size[id(node)] = 1 + sum(size[id(child)] for child in children)
        if size[id(node)] > MAX_VALUES:
            raise InputError(
                f"{path}: its YAML aliases expand to more than {MAX_VALUES:,} values; write the values out"
            )


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []


def _check_depth(path: Path, data: Any) -> None:
    """Refuse nesting deeper than MAX_DEPTH (walked without recursion)."""
    stack = [(data, 1)]
    while stack:
        value, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise InputError(f"{path}: nested too deeply (more than {MAX_DEPTH} levels)")
        if isinstance(value, dict):
            stack.extend((item, depth + 1) for item in value.values())
        elif isinstance(value, list):
            stack.extend((item, depth + 1) for item in value)


_KINDS = {
    stat.S_ISDIR: "a folder",
    stat.S_ISCHR: "a character device",
    stat.S_ISBLK: "a block device",
    stat.S_ISFIFO: "a FIFO (named pipe)",
    stat.S_ISSOCK: "a socket",
}


def writable_target(path: Path, name: str = "") -> Path:
    """The file that writing `path` makes or replaces: `path`, or the file its symbolic link points to.
    Refused (one `InputError` line, `name` the option that gives the path) when something other than a
    regular file is there, whatever `force` says: a folder, a device, a FIFO, a socket."""
    try:
        target = path.resolve() if path.is_symlink() else path
        mode = target.stat().st_mode if target.exists() else stat.S_IFREG
    except (OSError, RuntimeError) as error:  # a loop of links is a RuntimeError
        raise InputError(f"{name} {path}: cannot follow it ({error}); name a regular file".lstrip()) from None
    if not stat.S_ISREG(mode):
        kind = next((kind for test, kind in _KINDS.items() if test(mode)), "a special file")
        link = f" (a link to {target})" if target != path else ""
        raise InputError(f"{name} {path}{link} is {kind}, not a regular file; name a file to write".lstrip())
    return target


def write_atomically(path: str | Path, write: Callable[[Path], object]) -> Path:
    """Make `path` with `write(temporary path)`, then move it into place in one step; the folder is
    made when missing, and a symbolic link is followed (`writable_target`). A failure (a full disk, a
    read-only one) is one `InputError` line and leaves any file at `path` as it was."""
    path = Path(path)
    target = writable_target(path)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        handle, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".part", dir=target.parent)
        os.close(handle)
    except OSError as error:
        raise _cannot_write(path, error) from None
    temporary = Path(name)
    try:
        write(temporary)
        with temporary.open("rb") as file:
            os.fsync(file.fileno())
        temporary.chmod(0o666 & ~_umask())
        temporary.replace(target)
    except OSError as error:
        raise _cannot_write(path, error) from None
    finally:
        with contextlib.suppress(OSError):
            temporary.unlink()
    return path


def _cannot_write(path: Path, error: OSError) -> InputError:
    return InputError(f"{path}: cannot write ({error.strerror}); nothing was changed there, write to another place")


def write_text(path: str | Path, text: str) -> Path:
    """Write `text` (UTF-8) to `path` atomically."""
    return write_atomically(path, lambda temporary: temporary.write_text(text, encoding="utf-8", newline=""))


def _umask() -> int:
    """The process's file-creation mask (a temporary file is made private; the result should not be)."""
    mask = os.umask(0)
    os.umask(mask)
    return mask
