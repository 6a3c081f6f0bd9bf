"""The schedule CSV every torch-based launch names: `pipesat import csv` reads it back to the same
schedule, and the layout the launch files read off the schedule."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from pipesat.models import InputError, step_keys
from pipesat.solver.evaluate.validator import validate
from pipesat.solver.launch.pipeline import csv_name, rank_stages, stage_layers
from pipesat.solver.torch.import_schedule import import_torch_csv
from tests.solver.launch.conftest import PIPELINES, SPEC, launch_files, predicted

TORCH_BASED = ("torch", "torchtitan")
"""The runtimes whose launch names a schedule CSV (Megatron's run their own orders: test_megatron.py)."""


@pytest.mark.parametrize("runtime", TORCH_BASED)
@pytest.mark.parametrize("text", PIPELINES)
def test_the_csv_a_launch_names_imports_back_to_the_same_schedule(runtime: str, text: str, tmp_path: Path) -> None:
    _, schedule, _ = predicted(text)
    files = launch_files(runtime, text, f"{runtime}.py")
    assert list(files) == [f"{runtime}.py", f"{runtime}.csv"]
    assert f'with_name("{runtime}.csv")' in files[f"{runtime}.py"]
    path = tmp_path / f"{runtime}.csv"
    path.write_text(files[f"{runtime}.csv"])
    imported = import_torch_csv(path, schedule.instance)
    assert validate(imported) == []
    assert [[key for step in order for key in step_keys(step)] for order in imported.orders()] == [
        [key for step in order for key in step_keys(step)] for order in schedule.orders()
    ]
    assert imported.pairs == schedule.pairs


def test_a_bidirectional_schedule_has_no_torch_form() -> None:
    for runtime in TORCH_BASED:
        with pytest.raises(InputError, match="bidirectional"):
            launch_files(runtime, "t4 p4 d2 bidirectional b1 m128")


def test_the_layout_is_read_off_the_schedule() -> None:
    _, schedule, _ = predicted(PIPELINES[0])
    assert rank_stages(schedule) == [[0, 7], [1, 6], [2, 5], [3, 4]]
    layers = stage_layers(schedule)
    assert len(layers) == 8 and sum(layers) == SPEC.model.layers
    assert csv_name("out/torchtitan.py") == "torchtitan.csv"


def test_a_schedule_not_derived_from_a_model_has_no_layers_per_stage() -> None:
    _, schedule, _ = predicted(PIPELINES[0])
    bare = dataclasses.replace(schedule, instance=dataclasses.replace(schedule.instance, metadata={}))
    with pytest.raises(InputError, match="layers per stage"):
        stage_layers(bare)
