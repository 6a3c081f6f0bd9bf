"""The nouns of pipesat: the instance, ops and their dependency rule, the schedule, objectives and
statuses, the one float tolerance, the solver's tuning, and errors. Imports nothing else of pipesat."""

from pipesat.models.errors import InputError, InstanceError, OptionError, PipesatError, ScheduleError
from pipesat.models.instance import Instance
from pipesat.models.instance_file import load_instance
from pipesat.models.objective import TIME_OBJECTIVES, Minimize, Objective, Status
from pipesat.models.ops import (
    KINDS,
    OpKey,
    Pair,
    Step,
    dependency,
    expected_op_keys,
    memory_change,
    op_duration,
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
    "dependency",
    "expected_op_keys",
    "load_instance",
    "load_tuning",
    "memory_change",
    "op_duration",
    "op_label",
    "pair_duration",
    "pair_error",
    "pair_label",
    "step_keys",
]
