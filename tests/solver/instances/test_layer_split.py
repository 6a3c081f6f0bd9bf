"""The layers per stage: an even split over p x v stages or an explicit one, and one line when neither fits."""

from __future__ import annotations

import pytest

from pipesat.models import InstanceError
from pipesat.solver.instances.description import Pipeline
from pipesat.solver.instances.layer_split import layer_split
from tests.solver.instances.transformers import GPT_1_5B


def test_chunks_cut_the_model_into_p_times_v_stages() -> None:
    assert layer_split(GPT_1_5B, Pipeline(devices=4, microbatches=8, chunks=2)) == (3,) * 8
    assert layer_split(GPT_1_5B, Pipeline(8, 24, layers_per_stage=(2, 3, 3, 4, 4, 3, 3, 2))) == (2, 3, 3, 4, 4, 3, 3, 2)


@pytest.mark.parametrize(
    ("pipeline", "message"),
    [
        (
            Pipeline(7, 24),
            "24 layers do not split evenly over 7 x 1 = 7 stages; set pipeline.balance, or give "
            "pipeline.layers_per_stage with 7 counts summing to 24",
        ),
        (
            Pipeline(8, 24, layers_per_stage=(3,) * 7),
            "layers per stage lists 7 counts but there are 8 x 1 = 8 stages; give one count per stage",
        ),
        (
            Pipeline(8, 24, layers_per_stage=(3,) * 7 + (4,)),
            "layers per stage sum to 25 but the model has 24 layers; make them add up",
        ),
    ],
)
def test_a_split_that_does_not_fit_is_one_line(pipeline: Pipeline, message: str) -> None:
    with pytest.raises(InstanceError) as error:
        layer_split(GPT_1_5B, pipeline)
    assert str(error.value) == message
