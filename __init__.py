"""pipesat: optimal pipeline-parallel training schedules with OR-Tools CP-SAT.

The public Python API. An instance says what is scheduled; a handwritten schedule, `solve` (CP-SAT,
with its proof), `compare`, the Pareto studies and `plan` make schedules (`predict`: one configuration
of a plan as it runs); every schedule that leaves pipesat has passed `validate`. `torch_schedule` hands a schedule to `torch.distributed.pipelining`
(the `torch` extra). The repository's folders `models/` (the nouns) and `solver/` (the verbs) are the
subpackages `pipesat.models` and `pipesat.solver`; `pipesat.cli` is the command line. `with
show_log(): ...` prints what the solves decide and CP-SAT's own search log (the `pipesat` loggers).

Every command has a twin here, with the command's defaults (docs/api.md lists them with their
parameters):

    pipesat check              load_schedule, validate (ensure_valid raises)
    pipesat schedule NAME      run_heuristic (all_heuristics: the names)
    pipesat render             plot_schedule, render_ascii (--ascii)
    pipesat solve              solve
    pipesat compare            compare, compare_placements (--placements)
    pipesat pareto             pareto_frontier, pareto_sweep (--limits; parse_limits reads them)
    pipesat instance show      load_instance, Instance.to_dict
    pipesat instance from-model  instance_from_model
    pipesat profile            profile_instance (ProfileSpec; the torch extra)
    pipesat calibrate          calibrate (the torch extra)
    pipesat export             export_torch_csv, export_chrome_trace
    pipesat import             import_torch_csv, import_torch_schedule
    pipesat torch-run          torch_run (the torch extra)
    pipesat plan               plan (load_spec, spec_from_dict, PlanOptions); --predict: predict

Units: an instance's numbers, and everything computed from them (`Schedule`, `Metrics`,
`SolveResult`, `ParetoResult`, `Comparison`), are in its `time_unit` and `memory_unit` (`from-model`:
ms and MiB). A plan's results (`PlanResult`, `Prediction`) are in ms and bytes, as a plan spec's
amounts are: the field names say ms (`iteration_ms`) and the docstrings bytes (`memory_per_gpu`).

Each name is imported on first use (PEP 562), so that `import pipesat` and the command line, which
imports this package first, do not load OR-Tools, numpy and matplotlib before a command needs them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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
    from pipesat.solver.instances.from_model import instance_from_model
    from pipesat.solver.io.chrome_trace import export_chrome_trace
    from pipesat.solver.io.schedule_file import load_schedule, save_schedule
    from pipesat.solver.plan.executors import LocalExecutor, RayExecutor
    from pipesat.solver.plan.predict import Prediction, parse_configuration, predict
    from pipesat.solver.plan.search import PlanOptions, plan
    from pipesat.solver.plan.spec import PlanSpec, load_spec, spec_from_dict
    from pipesat.solver.report.ascii_view import render_ascii
    from pipesat.solver.report.schedule_plot import plot_schedule
    from pipesat.solver.solve import solve
    from pipesat.solver.studies.compare import Comparison, ComparisonRow, compare, compare_placements
    from pipesat.solver.studies.pareto import ParetoResult, pareto_frontier, pareto_sweep, parse_limits
    from pipesat.solver.torch.export import export_torch_csv
    from pipesat.solver.torch.import_schedule import import_torch_csv, import_torch_schedule
    from pipesat.solver.torch.profile import calibrate, profile_instance
    from pipesat.solver.torch.profile_spec import ProfileSpec
    from pipesat.solver.torch.run import torch_run
    from pipesat.solver.torch.schedule import torch_schedule

_HOMES = {
    "pipesat.models": (
        "InputError",
        "Instance",
        "InstanceError",
        "Minimize",
        "Objective",
        "Op",
        "OpKey",
        "OptionError",
        "PipesatError",
        "Schedule",
        "ScheduleError",
        "Status",
        "load_instance",
    ),
    "pipesat.models.log": ("show_log",),
    "pipesat.models.plan_result": ("PlanResult",),
    "pipesat.models.solve_result": ("SolveResult", "StopReason"),
    "pipesat.solver.evaluate.metrics": ("Metrics", "compute_metrics"),
    "pipesat.solver.evaluate.validator": ("Rule", "Violation", "ensure_valid", "validate"),
    "pipesat.solver.heuristics": ("all_heuristics", "run_heuristic"),
    "pipesat.solver.instances.from_model": ("instance_from_model",),
    "pipesat.solver.io.chrome_trace": ("export_chrome_trace",),
    "pipesat.solver.io.schedule_file": ("load_schedule", "save_schedule"),
    "pipesat.solver.plan.executors": ("LocalExecutor", "RayExecutor"),
    "pipesat.solver.plan.predict": ("Prediction", "parse_configuration", "predict"),
    "pipesat.solver.plan.search": ("PlanOptions", "plan"),
    "pipesat.solver.plan.spec": ("PlanSpec", "load_spec", "spec_from_dict"),
    "pipesat.solver.report.ascii_view": ("render_ascii",),
    "pipesat.solver.report.schedule_plot": ("plot_schedule",),
    "pipesat.solver.solve": ("solve",),
    "pipesat.solver.studies.compare": ("Comparison", "ComparisonRow", "compare", "compare_placements"),
    "pipesat.solver.studies.pareto": ("ParetoResult", "pareto_frontier", "pareto_sweep", "parse_limits"),
    "pipesat.solver.torch.export": ("export_torch_csv",),
    "pipesat.solver.torch.import_schedule": ("import_torch_csv", "import_torch_schedule"),
    "pipesat.solver.torch.profile": ("calibrate", "profile_instance"),
    "pipesat.solver.torch.profile_spec": ("ProfileSpec",),
    "pipesat.solver.torch.run": ("torch_run",),
    "pipesat.solver.torch.schedule": ("torch_schedule",),
}
"""The module each public name is imported from (the imports above, for type checkers)."""

_HOME_OF = {name: module for module, names in _HOMES.items() for name in names}

__all__ = [
    "Comparison",
    "ComparisonRow",
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
    "PlanOptions",
    "PlanResult",
    "PlanSpec",
    "Prediction",
    "ProfileSpec",
    "RayExecutor",
    "Rule",
    "Schedule",
    "ScheduleError",
    "SolveResult",
    "Status",
    "StopReason",
    "Violation",
    "all_heuristics",
    "calibrate",
    "compare",
    "compare_placements",
    "compute_metrics",
    "ensure_valid",
    "export_chrome_trace",
    "export_torch_csv",
    "import_torch_csv",
    "import_torch_schedule",
    "instance_from_model",
    "load_instance",
    "load_schedule",
    "load_spec",
    "pareto_frontier",
    "pareto_sweep",
    "parse_configuration",
    "parse_limits",
    "plan",
    "plot_schedule",
    "predict",
    "profile_instance",
    "render_ascii",
    "run_heuristic",
    "save_schedule",
    "show_log",
    "solve",
    "spec_from_dict",
    "torch_run",
    "torch_schedule",
    "validate",
]


if not TYPE_CHECKING:  # type checkers read the imports above, and a name not among them is an error

    def __getattr__(name: str) -> Any:
        """A public name, imported from its module on first use and kept here for the next."""
        module = _HOME_OF.get(name)
        if module is None:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        globals()[name] = value
        return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
