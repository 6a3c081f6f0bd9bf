"""Activation offload as a dimension of the plan (`training.offload`; docs/plan.md, docs/offload.md).

A configuration offloads `none` (the plan as it was), `selective` or `full`. One that offloads is
derived as any other, then given each device's host link (`cluster.host_link_bandwidth`, GB/s a
direction, in the instance's MiB per ms): its memory is then fitted by the smallest limits with
offload (`bounds.least_offload_limits`), so a layout whose activations fit only with offload is
ranked, not refused; its bounds are those without a memory limit (`Problem.offload`); its
handwritten schedule is PipeOffload's family of its name on its placement (`FAMILIES`: 1F1B's on a
linear pipeline, V-Half's on a V one), and CP-SAT decides its offloads itself. Its schedules are
those that offload (an order without transfers is the configuration without offload's): where the
family does not fit, the one-at-a-time order with everything offloaded (`offloading`).
PipeOffload's schedules run linear and V pipelines only, so the other placements are tried without
offload.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Literal

from pipesat.models import InputError, Instance, PipesatError, Schedule
from pipesat.models.plan_result import Configuration
from pipesat.solver.evaluate.bounds import least_offload_limits, minimum_memory_limits
from pipesat.solver.heuristics import run_heuristic
from pipesat.solver.heuristics.offloaded import NAME as OFFLOADED
from pipesat.solver.heuristics.offloaded import offloaded_one_at_a_time
from pipesat.solver.instances.cost_model import instance_bandwidth
from pipesat.solver.instances.from_model import Derivation
from pipesat.solver.portfolio import Candidate, Problem

Offload = Literal["none", "selective", "full"]
OFFLOADS: tuple[Offload, ...] = ("none", "selective", "full")
"""The offload settings `training.offload` takes, in the order a tie prefers them (none first)."""
FAMILIES: dict[tuple[str, str], str] = {
    ("full", "linear"): "pipeoffload-full-1f1b",
    ("selective", "linear"): "pipeoffload-selective-1f1b",
    ("full", "vshape"): "pipeoffload-full-v",
    ("selective", "vshape"): "pipeoffload-selective-v",
}
"""PipeOffload's handwritten family for each (offload, placement) the plan tries with offload."""
OFFLOAD_PLACEMENTS = tuple(dict.fromkeys(placement for _, placement in FAMILIES))
"""The placements PipeOffload's families run (linear, vshape), the only ones the plan offloads on."""


def offloads(config: Configuration) -> bool:
    return config.offload != "none"


def check_offload_spec(offload: tuple[str, ...], host_link: float | None, where: str = "") -> None:
    """A spec that offloads needs a host link: one line when it has none."""
    if any(setting != "none" for setting in offload) and host_link is None:
        raise InputError(
            f"{where}training.offload {', '.join(offload)} needs a host link; give cluster.host_link_bandwidth "
            "(GB/s a direction), or name the cluster's gpu"
        )


def offload_settings(offload: tuple[Offload, ...], placement: str) -> tuple[Offload, ...]:
    """The settings of `offload` a pipeline of `placement` is tried with: all on a linear or V one,
    none alone elsewhere (no PipeOffload family runs it)."""
    if placement in OFFLOAD_PLACEMENTS:
        return tuple(setting for setting in OFFLOADS if setting in offload)
    return ("none",) if "none" in offload else ()


def host_link(config: Configuration, cluster_link: float | None) -> float | None:
    """The host link a configuration's instance has (instance units, MiB a ms): the cluster's
    `cluster_link` (`cluster.host_link_bandwidth`, GB/s) where it offloads, None where it does not;
    one line when it offloads and the cluster has none."""
    if not offloads(config):
        return None
    check_offload_spec((config.offload,), cluster_link)
    assert cluster_link is not None  # checked just above
    return instance_bandwidth(cluster_link)


def linked(derivation: Derivation, host_link: float | None) -> Derivation:
    """The derivation whose instance has each device's host link `host_link` (instance units; None:
    the derivation as it is)."""
    if host_link is None:
        return derivation
    instance = dataclasses.replace(derivation.instance, host_link_bandwidth=host_link)
    return dataclasses.replace(derivation, instance=instance)


def least_limits(instance: Instance) -> list[float]:
    """Each device's smallest feasible activation limit: with offload when the instance has a host
    link (the plan gives one only to a configuration that offloads), else without."""
    if instance.host_link_bandwidth is None:
        return minimum_memory_limits(instance)
    return least_offload_limits(instance)


def offloading(problem: Problem, candidates: list[Candidate], clock: float) -> list[Candidate]:
    """The candidates of a configuration that offloads: those whose schedule offloads (an order
    without transfers is the configuration without offload's), else the one-at-a-time order with
    everything offloaded, where it fits."""
    found = [candidate for candidate in candidates if candidate.schedule.transfers]
    if found:
        return found
    schedule = offloaded_one_at_a_time(problem.instance, problem.split)
    last = problem.candidate(OFFLOADED, schedule, time.monotonic() - clock)
    return [] if last is None else [last]


def family_schedules(
    config: Configuration, instance: Instance, schedules: tuple[str, ...] | None
) -> list[tuple[str, Schedule]]:
    """The (name, schedule) of PipeOffload's family of the configuration's offload and placement,
    where the restriction `schedules` allows it and its requirement is met (else none)."""
    name = FAMILIES.get((config.offload, config.placement))
    if name is None or (schedules is not None and name not in schedules):
        return []
    try:
        return [(name, run_heuristic(name, instance))]
    except PipesatError:  # its requirement unmet (as `handwritten_schedules` leaves it out)
        return []
