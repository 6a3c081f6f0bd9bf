"""The runtimes a plan may be held to (`training.runtime`): what each can run of pipesat's schedules,
placements and knobs, and the spec values it sets when the spec does not give them.

A runtime is the framework that will train the model. Held to one, the plan searches only what it
executes: its schedules (as `solver.plan.schedules` names them), its placements, its ZeRO stages and
recomputations; and its memory defaults (the gradients' bytes, the ZeRO stages it tries) are the
spec's own keys, so the memory model reads them as it reads any spec. `any` holds the plan to none.
What each runtime runs was read in its own code (docs/runtimes/):

- `megatron`, Megatron-LM / Megatron-Core (0.20): `forward_backward_no_pipelining` (p = 1, the
  microbatches one after another), `..._without_interleaving` (1F1B) and `..._with_interleaving`
  (interleaved 1F1B, in groups of `microbatch_group_size_per_vp_stage`, p by default). GPipe is not
  among them, nor any W split (`delay_wgrad_compute` serves only the MoE all-to-all overlap). ZeRO 0
  (DDP) or 1 (its distributed optimizer); its ZeRO 2 and 3 are Megatron-FSDP, not written here.
  Main gradients in fp32 (4 bytes).
- `megatron-zb`, the Sea AI zero-bubble fork of Megatron-LM (its Megatron 0.9): Megatron's two and
  the fork's: the automatic ZB scheduler (its `enable_zero_bubble`) under the memory budget (zb-auto),
  or under ZB-H1's and ZB-H2's memory (p and 2p pending backwards: the paper's ZB-1p and ZB-2p, whose
  bubbles equal ZB-H1's and ZB-H2's, Table 5), and its V schedules (`zero_bubble_v_schedule` with
  memory setup zb, half or min: ZB-V, V-Half, V-Min). ZeRO 0 by default: with the distributed
  optimizer the fork refuses to overlap the gradient reduction under a zero-bubble schedule.
- `torchtitan`: torch.distributed.pipelining's built-in schedules (GPipe, 1F1B, Interleaved1F1B,
  LoopedBFS, InterleavedZeroBubble, ZBVZeroBubble, DualPipeV) on its own placements, FSDP (ZeRO 3)
  by default or plain replicas (0); recomputation of every layer or none (no first-k-layers).
- `torch`: torch.distributed.pipelining running a schedule CSV (`pipesat export torch`): every
  schedule pipesat writes, the search's included, on every placement, with every knob.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from pipesat.models import InputError
from pipesat.models.names import SPLIT_OUT
from pipesat.models.placement import PLACEMENTS
from pipesat.models.plan_result import Configuration
from pipesat.models.training_modes import RECOMPUTE, Recompute, ZeroStage
from pipesat.solver.plan.offload import OFFLOADS
from pipesat.solver.plan.schedules import SCHEDULE_NAMES, SEARCH, placements_of

ANY = "any"
"""The runtime that holds a plan to nothing (the default)."""


@dataclass(frozen=True, kw_only=True)
class Runtime:
    """A framework that trains the model: the schedules (`SCHEDULE_NAMES`), placements, ZeRO stages
    and recomputations it runs, whether its full recomputation can take a stage's first k layers
    only, whether it runs a fused-backward schedule with its W ops split out (`splits_weights`: only
    as a schedule CSV; elsewhere such a schedule's B is one op, input and weight gradients together,
    and the plan times it so), whether it offloads activations to the host (`offloads`: Megatron-Core's
    fine-grained activation offloading, the fork's PipeOffload; torch's CSV has no action for a
    host-link copy, and torchtitan offloads none), and the spec keys (dotted, as a spec writes them)
    it sets when the spec does not give them."""

    name: str
    title: str
    schedules: tuple[str, ...]
    placements: tuple[str, ...]
    zero: tuple[ZeroStage, ...]
    recompute: tuple[Recompute, ...] = RECOMPUTE
    recompute_layers: bool = True
    splits_weights: bool = False
    post_validated: tuple[str, ...] = ()
    offloads: bool = False
    defaults: Mapping[str, Any] = field(default_factory=dict)

    def runs(self, config: Configuration, made_by: str | None = None) -> bool:
        """Whether this runtime runs `config` (its placement, ZeRO stage and recomputation) and, when
        given, the schedule `made_by` made (as `ConfigResult.made_by` holds it) on it."""
        knobs = (
            config.placement in self.placements
            and config.zero in self.zero
            and config.recompute in self.recompute
            and (self.recompute_layers or not config.recompute_layers)
            and (self.offloads or config.offload == "none")
        )
        return knobs and (made_by is None or self.runs_schedule(made_by))

    def runs_schedule(self, made_by: str) -> bool:
        """Whether this runtime runs the schedule `made_by` made: a handwritten one it runs, CP-SAT's
        where it runs the search's, a fused one with W split out where it splits weights."""
        if made_by.endswith(SPLIT_OUT):
            return self.splits_weights
        return (SEARCH if made_by.startswith(SEARCH) else made_by) in self.schedules

    def iterates_on_span(self, made_by: str, bytes_per_value: float) -> bool:
        """Whether this runtime runs the schedule `made_by` made with its optimizer step post-validated
        (`post_validated`; the fork allows it in half precision only, `bytes_per_value` 2): no device
        waits at the step for the others, so an iteration lasts the busiest device's span, not the
        makespan (`measure`)."""
        return made_by in self.post_validated and bytes_per_value == 2


_MEGATRON = ("1f1b", "interleaved")
_ZERO_BUBBLE = ("zb-auto", "zb-h1", "zb-h2", "zb-v", "v-half", "v-min")
_POST_VALIDATED = (*_ZERO_BUBBLE, "zb-1p", "zb-2p")
"""The fork's zero-bubble schedules (with the paper's ZB-1p and ZB-2p, its automatic one under those
budgets): its example launch script (examples/pretrain_zero_bubble.sh) adds
option `enable-optimizer-post-validation` to every zero-bubble run in half precision, and none to its
1F1B or interleaved runs (docs/runtimes/megatron.md)."""
_TORCHTITAN = ("gpipe", "1f1b", "interleaved", "zb-h1", "zb-v", "dualpipe-v")
"""torchtitan's built-in schedules as pipesat names them; LoopedBFS and InterleavedZeroBubble, which
pipesat does not write by hand, are the torch runtime's (as CSVs) and left to its writer."""
_MEGATRON_DEFAULTS = MappingProxyType({"training.grad_bytes": 4.0, "training.zero": [1]})

RUNTIMES: dict[str, Runtime] = {
    runtime.name: runtime
    for runtime in (
        Runtime(
            name="megatron",
            title="Megatron-LM",
            schedules=_MEGATRON,
            placements=("linear", "interleaved"),
            zero=(0, 1),
            offloads=True,
            defaults=_MEGATRON_DEFAULTS,
        ),
        Runtime(
            name="megatron-zb",
            title="Megatron-LM, zero-bubble fork",
            schedules=(*_MEGATRON, *_ZERO_BUBBLE),
            placements=("linear", "interleaved", "vshape"),
            zero=(0, 1),
            post_validated=_POST_VALIDATED,
            offloads=True,
            defaults=MappingProxyType({"training.grad_bytes": 4.0, "training.zero": [0]}),
        ),
        Runtime(
            name="torchtitan",
            title="torchtitan",
            schedules=_TORCHTITAN,
            placements=("linear", "interleaved", "vshape"),
            zero=(0, 3),
            recompute_layers=False,
            defaults=MappingProxyType({"training.grad_bytes": 4.0, "training.zero": [3]}),
        ),
        Runtime(
            name="torch",
            title="torch.distributed.pipelining (CSV)",
            schedules=SCHEDULE_NAMES,
            placements=PLACEMENTS,
            zero=(0, 1, 2, 3),
            splits_weights=True,
        ),
    )
}
"""Every runtime but `any`, by name, in the order the plan reports them."""
RUNTIME_NAMES = (ANY, *RUNTIMES)
"""Every name `training.runtime` takes."""


def _titled(runtime: Runtime) -> str:
    """` (Megatron-LM)`: the runtime's title after its name, where they differ."""
    return "" if runtime.title == runtime.name else f" ({runtime.title})"


def with_defaults(runtime: Runtime | None, given: Mapping[str, Any]) -> dict[str, Any]:
    """The spec's values by dotted name, with the runtime's defaults for those it does not give."""
    return dict(runtime.defaults) | dict(given) if runtime is not None else dict(given)


def held_to(
    runtime: Runtime, values: Mapping[str, Any], placements: tuple[str, ...], where: str = ""
) -> dict[str, Any]:
    """The plan's lists (`PlanSpec` keys: schedules, placements, zero, recompute, recompute_layers, offload)
    held to what `runtime` runs. A list the spec gives must lie within the runtime's, else one line
    naming what it runs; of the placements, one it runs is enough. Left out, the schedules are the runtime's and the placements those of
    `placements` (the plan's default) it runs; the ZeRO stages are the runtime's defaults
    (`with_defaults`), and every runtime runs every recomputation the plan tries by default."""
    run = {placement for name in runtime.schedules for placement in placements_of(name)}
    limits: dict[str, tuple[Any, ...]] = {
        "schedules": runtime.schedules,
        "placements": tuple(name for name in runtime.placements if name in run),
        "zero": runtime.zero,
        "recompute": runtime.recompute,
        "offload": OFFLOADS if runtime.offloads else ("none",),
    }
    for name, allowed in limits.items():
        outside = [item for item in values.get(name) or () if item not in allowed]
        if name == "placements" and len(outside) < len(values.get(name) or ()):
            continue  # some it runs: the space leaves out the others, each in a line (`space`)
        if outside:
            raise InputError(
                f"{where}training.{name} {outside[0]} is not run by {runtime.name}{_titled(runtime)}, which runs "
                f"{', '.join(map(str, allowed))}; drop it, or choose another training.runtime"
            )
    if not runtime.recompute_layers and any(values.get("recompute_layers") or ()):
        raise InputError(
            f"{where}training.recompute_layers: {runtime.name} recomputes every layer of a stage or none; "
            "drop training.recompute_layers, or choose another training.runtime"
        )
    held = dict(values)
    if held.get("schedules") is None:
        held["schedules"] = runtime.schedules
    held.setdefault("placements", tuple(name for name in placements if name in limits["placements"]))
    return held


def iterates_on_span(runtime: str, made_by: str, bytes_per_value: float) -> bool:
    """Whether the runtime named `runtime` (`training.runtime`; `any` holds to none) runs the schedule
    `made_by` made post-validated, so that its iteration lasts its max span (`Runtime.iterates_on_span`)."""
    held = RUNTIMES.get(runtime)
    return held is not None and held.iterates_on_span(made_by, bytes_per_value)


def bounds_on_span(runtime: str) -> bool:
    """Whether a plan held to the runtime named `runtime` may time a schedule by its max span, so that
    a lower bound on its iteration is the span's, not the makespan's (a schedule's span is at most
    its makespan)."""
    held = RUNTIMES.get(runtime)
    return held is not None and bool(held.post_validated)
