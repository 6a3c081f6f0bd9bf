"""The modes a training runs in that a configuration, the cost model and the plan all name: its
activation recomputation and its ZeRO stage (docs/cost-model.md).

They are `Literal`s, not enums, so that the values a spec, an instance description or a calibration
file holds are plain strings and ints, written to YAML and JSON as they were read.
"""

from __future__ import annotations

from typing import Literal, get_args

Recompute = Literal["none", "selective", "full"]
"""Activation recomputation: none, selective (the attention core) or full (the whole layer, B runs F again)."""
RECOMPUTE: tuple[Recompute, ...] = get_args(Recompute)

ZeroStage = Literal[0, 1, 2, 3]
"""What is sharded over the data-parallel replicas: 0 nothing, 1 the optimizer state, 2 and the
gradients, 3 and the weights (FSDP)."""
