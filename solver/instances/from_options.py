"""An instance from command-line options: an instance file's keys, overridden by the options given.

Options arrive as text (`"1 2 3"` for the forward times, `"0,1,1,0"` for a placement); this module
turns them into the values `Instance.from_dict` takes. A value given here that is wrong is blamed on
its key, in backticks (`` `num_devices` must be at least 1 ``), not on the instance file; the command
line names the key's option instead (`commands.flags`).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from pipesat.models import Instance, InstanceError, load_instance


def parse_numbers(key: str, text: str | None) -> list[float] | float | None:
    """A list key's value as text: one number (for every stage) or several, space- or comma-separated."""
    if text is None:
        return None
    tokens = text.replace(",", " ").split()
    if not tokens:
        raise InstanceError(f"`{key}` needs at least one number")
    try:
        numbers = [float(token) for token in tokens]
    except ValueError:
        raise InstanceError(f"`{key}` takes numbers, got {text!r}") from None
    return numbers[0] if len(numbers) == 1 else numbers


def build_instance(
    instance_file: Path | None = None,
    config: Path | None = None,
    *,
    num_devices: int | None = None,
    num_microbatches: int | None = None,
    forward_times: str | None = None,
    backward_times: str | None = None,
    weight_times: str | None = None,
    p2p_time: float | None = None,
    chunks: int | None = None,
    placement: str | None = None,
    memory_limit: str | None = None,
    host_link_bandwidth: str | None = None,
    offload_fraction: float | None = None,
) -> Instance:
    """An instance from a file (`instance_file` or `config`, one name for it) and/or options; the options
    win over the file's keys."""
    if instance_file and config and instance_file != config:
        raise InstanceError(f"give the instance once: both {instance_file} and `config` {config}")
    path = instance_file or config
    options = {
        "num_devices": num_devices,
        "num_microbatches": num_microbatches,
        "forward_times": parse_numbers("forward_times", forward_times),
        "backward_times": parse_numbers("backward_times", backward_times),
        "weight_times": parse_numbers("weight_times", weight_times),
        "p2p_time": p2p_time,
        "chunks": chunks,
        "placement": _placement(placement),
        "memory_limit": memory_limit,
        "host_link_bandwidth": host_link_bandwidth,
        "offload_fraction": offload_fraction,
    }
    given = {key: value for key, value in options.items() if value is not None}
    if path is None and ("num_devices" not in given or "num_microbatches" not in given):
        raise InstanceError("give an instance file, or at least `num_devices` and `num_microbatches`")
    try:
        return Instance.from_dict(given) if path is None else load_instance(path, **given)
    except InstanceError as error:
        raise _blame_option(error, path, given) from None


def _blame_option(error: InstanceError, path: Path | None, given: Mapping[str, object]) -> InstanceError:
    """The error, naming the key in backticks (not the instance file) when a value given here is what
    is wrong."""
    text = str(error).removeprefix(f"{path}: " if path is not None else "")
    for key in given:
        if text.startswith((f"{key} ", f"{key}:", f"{key}[")):
            return InstanceError(f"`{key}`" + text[len(key) :])
    return error


def _placement(text: str | None) -> str | list[int] | None:
    """A placement name as given, or a comma-separated stage-to-device list as numbers."""
    if not text or "," not in text:
        return text
    try:
        return [int(device) for device in text.split(",")]
    except ValueError:
        raise InstanceError(f"`placement` list must be device numbers, got {text!r}") from None
