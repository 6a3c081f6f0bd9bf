"""Counting the FLOPs torch runs (its own formulas, by operator), for the profile's tests: work counted
is exact where a wall clock on a shared machine is noise."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

torch = pytest.importorskip("torch")
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402
from torch.utils.flop_counter import flop_registry  # noqa: E402


class CountedFlops(TorchDispatchMode):
    """Counts the FLOPs of every operation torch runs while active (`total`; torch has no formula for
    some, such as the CPU's flash attention) and the calls of each operation (`calls`, by name)."""

    def __init__(self) -> None:
        super().__init__()
        self.total = 0
        self.calls: Counter[str] = Counter()

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        self.calls[str(func._overloadpacket)] += 1
        if func._overloadpacket in flop_registry:
            self.total += flop_registry[func._overloadpacket](*args, **kwargs, out_val=out)
        return out
