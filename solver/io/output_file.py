"""The files a command writes: one policy for all of them, checked before any work, and atomic writes.

The policy: a command never writes over one of its own inputs, never gives two of its outputs the
same file, and replaces an existing file the user named only when told to (`force`). A file the
command names itself, the picture it draws by default (`pipeline_1f1b.png`), is a `DefaultName`: it
is replaced, so the same command line can be run again. All of it is checked before the command does
its work, together with whether each output's folder can be written, so a long solve never ends in
"cannot write". Outputs are regular files: a folder, a device, a FIFO or a socket at the path is
refused, `force` or not; a symbolic link is followed, so the file it points to is the output (it
must not be an input) and is replaced, and the link stays. The writes themselves are atomic
(`models.document`); a write that fails (a full disk, a read-only one) is one line and changes
nothing.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from pipesat.models import InputError
from pipesat.models.document import writable_target, write_text


@dataclass(frozen=True)
class DefaultName:
    """An output file the command named itself, not the user: the picture drawn when none is named.
    An existing file of that name is replaced without `force`; every other rule still holds."""

    path: Path


def check_outputs(
    outputs: Mapping[str, Path | DefaultName | None], inputs: Mapping[str, Path | None], force: bool
) -> None:
    """Refuse (one `InputError` line) outputs that break the policy; `outputs` and `inputs` map a
    name for each file (the option that gives it on the command line) to its path, None for none. A path the
    command chose itself comes as a `DefaultName`, which may replace an existing file."""
    written: dict[Path, str] = {}
    read = {_identity(path): name for name, path in inputs.items() if path is not None}
    for name, output in outputs.items():
        if output is None:
            continue
        named_by_user = not isinstance(output, DefaultName)
        path = output.path if isinstance(output, DefaultName) else output
        identity = _identity(path)
        if identity in read:
            raise InputError(f"{name} {path} is the {read[identity]} this command reads; write to another file")
        if identity in written:
            raise InputError(f"{path} is both {written[identity]} and {name}; give each output its own file")
        written[identity] = name
        _check_writable(name, path, force or not named_by_user)


def write_output(path: str | Path, text: str) -> Path:
    """Write `text` to `path` atomically (the folder is made when missing)."""
    return write_text(path, text)


def _identity(path: Path) -> Path:
    """The file a path names, whatever way it is written (relative, `..`, links)."""
    return path.expanduser().resolve()


def _check_writable(name: str, path: Path, force: bool) -> None:
    target = writable_target(path, name)
    if target.exists() and not force:
        raise InputError(f"{path} already exists; add `force` to replace it, or write to another file")
    folder = target.expanduser().absolute().parent
    while not folder.exists():
        folder = folder.parent
    if not folder.is_dir() or not os.access(folder, os.W_OK | os.X_OK):
        raise InputError(f"{name} {path}: cannot write in {folder}; choose a folder you can write to")
