"""Reading instance files (YAML or JSON) into an `Instance`, with parse errors that say where."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from pipesat.models.document import read_document, write_text
from pipesat.models.errors import InstanceError
from pipesat.models.instance import Instance
from pipesat.models.instance_fields import ALIASES


def read_mapping(path: str | Path) -> dict[str, Any]:
    """Parse a YAML or JSON instance file (`models.document`) into a mapping."""
    data = read_document(path, "instance file")
    if not isinstance(data, dict):
        raise InstanceError(f"{path}: an instance file must hold a mapping of keys to values")
    return data


def load_instance(path: str | Path, **overrides: Any) -> Instance:
    """Load an instance file; `overrides` (non-None values) replace the file's keys.

    Parameters
    ----------
    path
        An instance file (YAML or JSON), the earlier tool's keys included.
    **overrides
        Keys that replace the file's (`memory_limit="0.5x"`); None values are ignored.

    Returns
    -------
    Instance
        The normalised instance (`pipesat instance show` prints its `to_dict()`).

    Raises
    ------
    InputError
        A file that cannot be read or parsed.
    InstanceError
        A key or value that is not an instance's.
    """
    data = read_mapping(path)
    given = {key: value for key, value in overrides.items() if value is not None}
    for alias, canonical in ALIASES.items():
        if canonical in given or alias in given:
            data.pop(alias, None)
            data.pop(canonical, None)
    data.update(given)
    try:
        instance = Instance.from_dict(data)
    except InstanceError as error:
        raise InstanceError(f"{path}: {error}") from None
    if not instance.name:
        instance = dataclasses.replace(instance, name=Path(path).stem)
    return instance


def format_instance(instance: Instance, comments: Sequence[str] = (), as_json: bool = False) -> str:
    """The text of an instance file that `load_instance` reads back: YAML with `comments` as leading
    `#` lines, or JSON (which has no comments)."""
    data = {key: value for key, value in instance.to_dict().items() if value not in (None, "")}
    if as_json:
        return json.dumps(data, indent=1, allow_nan=False) + "\n"
    header = "".join(f"# {line}".rstrip() + "\n" for line in comments)
    return header + yaml.safe_dump(data, sort_keys=False, default_flow_style=None, allow_unicode=True, width=100)


def save_instance(instance: Instance, path: str | Path, comments: Sequence[str] = ()) -> Path:
    """Write an instance file (JSON for a `.json` suffix, else YAML), atomically."""
    path = Path(path)
    return write_text(path, format_instance(instance, comments, as_json=path.suffix.lower() == ".json"))
