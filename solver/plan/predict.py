"""One configuration predicted as it runs (`pipesat plan`'s predict option): its handwritten schedule as
configured, no search, through the plan's own code (`space.description`, `from_model.derive`,
`measure`), the way a user checks the plan against their own run.

A configuration is written as the plan's table and `best:` line write it (`Configuration.label`),
with the schedule's name after it or not:

    t4 [cp2] p2 d8 [ep4] [linear|interleaved v2|vshape|bidirectional] b1 m16 [full-recompute|
    selective-recompute|3-layer-recompute] [zero1] [full-offload|selective-offload] [SCHEDULE]

Its words in any order, each once; t, p, d, b and m are required; cp and ep are 1, recomputation
none and ZeRO 0 unless written (as the label leaves them out); the placement is linear without v
and interleaved with it; `full` and `selective` stand for `full-recompute` and `selective-recompute`.
SCHEDULE is any name `pipesat schedule` takes; without it, the framework's own: 1F1B (linear),
Megatron's interleaved 1F1B (interleaved), ZB-V (vshape), DualPipe (bidirectional), and with an
offload PipeOffload's of that offload on the placement (`offload.FAMILIES`: linear and vshape), over
the cluster's host link (`cluster.host_link_bandwidth`).

The configuration is held to the cluster and the batch (t·cp·p·d GPUs, b·m·d sequences) and to the
cost model's checks, not to the search's policy (tensor parallelism within a node): asked for alone,
it is predicted. Its schedule is made without a memory budget, as the framework runs it whatever it
holds; where the plan would refuse it by memory, or the schedule's activations exceed a device's
budget, the prediction says so and keeps its numbers.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass

from pipesat.models import InputError, Instance, PipesatError, Schedule
from pipesat.models.placement import PLACEMENTS
from pipesat.models.plan_result import Configuration, Measure, MemoryFit
from pipesat.solver.evaluate.metrics import compute_metrics
from pipesat.solver.evaluate.validator import ensure_valid
from pipesat.solver.heuristics import get_heuristic, run_heuristic
from pipesat.solver.heuristics.heuristic import NotApplicable
from pipesat.solver.instances.calibration import Calibration
from pipesat.solver.instances.from_model import Derivation, Description, derive
from pipesat.solver.plan.measure import measure, usable_memory
from pipesat.solver.plan.memory_fit import fit_layout, fit_of
from pipesat.solver.plan.offload import FAMILIES, host_link, linked, offloads
from pipesat.solver.plan.runtimes import iterates_on_span
from pipesat.solver.plan.space import description, policy_refusal
from pipesat.solver.plan.spec import PlanSpec

FRAMEWORK_SCHEDULES = {"linear": "1f1b", "interleaved": "interleaved", "vshape": "zb-v", "bidirectional": "dualpipe"}
"""The schedule a configuration runs when none is named: its framework's own for the placement."""
GRAMMAR = "t4 p2 d8 interleaved v2 b1 m16 full-recompute zero1 [schedule], as the plan's table writes it"
_NUMBERED = re.compile(r"(t|cp|p|d|ep|v|b|m|zero)(\d+)")
_LAYERS = re.compile(r"(\d+)-layer-recompute")
_RECOMPUTE = {"full-recompute": "full", "full": "full", "selective-recompute": "selective", "selective": "selective"}
_OFFLOAD = {"full-offload": "full", "selective-offload": "selective"}


@dataclass(frozen=True)
class Prediction:
    """One configuration as it runs: its schedule (validated, made by the handwritten schedule
    `made_by`), the derivation, the measure, the memory a GPU may use (bytes), how its schedule's
    memory stands against that (`memory_fit.fit_of`), and why the plan would refuse it by memory (beyond
    the memory estimate's error), why its schedule's activations exceed a device's budget, and why the search
    leaves it out by policy ('' each when not)."""

    config: Configuration
    made_by: str
    derivation: Derivation
    schedule: Schedule
    measure: Measure
    usable_memory: float
    memory_fit: MemoryFit = MemoryFit.FITS
    refusal: str = ""
    over_budget: str = ""
    outside_search: str = ""
    on_span: bool = False


def parse_configuration(text: str) -> tuple[Configuration, str | None]:
    """The configuration written in `text` (the module notes' grammar) and its schedule's name (None:
    the framework's own); one line naming the word when it is not a configuration."""
    numbers: dict[str, int] = {}
    placement, recompute, layers, schedule, offload = None, "none", 0, None, "none"
    for word in text.lower().split():
        numbered, layered = _NUMBERED.fullmatch(word), _LAYERS.fullmatch(word)
        if numbered is not None and numbered[1] not in numbers:
            numbers[numbered[1]] = int(numbered[2])
        elif word in PLACEMENTS and placement is None:
            placement = word
        elif word in _RECOMPUTE and recompute == "none":
            recompute = _RECOMPUTE[word]
        elif layered is not None and recompute == "none":
            recompute, layers = "full", int(layered[1])
        elif word in _OFFLOAD and offload == "none":
            offload = _OFFLOAD[word]
        elif schedule is None and numbered is None and _is_schedule(word):
            schedule = word
        else:
            raise InputError(f"{word!r} is not a word of a configuration ({GRAMMAR})")
    missing = [name for name in ("t", "p", "d", "b", "m") if name not in numbers]
    if missing:
        raise InputError(f"{text!r} gives no {', '.join(missing)}; write it as {GRAMMAR}")
    placement = placement or ("interleaved" if numbers.get("v", 1) > 1 else "linear")
    chunks = numbers.get("v", 2 if placement in ("vshape", "bidirectional", "interleaved") else 1)
    config = Configuration(
        tensor_parallel=numbers["t"],
        pipeline=numbers["p"],
        data_parallel=numbers["d"],
        chunks=chunks,
        placement=placement,
        microbatch_size=numbers["b"],
        microbatches=numbers["m"],
        context_parallel=numbers.get("cp", 1),
        recompute=recompute,  # type: ignore[arg-type]  # one of _RECOMPUTE's values
        zero=numbers.get("zero", 0),  # type: ignore[arg-type]  # checked by the training's key
        expert_parallel=numbers.get("ep", 1),
        recompute_layers=layers,
        offload=offload,
    )
    return config, schedule


def _is_schedule(word: str) -> bool:
    try:
        get_heuristic(word)
    except PipesatError:
        return False
    return True


def check_fits(spec: PlanSpec, config: Configuration) -> None:
    """Refuse, in one line, a configuration that does not fit the spec's cluster and batch."""
    gpus = config.tensor_parallel * config.context_parallel * config.pipeline * config.data_parallel
    if gpus != spec.cluster.gpus:
        raise InputError(f"{config.label}: t·cp·p·d = {gpus} GPUs, the cluster has {spec.cluster.gpus} (cluster.gpus)")
    sequences = config.microbatch_size * config.microbatches * config.data_parallel
    if sequences != spec.global_batch:
        share = config.data_parallel * config.microbatch_size
        m = f"m = {spec.global_batch // share}" if spec.global_batch % share == 0 else f"{share} does not divide it"
        raise InputError(
            f"{config.label}: b·m·d = {sequences} sequences an iteration, the global batch is {spec.global_batch} "
            f"(training.global_batch): with d{config.data_parallel} b{config.microbatch_size}, {m}"
        )
    if config.zero not in (0, 1, 2, 3):
        raise InputError(f"{config.label}: zero{config.zero} is not a ZeRO stage (0 to 3)")


def framework_schedule(config: Configuration) -> str:
    """The schedule a configuration runs when none is named (`FRAMEWORK_SCHEDULES`; with an offload,
    PipeOffload's family of it, `offload.FAMILIES`); one line when no family offloads its placement."""
    if not offloads(config):
        return FRAMEWORK_SCHEDULES[config.placement]
    family = FAMILIES.get((config.offload, config.placement))
    if family is None:
        raise InputError(
            f"{config.label}: PipeOffload's schedules run linear and vshape pipelines only; name a schedule"
        )
    return family


def configured_schedule(name: str, instance: Instance) -> Schedule:
    """The handwritten schedule `name` of `instance` as a framework runs it, without a memory budget,
    validated; one line when it does not serve the instance."""
    return ensure_valid(run_heuristic(name, instance.with_limit(None)))


def over_budget(instance: Instance, schedule: Schedule) -> str:
    """Why the schedule's activations exceed a device's budget ('' when they fit)."""
    peaks = compute_metrics(schedule).peak_memory
    over = instance.over_limit(peaks)
    if not over or instance.memory_limit is None:
        return ""
    device = over[0]
    return (
        f"device {device} peaks at {peaks[device] / 1024:.1f} GiB of activations, "
        f"its budget is {instance.memory_limit[device] / 1024:.1f} GiB"
    )


def unbounded(described: Description) -> Description:
    """The description without a GPU memory: no activation budgets, nothing refused by memory."""
    return dataclasses.replace(described, hardware=dataclasses.replace(described.hardware, gpu_memory=0.0))


def predict(
    spec: PlanSpec,
    config: Configuration,
    schedule: str | None = None,
    *,
    calibration: Calibration | None = None,
    described: Description | None = None,
    name: str | None = None,
) -> Prediction:
    """`config` of `spec` as it runs with the handwritten schedule `schedule` (None: the framework's
    own), its description `described` (the plan's, `space.description`, when not given) derived as
    `name` (its label when not given). Refused in one line when it does not fit the cluster or the
    batch, or the cost model or the schedule refuses it; predicted, with the reason, when it does not
    fit the GPUs' memory (module notes).

    Parameters
    ----------
    spec
        The plan's spec.
    config
        One configuration (`parse_configuration("t2 p2 d4 b2 m8")`).
    schedule
        A handwritten schedule's name; None: the framework's own.
    calibration
        Measured layers (`calibrate`).
    described, name
        The configuration's description and instance name, when not the plan's own.

    Returns
    -------
    Prediction
        The iteration's measure (ms; memory in bytes), its schedule and instance.

    Raises
    ------
    InputError
        A configuration that does not fit the cluster or the batch, or a schedule that does not apply.
    """
    check_fits(spec, config)
    described = described or description(spec, config)
    name = name or config.label
    link = host_link(config, spec.cluster.host_link_bandwidth)
    fitted = fit_layout(described, name, calibration, link)
    refusal = fitted.why if fitted.fit is MemoryFit.REFUSED else ""
    try:
        derivation = linked(derive(described, name, calibration), link)
    except PipesatError:
        derivation = linked(derive(unbounded(described), name, calibration), link)
    made_by = get_heuristic(schedule or framework_schedule(config)).name
    try:
        timed = configured_schedule(made_by, derivation.instance)
    except NotApplicable as error:  # a schedule asked for that the configuration cannot run: bad input
        raise InputError(str(error)) from None
    on_span = iterates_on_span(spec.runtime, made_by, spec.training.bytes_per_value)
    measured, usable = measure(spec, config, derivation, timed, on_span=on_span), usable_memory(spec)
    return Prediction(
        config=config,
        made_by=made_by,
        derivation=derivation,
        schedule=timed,
        measure=measured,
        usable_memory=usable,
        memory_fit=fit_of(measured.memory_per_gpu, usable),
        refusal=refusal,
        over_budget=over_budget(derivation.instance, timed),
        outside_search=policy_refusal(spec, config.tensor_parallel),
        on_span=on_span,
    )
