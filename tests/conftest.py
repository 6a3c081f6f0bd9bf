"""Shared fixtures and the one instance builder of the tests. Hypothesis strategies live in tests/strategies.py."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import pytest

from pipesat.models import Instance

ROOT = Path(__file__).resolve().parent.parent
INSTANCES_DIR = ROOT / "instances"

# A shell starts a background job (`cmd &`, no job control) with SIGINT ignored, and Python then keeps
# it ignored; the tests of Ctrl-C in this process need it to reach Python, as at a terminal.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def make_instance(p: int, m: int, **fields: Any) -> Instance:
    """p devices and m microbatches; `fields` are any other keys of an instance file (times, memory, limit)."""
    return Instance.from_dict({"num_devices": p, "num_microbatches": m, **fields})


def moe_instance(p: int, m: int, placement: str = "vshape", comm: float = 0.45, **fields: Any) -> Instance:
    """A MoE-like instance: F = B = W = 1 per device, the expert all-to-all `comm` of F and of B (0.45:
    30% of a layer's F + B + W), two chunks per device unless the placement is linear."""
    times = {"forward_times": 1, "backward_times": 1, "weight_times": 1}
    chunks = 1 if placement == "linear" else 2
    comm_times = {"forward_comm_times": comm, "backward_comm_times": comm}
    return make_instance(p, m, chunks=chunks, placement=placement, **times, **comm_times, **fields)


@pytest.fixture
def one_f_one_b_instance() -> Instance:
    """The hand-computed 1F1B case: p=4, m=8, F=1, B=2 (the default times, fused backward), no p2p."""
    return make_instance(4, 8, forward_times=1, backward_times=2)


@pytest.fixture
def split_instance() -> Instance:
    """A small split-backward instance with p2p: p=2, m=2, F=1, B=1, W=0.5, M_B=2, M_W=1."""
    times = {"forward_times": 1, "backward_times": 1, "weight_times": 0.5, "p2p_time": 0.5}
    return make_instance(2, 2, **times, activation_memory=2, weight_memory=1)


@pytest.fixture
def hard_instance() -> Instance:
    """p=4, m=12, uneven stages under a 0.9x limit: the bound does not close it at once, so a search runs
    long enough to be interrupted, stopped at a gap or compared between two runs."""
    times = {"forward_times": [5, 4, 6, 5], "backward_times": [6, 7, 5, 6], "weight_times": [4, 3, 4, 5]}
    return make_instance(4, 12, **times, p2p_time=1, memory_limit="0.9x")


def linked_file(folder: Path) -> tuple[Path, Path]:
    """`folder/latest.json`, a symbolic link to an existing file `folder/runs/best.json` (link, target)."""
    target = folder / "runs" / "best.json"
    target.parent.mkdir()
    target.write_text("old")
    link = folder / "latest.json"
    link.symlink_to(target)
    return link, target
