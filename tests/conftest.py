"""Shared fixtures. Reusable hypothesis strategies live in tests/strategies.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from models import Instance

ROOT = Path(__file__).resolve().parent.parent
INSTANCES_DIR = ROOT / "instances"


@pytest.fixture
def one_f_one_b_instance() -> Instance:
    """The hand-computed case of issue 2: p=4, m=8, F=1, B=2 (fused backward), no p2p."""
    return Instance.from_dict({"num_devices": 4, "num_microbatches": 8, "forward_times": 1, "backward_times": 2})


@pytest.fixture
def split_instance() -> Instance:
    """A small split-backward instance with p2p: p=2, m=2, F=1, B=1, W=0.5, M_B=2, M_W=1."""
    return Instance.from_dict(
        {
            "num_devices": 2,
            "num_microbatches": 2,
            "forward_times": 1,
            "backward_times": 1,
            "weight_times": 0.5,
            "p2p_time": 0.5,
            "activation_memory": 2,
            "weight_memory": 1,
        }
    )
