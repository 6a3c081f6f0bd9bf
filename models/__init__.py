"""The nouns of pipesat: the instance, ops and their dependency rule, the schedule, objectives and
statuses, the one float tolerance, the solver's tuning, and errors. Imports nothing else of pipesat."""

from pipesat.models.errors import InputError, InstanceError, OptionError, PipesatError, ScheduleError
from pipesat.models.instance import Instance
from pipesat.models.instance_file import load_instance
from pipesat.models.objective import TIME_OBJECTIVES, Minimize, Objective, Status
from pipesat.models.ops import (
    KINDS,
    Kind,
    OpKey,
    Pair,
    Step,
    backward_kinds,
    dependency,
    expected_op_keys,
    last_kind,
    memory_change,
    op_duration,
    op_kinds,
    op_label,
    pair_duration,
    pair_error,
    pair_label,
    step_keys,
)
from pipesat.models.schedule import Op, Schedule
from pipesat.models.tuning import Tuning, load_tuning

__all__ = [
    "KINDS",
    "TIME_OBJECTIVES",
    "InputError",
    "Instance",
    "InstanceError",
    "Kind",
    "Minimize",
    "Objective",
    "Op",
    "OpKey",
    "OptionError",
    "Pair",
    "PipesatError",
    "Schedule",
    "ScheduleError",
    "Status",
    "Step",
    "Tuning",
    "backward_kinds",
    "dependency",
    "expected_op_keys",
    "last_kind",
    "load_instance",
    "load_tuning",
    "memory_change",
    "op_duration",
    "op_kinds",
    "op_label",
    "pair_duration",
    "pair_error",
    "pair_label",
    "step_keys",
]
