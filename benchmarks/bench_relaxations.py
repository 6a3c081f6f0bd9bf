"""Which constraints hold a span proof back: relaxations of the max-span model, solved by CP-SAT alone.

    python benchmarks/bench_relaxations.py [--workers 2] [--seeds 0] [--only NAME,...] [--floor]

Each row is the max-span model of an instance (`solver.cpsat.build_model`, memory precedences and
all) with some of its per-device constraints left out, solved by CP-SAT's own portfolio from no
hint: the `whole` model; `memory on D`, the memory cumulatives of the devices D alone (the others
keep their memory precedences, which the limit implies, so it is a relaxation); `memory on D, order
on E`, as well the no-overlaps of the devices E alone; `only D`, the no-overlaps and cumulatives of
D alone (the other devices run any number of ops at once, their memory precedences kept). A
relaxation's optimum is a lower bound on the whole model's, so a relaxation proven at a valid
schedule's value proves that schedule optimal. `--floor` puts the analytic lower bound into the
objective's domain, as the solve does. Each row prints CP-SAT's status, value and bound, the wall
time, and whether its schedule is valid under every limit (the validator's verdict on the schedule
timed for the least max span).
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass

from bench_proofs import v_case
from bench_targets import random_instances
from ortools.sat.python import cp_model
from results_header import results_header

from pipesat.models import Instance, Objective
from pipesat.solver.cpsat.data import model_data
from pipesat.solver.cpsat.model import PipelineModel, build_model
from pipesat.solver.cpsat.scale import ceil_ticks
from pipesat.solver.evaluate.bounds import lower_bound
from pipesat.solver.evaluate.retime import timed_for
from pipesat.solver.evaluate.validator import validate


@dataclass(frozen=True)
class Relaxation:
    """The devices that keep their memory cumulative and those that keep their no-overlap (None:
    every device)."""

    memory_on: tuple[int, ...] | None = None
    no_overlap_on: tuple[int, ...] | None = None

    @property
    def name(self) -> str:
        if self.memory_on is None and self.no_overlap_on is None:
            return "whole"
        if self.memory_on == self.no_overlap_on:
            return f"only {_devices(self.memory_on)}"
        name = f"memory on {_devices(self.memory_on)}"
        return name if self.no_overlap_on is None else f"{name}, order on {_devices(self.no_overlap_on)}"


def _devices(devices: tuple[int, ...] | None) -> str:
    return "all" if devices is None else ",".join(map(str, devices))


def memory_on(*devices: int) -> Relaxation:
    return Relaxation(memory_on=devices)


def only(*devices: int) -> Relaxation:
    return Relaxation(memory_on=devices, no_overlap_on=devices)


WHOLE = Relaxation()
TARGETS = random_instances(2, 8, 400)  # bench_targets' instances of up to 400 ops
CASES: list[tuple[str, Instance, list[Relaxation], float]] = [
    # Device 2 (the turn) carries 91 units of work, devices 0 and 1 77 each.
    ("targets 400-op #7", TARGETS[7], [WHOLE, memory_on(2), memory_on(1, 2), Relaxation((2,), (1, 2)), only(2)], 90.0),
    # Devices 1 and 2 carry 125 units each, device 0 110.
    ("targets 400-op #5", TARGETS[5], [WHOLE, memory_on(1, 2), memory_on(2), memory_on(1)], 60.0),
    ("V p8 m16 limit 10", v_case(8, 16, 10).instance, [WHOLE, memory_on(7)], 60.0),
    ("V p4 m12 limit 6", v_case(4, 12, 6).instance, [WHOLE, memory_on(0), memory_on(3)], 60.0),
]


def relaxed_model(instance: Instance, relaxation: Relaxation, floor: bool) -> PipelineModel:
    """The max-span model of `instance` without the constraints `relaxation` leaves out; with `floor`,
    its objective at least the analytic lower bound."""
    split = instance.weight_times is not None
    model = build_model(model_data(instance, objective=Objective.SPAN, split_backward=split))
    devices = range(instance.num_devices)
    no_overlaps = iter(devices)  # one no-overlap per device, in device order
    cumulatives = iter([d for d in devices if model.variables.held[d]])  # one per device holding memory
    for constraint in model.cp_model.proto.constraints:
        if constraint.has_no_overlap():
            kept = relaxation.no_overlap_on
            if kept is not None and next(no_overlaps) not in kept:
                constraint.clear_no_overlap()
        elif constraint.has_cumulative():
            kept = relaxation.memory_on
            if kept is not None and next(cumulatives) not in kept:
                constraint.clear_cumulative()
    if floor:
        analytic = lower_bound(model.data.tick_instance, Objective.SPAN, split)
        model.cp_model.add(model.variables.minimized >= ceil_ticks(analytic))
    return model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seeds", default="0", help="CP-SAT seeds, separated by commas")
    parser.add_argument("--only", default="", help="case names' starts, separated by commas")
    parser.add_argument("--floor", action="store_true", help="the analytic bound in the objective's domain")
    args = parser.parse_args()
    wanted = [part.strip() for part in args.only.split(",") if part.strip()]
    seeds = [int(seed) for seed in args.seeds.split(",")]
    print(results_header())
    print(f"{args.workers} workers, CP-SAT's own portfolio, no hint{', analytic floor' if args.floor else ''}")
    print(
        f"{'instance':<18} {'relaxation':<26} {'seed':>4} {'status':>9} {'value':>7} {'bound':>7} {'time s':>7}  valid"
    )
    for name, instance, relaxations, seconds in CASES:
        if wanted and not any(name.startswith(w) for w in wanted):
            continue
        for relaxation in relaxations:
            for seed in seeds:
                model = relaxed_model(instance, relaxation, args.floor)
                solver = cp_model.CpSolver()
                solver.parameters.num_workers = args.workers
                solver.parameters.random_seed = seed
                solver.parameters.max_time_in_seconds = seconds
                started = time.monotonic()
                status = solver.solve(model.cp_model)
                wall = time.monotonic() - started
                per = model.data.ticks_per_unit
                value, valid = "-", "-"
                if status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
                    value = f"{solver.objective_value / per:g}"
                    orders = model.orders(solver.value)
                    valid = "yes" if not validate(timed_for(Objective.SPAN, instance, orders)) else "no"
                bound = f"{solver.best_objective_bound / per:g}"
                print(
                    f"{name:<18} {relaxation.name:<26} {seed:>4} {solver.status_name(status):>9} {value:>7} {bound:>7} "
                    f"{wall:>7.1f}  {valid}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
