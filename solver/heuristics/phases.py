"""One-forward-one-backward orders in three phases, run plainly or with overlapped pairs.

1F1B and interleaved 1F1B share a shape: warm-up forwards, a steady state of (forward, backward)
steps, cool-down backwards. Their overlapped variants (Megatron-Core's with the MoE all-to-all
overlapped) run each steady forward as a pair with the backward after it, whenever the two are of
different microbatches; the warm-up and cool-down ops run alone.
"""

from __future__ import annotations

from dataclasses import dataclass

from pipesat.models import OpKey, Pair, Step


@dataclass(frozen=True)
class Phases:
    """One rank's order: its warm-up forwards, its steady (forward, backward) steps, its cool-down backwards."""

    warmup: list[OpKey]
    steady: list[tuple[OpKey, OpKey]]
    cooldown: list[OpKey]

    def ops(self) -> list[OpKey]:
        """The order with every op alone."""
        return [*self.warmup, *(key for step in self.steady for key in step), *self.cooldown]

    def overlapped(self) -> list[Step]:
        """The order with each steady step an overlapped pair (alone when of one microbatch)."""
        steady: list[Step] = []
        for forward, backward in self.steady:
            same = forward.microbatch == backward.microbatch
            steady += [forward, backward] if same else [Pair(forward, backward)]
        return [*self.warmup, *steady, *self.cooldown]
