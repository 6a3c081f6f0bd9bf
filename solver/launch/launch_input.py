"""What a launch writer is given: the plan's spec and the configuration it chose, with its schedule."""

from __future__ import annotations

from dataclasses import dataclass

from pipesat.models import Schedule
from pipesat.models.plan_result import Configuration
from pipesat.solver.plan.spec import PlanSpec


@dataclass(frozen=True, kw_only=True)
class LaunchInput:
    """The chosen configuration to write in a runtime's own terms: the plan's `spec`, the
    `config`, its `schedule` (validated) and who made it (`schedule_name`, as `ConfigResult.made_by`
    holds it: `1f1b`, `zb-v`, `cp-sat ...`, `1F1B with W split out`), and `launch_name`, the file
    name of the launch file (its folder is where every file a writer returns is written)."""

    spec: PlanSpec
    config: Configuration
    schedule: Schedule
    schedule_name: str
    launch_name: str

    @property
    def sequence_parallel(self) -> bool:
        """Whether the configuration runs sequence parallelism: the plan's `sequence_parallel` with t > 1
        (what the plan timed, `solver.plan.space`)."""
        return self.spec.sequence_parallel and self.config.tensor_parallel > 1
