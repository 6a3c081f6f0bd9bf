"""Balanced layers per stage: the smallest slowest stage, checked against every split by brute force."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipesat.models import InstanceError
from pipesat.solver.instances.description import Hardware, Pipeline, Training, Transformer
from pipesat.solver.instances.layer_balance import balanced_split, slowest_stage_ms
from tests.strategies import PROPERTY_SETTINGS

H100 = Hardware(tflops=989, efficiency=0.45)
LLAMA_8B = Transformer(32, 4096, 32, 4096, vocab=128256, kv_heads=8, ffn_hidden=14336)


def _every_split(layers: int, stages: int, head: bool):
    for cuts in itertools.combinations_with_replacement(range(layers + 1), stages - 1):
        counts = [b - a for a, b in itertools.pairwise((0, *cuts, layers))]
        if all(c >= 1 for c in counts[:-1]) and (counts[-1] >= 1 or head):
            yield tuple(counts)


@PROPERTY_SETTINGS
@given(
    layers=st.integers(min_value=3, max_value=12),
    stages=st.integers(min_value=1, max_value=4),
    vocab=st.sampled_from([0, 1000, 32000, 128256]),
    recomputed=st.sampled_from([None, 0, 1, 2, 5]),
)
def test_no_split_has_a_faster_slowest_stage(layers: int, stages: int, vocab: int, recomputed: int | None) -> None:
    # recomputed: None keeps every layer; else full recomputation of that many layers a stage (0: all).
    model = Transformer(layers, 1024, 8, 1024, vocab=vocab)
    training = Training() if recomputed is None else Training(recompute="full", recompute_layers=recomputed)
    if stages > layers:
        return
    split = balanced_split(model, training, H100, Pipeline(stages, 4))
    assert sum(split) == layers and len(split) == stages
    best = min(slowest_stage_ms(s, model, training, H100) for s in _every_split(layers, stages, vocab > 0))
    assert slowest_stage_ms(split, model, training, H100) == pytest.approx(best)


def test_llama_8b_on_8_devices_moves_layers_off_the_head_stage() -> None:
    split = balanced_split(LLAMA_8B, Training(), H100, Pipeline(8, 32, balance=True))
    assert split == (4, 4, 4, 4, 4, 5, 5, 2)  # the leftover layers are taken from the first stages
    even = (4,) * 8
    assert slowest_stage_ms(split, LLAMA_8B, Training(), H100) < slowest_stage_ms(even, LLAMA_8B, Training(), H100)


def test_fewer_layers_than_stages_is_refused() -> None:
    with pytest.raises(InstanceError, match="3 layers cannot give each of the 8 stages one"):
        balanced_split(Transformer(3, 1024, 8, 1024), Training(), H100, Pipeline(8, 4))
