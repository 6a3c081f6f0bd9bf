"""How much work pipesat takes on: caps on the ops of an instance and of a CP-SAT model, checked
before anything is built.

A few bytes of input can ask for billions of ops (`num_microbatches: 1e9`), which would fill the
machine's memory long before any message. Every instance is measured when it is made: above
`max_ops()` ops it is refused with one line that names the cap, `max_ops` (`set_max_ops`, `allow_ops`;
the command line's option of that name). A CP-SAT model takes far more memory per op
(benchmarks/experiments/2026-11-24_cpsat-model-memory), so a solve refuses a model of more than
`max_model_ops()` ops before building it (the cap `max_model_ops`), where the machine's memory would
otherwise run out first. An input file is read only up to `max_input_bytes()` (the cap `max_input_mb`,
`models.document.read_input`), and the counts that size a model have caps of their own (`check_cap`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar

from pipesat.models.errors import InputError, InstanceError

DEFAULT_MAX_OPS = 1_000_000
DEFAULT_MAX_MODEL_OPS = 250_000
DEFAULT_MAX_INPUT_MB = 64
"""The largest input file read, in MiB: the largest instance shipped is a few KB, a calibration of every
shape a plan tries some hundred KB."""
DEFAULT_MAX_LAYERS = 10_000
"""The most layers a model may have (`plan` and `instance from-model`; Llama 3 405B has 126)."""
MAX_EXPERTS = 4096
"""The most routed experts a mixture-of-experts layer may have (DeepSeek-V3 has 256): the cost model
lists each expert's matmuls."""
_MAX_OPS: ContextVar[int] = ContextVar("max_ops", default=DEFAULT_MAX_OPS)
_MAX_MODEL_OPS: ContextVar[int] = ContextVar("max_model_ops", default=DEFAULT_MAX_MODEL_OPS)
_MAX_INPUT_MB: ContextVar[int] = ContextVar("max_input_mb", default=DEFAULT_MAX_INPUT_MB)


def max_ops() -> int:
    """The most ops an instance may have here."""
    return _MAX_OPS.get()


def max_model_ops() -> int:
    """The most ops a CP-SAT model may have here."""
    return _MAX_MODEL_OPS.get()


def set_max_ops(ops: int, model_ops: int = DEFAULT_MAX_MODEL_OPS) -> None:
    """Set the caps for the rest of this context (the command line's options of their names)."""
    if ops < 1 or model_ops < 1:
        raise InputError(f"`max_ops` and `max_model_ops` must be at least 1, got {ops} and {model_ops}")
    _MAX_OPS.set(ops)
    _MAX_MODEL_OPS.set(model_ops)


def max_input_mb() -> int:
    """The largest input file read here, in MiB."""
    return _MAX_INPUT_MB.get()


def max_input_bytes() -> int:
    """The largest input file read here, in bytes."""
    return max_input_mb() << 20


def set_max_input_mb(megabytes: int) -> None:
    """Set the largest input file read (MiB) for the rest of this context (the command line's option of its name)."""
    if megabytes < 1:
        raise InputError(f"`max_input_mb` must be at least 1, got {megabytes}")
    _MAX_INPUT_MB.set(megabytes)


def check_cap(key: str, value: int, cap: int, name: str, whose: str = "the", check: str = "the sizes") -> None:
    """Refuse a count `key` beyond its cap `name` (the command line's option of that name), in one line."""
    if value > cap:
        raise InputError(
            f"{key} {value:,} is more than {whose} limit of {cap:,}; check {check}, or raise the limit with `{name}`"
        )


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
            "check the sizes, or raise the limit with `max_ops`"
        )


def _count(number: int) -> str:
    """`1,234,567`, or `about 10^308` for a number too long to read."""
    return f"{number:,}" if number < 10**15 else f"about 10^{len(str(number)) - 1}"


def check_model_size(ops: int) -> None:
    """Refuse a CP-SAT model of more than `max_model_ops()` ops, before it is built."""
    if ops > max_model_ops():
        raise InstanceError(
            f"the CP-SAT model would have {_count(ops)} ops, more than the limit of {max_model_ops():,} "
            "(about 7.5 KB of memory an op); the handwritten schedules need no model (`pipesat schedule`, "
            "a comparison without the solver), or raise the limit with `max_model_ops`"
        )
