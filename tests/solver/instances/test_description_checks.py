"""How a description's keys fit together: one clear line, naming the keys, for the first that does not."""

from __future__ import annotations

import dataclasses

import pytest

from pipesat.models import InstanceError
from pipesat.solver.instances.description import Pipeline, Training, Transformer
from pipesat.solver.instances.description_checks import check_description
from tests.solver.instances.transformers import A100, GPT_1_5B, LLAMA_8B, MOE


@pytest.mark.parametrize(
    ("model", "training", "pipeline", "message"),
    [
        (
            dataclasses.replace(GPT_1_5B, heads=25),
            Training(),
            Pipeline(8, 24),
            "hidden 2304 is not divisible by heads 25",
        ),
        (
            dataclasses.replace(LLAMA_8B, kv_heads=5),
            Training(),
            Pipeline(8, 24),
            "heads 32 is not divisible by kv_heads 5",
        ),
        (LLAMA_8B, Training(tensor_parallel=16), Pipeline(8, 24), "tensor parallelism 16 does not divide kv_heads 8"),
        (LLAMA_8B, Training(sequence_parallel=True), Pipeline(8, 24), "give training.tensor_parallel 2 or more"),
        (LLAMA_8B, Training(context_parallel=3), Pipeline(8, 24), "context parallelism 3 does not divide seq_len 4096"),
        (
            LLAMA_8B,
            Training(tensor_parallel=8, sequence_parallel=True, context_parallel=1024),
            Pipeline(8, 24),
            "sequence parallelism needs seq_len 4096 / context parallelism 1024 divisible by tensor parallelism 8",
        ),
        (LLAMA_8B, Training(zero=1), Pipeline(8, 24), "give training.data_parallel 2 or more, or training.zero 0"),
        (
            LLAMA_8B,
            Training(recompute="selective", recompute_layers=2),
            Pipeline(8, 24),
            "recompute_layers counts layers recomputed in full, but recompute is selective; "
            "give training.recompute full, or drop training.recompute_layers",
        ),
        (
            GPT_1_5B,
            Training(),
            Pipeline(8, 24, layers_per_stage=(3,) * 8, balance=True),
            "give pipeline.balance or pipeline.layers_per_stage, not both",
        ),
    ],
)
def test_keys_that_do_not_fit_together_give_one_clear_line(
    model: Transformer, training: Training, pipeline: Pipeline, message: str
) -> None:
    with pytest.raises(InstanceError) as error:
        check_description(model, training, A100, pipeline)
    assert message in str(error.value) and "\n" not in str(error.value)


@pytest.mark.parametrize(
    ("changes", "training", "message"),
    [
        ({"top_k": 17}, Training(), "top_k 17 is more than the 16 experts"),
        ({"dense_layers": 4}, Training(), "dense_layers 4 leaves none of the 4 layers a mixture of experts"),
        ({"experts": 0}, Training(), "shared_experts is given but experts is 0"),
        ({}, Training(expert_parallel=3, data_parallel=3), "expert parallelism 3 does not divide the 16 experts"),
        ({}, Training(expert_parallel=4, data_parallel=2), "expert parallelism 4 does not divide data parallelism 2"),
        ({}, Training(tensor_parallel=3), "tensor parallelism 3 does not divide heads 8"),
        ({"expert_ffn_hidden": 500}, Training(tensor_parallel=8), "does not divide expert_ffn_hidden 500"),
        ({}, Training(data_parallel=2, zero=3), "ZeRO 3 with experts is not modelled"),
    ],
)
def test_mixture_of_experts_keys_that_do_not_fit_are_one_line(
    changes: dict[str, int], training: Training, message: str
) -> None:
    with pytest.raises(InstanceError, match=message):
        check_description(dataclasses.replace(MOE, **changes), training, A100, Pipeline(devices=1, microbatches=1))
