"""What a profile measures: the dtypes it runs in and their defaults."""

from __future__ import annotations

from pipesat.solver.instances.calibration import DTYPE_BYTES
from pipesat.solver.torch.profile_spec import DTYPES


def test_a_calibration_file_names_the_dtypes_a_profile_runs_in() -> None:
    assert set(DTYPES) == set(DTYPE_BYTES)
