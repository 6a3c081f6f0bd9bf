"""What a launch file is written from (`LaunchInput`), apart from the writers that read it, so that
each writer and the package's `WRITERS` import it one way."""

from __future__ import annotations

from dataclasses import dataclass

from pipesat.models.plan_result import Configuration
from pipesat.models.schedule import Schedule
from pipesat.solver.plan.spec import PlanSpec


@dataclass(frozen=True, kw_only=True)
class LaunchInput:
    """What a launch file is written from: the plan's spec, the chosen configuration, its validated
    schedule, the schedule's maker as the plan names it (`zb-v`, `cp-sat`), and the launch file's name."""

    spec: PlanSpec
    config: Configuration
    schedule: Schedule
    schedule_name: str
    launch_name: str
