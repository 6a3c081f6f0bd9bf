"""The nouns of pipesat: the instance, the schedule, and the CP-SAT formulation of an instance."""

from models.errors import InputError, InstanceError, PipesatError, ScheduleError
from models.instance import Instance
from models.instance_file import load_instance
from models.schedule import Op, OpKey, Schedule, expected_op_keys, op_duration, op_label

__all__ = [
    "InputError",
    "Instance",
    "InstanceError",
    "Op",
    "OpKey",
    "PipesatError",
    "Schedule",
    "ScheduleError",
    "expected_op_keys",
    "load_instance",
    "op_duration",
    "op_label",
]
