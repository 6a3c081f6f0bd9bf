"""The files pipesat reads and writes: input documents (instance and schedule files, YAML or JSON),
read safely, and every output written atomically.

Every file pipesat reads (instances, schedules, plan specs, calibrations, tunings, torch CSVs) is
read by `read_input`, so no file can hang pipesat or make it run out of memory: only a regular file
is read (a device such as /dev/zero, a FIFO, a folder or a socket is refused, checked on the opened
file, which is opened without blocking, so a FIFO with no writer cannot hang it), and at most
`max_input_bytes()` of it (the cap `max_input_mb`, `models.limits`), by its size and by the read itself,
or less where a kind of file can hold no more (`Cap`: a calibration of at most its rows; YAML is read at
about a megabyte a second, so a file too large to be valid is refused before it is parsed).
Every input document is then parsed the same way: a file that cannot be read or parsed is one
`InputError` line (with file:line:col where the parser knows it); a key given twice is an error, not
"the last one wins"; `NaN` and `Infinity` are refused; YAML aliases may not expand past `MAX_VALUES`
values (an "alias bomb" of a few lines would otherwise grow to gigabytes) and nesting deeper than
`MAX_DEPTH` is refused.

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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from pipesat.models.errors import InputError
from pipesat.models.limits import max_input_bytes

READ_BYTES = 1 << 20
"""What one read asks for."""
MAX_VALUES = 1_000_000
MAX_DEPTH = 100


@dataclass(frozen=True)
class Cap:
    """The most bytes a kind of input file can hold, below `max_input_bytes()`, and why (the end of
    the line that refuses a larger one)."""

    size: int
    why: str


def read_document(path: str | Path, what: str, json_only: bool = False, cap: Cap | None = None) -> Any:
    """The parsed contents of `path`: JSON when its suffix is `.json` or `json_only`, else YAML.

    `what` names the file in messages ("instance file", "schedule file"); `cap`, when the kind of file
    can hold less than any input.
    """
    path = Path(path)
    text = read_input_text(path, what, cap)
    data = _parse_json(path, text) if json_only or path.suffix.lower() == ".json" else _parse_yaml(path, text)
    _check_depth(path, data)
    return data


def read_input(path: str | Path, what: str, most: Cap | None = None) -> bytes:
    """The bytes of the input file `path` (`what` names it in messages: "plan spec"): a regular file of
    at most `max_input_bytes()` (and `most`), else one `InputError` line (module notes)."""
    path, cap = Path(path), max_input_bytes()
    if most is not None and most.size < cap:
        cap = most.size
    try:
        handle = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except OSError as error:
        raise InputError(f"{path}: cannot read ({error.strerror or error})") from None
    try:
        info = os.fstat(handle)  # the file opened, not what the path names a moment later
        if not stat.S_ISREG(info.st_mode):
            raise InputError(f"{path} is {_kind(info.st_mode)}, not a regular file; the {what} must be one")
        if info.st_size > cap:
            raise _too_large(path, what, cap, most)
        data = bytearray()
        while len(data) <= cap:  # at most cap + 1 bytes, whatever the size said
            part = os.read(handle, min(READ_BYTES, cap + 1 - len(data)))
            if not part:
                break
            data += part
    except OSError as error:
        raise InputError(f"{path}: cannot read ({error.strerror or error})") from None
    finally:
        os.close(handle)
    if len(data) > cap:
        raise _too_large(path, what, cap, most)
    return bytes(data)


def read_input_text(path: str | Path, what: str, most: Cap | None = None) -> str:
    """The input file `path` (`read_input`) as UTF-8 text."""
    try:
        return read_input(path, what, most).decode("utf-8")
    except UnicodeDecodeError as error:
        raise InputError(f"{path}: cannot read ({error}); a {what} is UTF-8 text") from None


def _too_large(path: Path, what: str, cap: int, most: Cap | None) -> InputError:
    if most is not None and most.size == cap:
        return InputError(f"{path}: larger than {cap:,} bytes, {most.why}")
    return InputError(
        f"{path}: larger than the limit of {cap >> 20} MiB for an input file; check it is the {what}, "
        "or raise the limit with `max_input_mb`"
    )


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


class _Loader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """PyYAML's safe loader (on libyaml where PyYAML has it: ten times as fast), refusing a key given
    twice in one mapping."""

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
        if "*" in text:  # no alias without one
            _check_expansion(path, node)
        return loader.construct_document(node)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
        problem = getattr(error, "problem", None) or "cannot parse"
        if "nesting depth" in problem:  # libyaml's own limit (1,000 levels)
            raise InputError(f"{where}: nested too deeply (more than {MAX_DEPTH} levels)") from None
        raise InputError(f"{where}: not valid YAML: {problem}") from None
    except RecursionError:
        raise InputError(f"{path}: nested too deeply (more than {MAX_DEPTH} levels)") from None
    finally:
        loader.dispose()


def _check_expansion(path: Path, root: yaml.Node) -> None:
    """Refuse a YAML document whose aliases would expand it by more than MAX_VALUES values.

    Aliases make the node graph a DAG; its expanded size is counted without expanding it, children
    before parents, each node once. What the aliases add is the expanded size less the nodes written
    (a file without aliases adds nothing, however long: the size cap bounds it).
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
        if size[id(node)] - len(size) > MAX_VALUES:
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
        link = f" (a link to {target})" if target != path else ""
        raise InputError(f"{name} {path}{link} is {_kind(mode)}, not a regular file; name a file to write".lstrip())
    return target


def _kind(mode: int) -> str:
    """What a file that is not a regular one is: `a folder`, `a FIFO (named pipe)`..."""
    return next((kind for test, kind in _KINDS.items() if test(mode)), "a special file")


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
