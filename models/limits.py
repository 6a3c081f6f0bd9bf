"""How much work pipesat takes on: a cap on the ops of an instance, checked before anything is built.

A few bytes of input can ask for billions of ops (`num_microbatches: 1e9`), which would fill the
machine's memory long before any message. Every instance is measured when it is made: above
`max_ops()` ops it is refused with one line that names the way to raise the cap
(`pipesat --max-ops N ...`, or `allow_ops` in code).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar

from models.errors import InputError, InstanceError

DEFAULT_MAX_OPS = 1_000_000
_MAX_OPS: ContextVar[int] = ContextVar("max_ops", default=DEFAULT_MAX_OPS)


def max_ops() -> int:
    """The most ops an instance may have here."""
    return _MAX_OPS.get()


def set_max_ops(ops: int) -> None:
    """Set the cap for the rest of this context (the command line's `--max-ops`)."""
    if ops < 1:
        raise InputError(f"--max-ops must be at least 1, got {ops}")
    _MAX_OPS.set(ops)


@contextlib.contextmanager
def allow_ops(ops: int) -> Iterator[None]:
    """The cap raised (or lowered) to `ops` inside a `with` block."""
    token = _MAX_OPS.set(ops)
    try:
        yield
    finally:
        _MAX_OPS.reset(token)


def check_work(num_devices: int, chunks: int, num_microbatches: int, kinds: int) -> None:
    """Refuse an instance of more than `max_ops()` ops, before any list of that size is made."""
    ops = num_devices * chunks * num_microbatches * kinds
    if ops > max_ops():
        sizes = f"{_count(num_devices)} devices x {_count(chunks)} chunks x {_count(num_microbatches)} microbatches"
        raise InstanceError(
            f"{_count(ops)} ops ({sizes} x {kinds} kinds) is more than the limit of {max_ops():,}; "
            "check the sizes, or raise the limit with `pipesat --max-ops N`"
        )


def _count(number: int) -> str:
    """`1,234,567`, or `about 10^308` for a number too long to read."""
    return f"{number:,}" if number < 10**15 else f"about 10^{len(str(number)) - 1}"
