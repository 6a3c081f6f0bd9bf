"""pipesat: optimal pipeline-parallel training schedules with OR-Tools CP-SAT.

The public Python API. An instance says what is scheduled; a handwritten schedule, `solve` (CP-SAT,
with its proof), `compare`, the Pareto studies and `plan` make schedules (`predict`: one configuration
of a plan as it runs); every schedule that leaves pipesat has passed `validate`. `torch_schedule` hands a schedule to `torch.distributed.pipelining`
(the `torch` extra). The repository's folders `models/` (the nouns) and `solver/` (the verbs) are the
subpackages `pipesat.models` and `pipesat.solver`; `pipesat.cli` is the command line. `with
show_log(): ...` prints what the solves decide and CP-SAT's own search log (the `pipesat` loggers).
"""

from pipesat.models import (
    InputError,
    Instance,
    InstanceError,
    Minimize,
    Objective,
    Op,
    OpKey,
    OptionError,
    PipesatError,
    Schedule,
    ScheduleError,
    Status,
    load_instance,
)
from pipesat.models.log import show_log
from pipesat.models.plan_result import PlanResult
from pipesat.models.solve_result import SolveResult, StopReason
from pipesat.solver.evaluate.metrics import Metrics, compute_metrics
from pipesat.solver.evaluate.validator import Rule, Violation, ensure_valid, validate
from pipesat.solver.heuristics import all_heuristics, run_heuristic
from pipesat.solver.io.schedule_file import load_schedule, save_schedule
from pipesat.solver.plan.executors import LocalExecutor, RayExecutor
from pipesat.solver.plan.predict import Prediction, parse_configuration, predict
from pipesat.solver.plan.search import plan
from pipesat.solver.plan.spec import PlanSpec, load_spec
from pipesat.solver.solve import solve
from pipesat.solver.studies.compare import Comparison, compare
from pipesat.solver.studies.pareto import ParetoResult, pareto_frontier, pareto_sweep
from pipesat.solver.torch.export import export_torch_csv
from pipesat.solver.torch.import_schedule import import_torch_csv, import_torch_schedule
from pipesat.solver.torch.schedule import torch_schedule

__all__ = [
    "Comparison",
    "InputError",
    "Instance",
    "InstanceError",
    "LocalExecutor",
    "Metrics",
    "Minimize",
    "Objective",
    "Op",
    "OpKey",
    "OptionError",
    "ParetoResult",
    "PipesatError",
    "PlanResult",
    "PlanSpec",
    "Prediction",
    "RayExecutor",
    "Rule",
    "Schedule",
    "ScheduleError",
    "SolveResult",
    "Status",
    "StopReason",
    "Violation",
    "all_heuristics",
    "compare",
    "compute_metrics",
    "ensure_valid",
    "export_torch_csv",
    "import_torch_csv",
    "import_torch_schedule",
    "load_instance",
    "load_schedule",
    "load_spec",
    "pareto_frontier",
    "pareto_sweep",
    "parse_configuration",
    "plan",
    "predict",
    "run_heuristic",
    "save_schedule",
    "show_log",
    "solve",
    "torch_schedule",
    "validate",
]
