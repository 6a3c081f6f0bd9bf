"""What a plan returns: each configuration's outcome, measure and proof, ranked.

Data only: `solver.plan.search` fills it, `solver.report.plan_text` and `solver.report.plan_plot`
word and draw it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from enum import Enum

from pipesat.models.objective import Status
from pipesat.models.schedule import Schedule
from pipesat.models.tolerance import fits
from pipesat.models.training_modes import Recompute, ZeroStage
from pipesat.models.tuning import DEFAULT_TUNING, Tuning


@dataclass(frozen=True, order=True)
class Configuration:
    """One way to run the training: t GPUs per pipeline device (tensor parallelism), p pipeline
    devices, d data-parallel replicas, v chunks a device in a placement, microbatches of b sequences,
    m of them per replica and iteration, each sequence split over cp GPUs (context parallelism; t·cp·p·d
    GPUs), the activation recomputation, the ZeRO stage, the expert-parallel degree (EP of the d
    replicas split the routed experts) and the activation offload (none, selective or full:
    `solver.plan.offload`). Ordered by these numbers: the total order that breaks every
    tie."""

    tensor_parallel: int
    pipeline: int
    data_parallel: int
    chunks: int
    placement: str
    microbatch_size: int
    microbatches: int
    context_parallel: int = 1
    recompute: Recompute = "none"
    zero: ZeroStage = 0
    expert_parallel: int = 1
    recompute_layers: int = 0
    offload: str = "none"

    @property
    def recompute_name(self) -> str:
        """`none`, `selective`, `full`, or `full, 2 a stage` when full recomputation takes only a stage's
        first `recompute_layers` layers."""
        return f"full, {self.recompute_layers} a stage" if self.recompute_layers else self.recompute

    @property
    def label(self) -> str:
        """`t8 p16 d64 interleaved v8 b1 m32 zero1`; `cp2` after t with context parallelism, `ep8`
        after d with expert parallelism, `full-recompute` (or `selective-`, or `2-layer-recompute` for
        a stage's first 2 layers) with recomputation, `full-offload` (or `selective-`) with offload,
        `zero1` with a ZeRO stage."""
        parts = [f"t{self.tensor_parallel}"]
        if self.context_parallel > 1:
            parts.append(f"cp{self.context_parallel}")
        parts += [f"p{self.pipeline}", f"d{self.data_parallel}"]
        if self.expert_parallel > 1:
            parts.append(f"ep{self.expert_parallel}")
        parts.append(self.placement)
        if self.placement == "interleaved":
            parts.append(f"v{self.chunks}")
        parts += [f"b{self.microbatch_size}", f"m{self.microbatches}"]
        if self.recompute_layers:
            parts.append(f"{self.recompute_layers}-layer-recompute")
        elif self.recompute != "none":
            parts.append(f"{self.recompute}-recompute")
        if self.offload != "none":
            parts.append(f"{self.offload}-offload")
        if self.zero:
            parts.append(f"zero{self.zero}")
        return " ".join(parts)


class Outcome(str, Enum):
    """What became of a configuration."""

    SOLVED = "solved"  # its schedule was searched, or met its lower bound without a search
    PRUNED = "pruned"  # its lower bound was already no better than the best found: not searched
    REFUSED = "refused"  # no schedule fits its GPUs' memory, proven (model state or smallest limit)
    UNSEARCHED = "unsearched"  # keeps its handwritten schedule, not searched: interrupted, or out of time
    UNFINISHED = "unfinished"  # not assessed: the plan was interrupted, or its time budget ran out

    def __str__(self) -> str:
        return self.value


MEMORY_ERROR = 0.18
"""The stated relative error of a configuration's memory estimate (model state plus activations):
the largest error, rounded up to a whole percent, of the measured peaks benchmarks/bench_memory.py
holds the estimate against (benchmarks/results/memory.txt: +12.8% and +17.8% on torchtitan's two eager
Llama 3.1 8B FSDP runs, whose op-level selective checkpointing the model counts as keeping every
matmul's output; Korthikanti et al.'s counts within 5%). The benchmark fails when a run held in is
beyond it. `solver.plan.memory_fit` says what the plan makes of it."""


class MemoryFit(str, Enum):
    """How a configuration's memory estimate (model state plus activations) stands against the memory
    a GPU may use, given the estimate's stated error (`solver.plan.memory_fit`)."""

    FITS = "fits"  # the estimate is within the usable memory
    TIGHT = "tight"  # above it by less than the estimate's error: may fit, to be checked on the GPU
    REFUSED = "refused"  # above it by more than the error (or not assessed by memory: no estimate)

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Breakdown:
    """Where an iteration's time goes, in ms, summing to it: on the critical device (the busiest),
    compute, recomputation, exposed tensor-parallel (and context-parallel) communication, the experts'
    exposed all-to-all (expert parallelism) and exposed data-parallel communication (ZeRO-3's in the ops, and the exchange after the schedule); the
    pipeline's p2p communication, the host link's exposed time (offload: what the makespan loses to
    its transfers) and the bubble (the critical device's idle time); the optimizer step."""

    compute_ms: float
    recompute_ms: float
    tensor_parallel_ms: float
    expert_parallel_ms: float
    data_parallel_ms: float
    pipeline_ms: float
    host_link_ms: float
    bubble_ms: float
    optimizer_ms: float

    @property
    def total_ms(self) -> float:
        return sum(getattr(self, part.name) for part in fields(self))

    def parts(self) -> list[tuple[str, float]]:
        """Each part's name as the plan's table and summary say it, and its ms."""
        return [(PART_NAMES[part.name], getattr(self, part.name)) for part in fields(self)]


PART_NAMES = {
    "compute_ms": "compute",
    "recompute_ms": "recompute",
    "tensor_parallel_ms": "TP comm",
    "expert_parallel_ms": "EP comm",
    "data_parallel_ms": "DP comm",
    "pipeline_ms": "PP comm",
    "host_link_ms": "host link",
    "bubble_ms": "bubble",
    "optimizer_ms": "optimizer",
}
"""How the plan names each part of an iteration (a `Breakdown` field)."""


@dataclass(frozen=True)
class Measure:
    """One schedule of one configuration as a training iteration: the schedule's makespan, the
    exposed data-parallel exchange after it and the optimizer step (ms each) and their sum; tokens a
    second, model FLOPs utilisation, the memory of the GPU that holds the most, apart: its model state
    (weights, gradients, optimizer state: what the layout needs whatever the schedule) and its
    schedule's peak activations (bytes; the reserve is apart), and where the time goes."""

    makespan_ms: float
    exchange_ms: float
    optimizer_ms: float
    iteration_ms: float
    tokens_per_s: float
    mfu: float
    model_state: float
    activations: float
    breakdown: Breakdown

    @property
    def memory_per_gpu(self) -> float:
        """The most memory a GPU holds: its model state plus its schedule's peak activations (bytes)."""
        return self.model_state + self.activations


@dataclass(frozen=True)
class ConfigResult:
    """A configuration's outcome: its best schedule's measure (None when refused), the schedule's
    maker and status (OPTIMAL or FEASIBLE; None when refused), the proven lower bounds on its makespan
    and iteration time, the gap of the makespan to its bound, the wall seconds CP-SAT was given (0: no
    search), the memory a GPU may use (its memory less the reserve, bytes), how its memory estimate
    stands against that (`tight`: above it within the estimate's error; ranked, marked) and a line saying why it was
    pruned or refused."""

    config: Configuration
    outcome: Outcome
    measure: Measure | None = None
    made_by: str = ""
    status: Status | None = None
    makespan_bound: float | None = None
    iteration_bound_ms: float | None = None
    gap: float | None = None
    search_seconds: float = 0.0
    usable_memory: float = 0.0
    note: str = ""
    tight: bool = False

    @property
    def memory_fit(self) -> MemoryFit:
        """Refused with the outcome, tight when its layout fits only within the estimate's error."""
        if self.outcome == Outcome.REFUSED:
            return MemoryFit.REFUSED
        return MemoryFit.TIGHT if self.tight else MemoryFit.FITS

    @property
    def headroom(self) -> float | None:
        """The usable memory its schedule leaves free on the GPU that holds the most (bytes; below 0 on
        a tight row), None without a schedule."""
        return None if self.measure is None else self.usable_memory - self.measure.memory_per_gpu

    @property
    def rank_key(self) -> tuple[float, float, Configuration]:
        """Faster first; those without a schedule after them, by their bound (pruned, not assessed),
        then the refused; equal times by the configuration's order (a total order)."""
        time = self.measure.iteration_ms if self.measure is not None else float("inf")
        bound = self.iteration_bound_ms if self.iteration_bound_ms is not None else float("inf")
        return (time, bound, self.config)


@dataclass(frozen=True)
class RuntimeBest:
    """The best configuration a runtime runs (`solver.plan.runtimes`) of those the plan assessed: its
    schedule's maker (a name as `ConfigResult.made_by` holds it) and measure. `complete`: no
    configuration the plan left unassessed has a lower bound below it, so none could beat it."""

    runtime: str
    config: Configuration
    made_by: str
    measure: Measure
    complete: bool = True


@dataclass(frozen=True)
class PlanResult:
    """The plan: every configuration ranked (refused ones last), the best one's schedule (validated),
    the counts, and how it ran. `proven_best` says that no configuration can beat the best by more
    than `best_gap` (0: the best is proven). `timing_dependent` is True when the time budget ran out
    before the planned shares were spent, so another run may differ. `interrupted` is True when Ctrl-C
    or SIGTERM ended the plan: the results are what was finished by then. `tuning` is every solve's and
    bound's (`models.tuning`). `skipped_shapes` are the shapes left out (the cost model refuses them)
    and `merged_shapes` the settings tried as another that costs the same. The configurations whose
    times are within `tie_tolerance` of the fastest's (the fastest that fits its GPUs' memory: a tight
    one ranked above it is `tight_and_faster`) are tied with it (the cost model's error), and
    `recommended` is the simplest of them (`solver.plan.ties`): the plan's best, whose schedule
    `best_schedule` is; `recommended_because` names what makes it simpler than the fastest
    (`stages`, `chunks`, `schedule` or `memory`; '' when the fastest is the best). `runtime` is the
    runtime the plan was held to (`any`: none), `best_runs_on` the runtimes that run its best, and
    `runtime_bests` each runtime's best, in the runtimes' order."""

    results: list[ConfigResult]
    best_schedule: Schedule | None
    skipped_shapes: list[str] = field(default_factory=list)
    merged_shapes: list[str] = field(default_factory=list)
    recommended: Configuration | None = None
    recommended_because: str = ""
    tie_tolerance: float = 0.0
    best_gap: float | None = None
    wall_seconds: float = 0.0
    time_budget: float = 0.0
    parallel: int = 1
    cpsat_workers: int = 1
    seed: int = 0
    executor: str = "local"
    timing_dependent: bool = False
    interrupted: bool = False
    tuning: Tuning = DEFAULT_TUNING
    runtime: str = "any"
    best_runs_on: tuple[str, ...] = ()
    runtime_bests: tuple[RuntimeBest, ...] = ()

    @property
    def fastest(self) -> ConfigResult | None:
        """The fastest on paper of those that fit their GPUs' memory: the first row with a schedule that
        fits; where none fits, the first with a schedule (tight)."""
        feasible = self.feasible
        return next((item for item in feasible if item.memory_fit is MemoryFit.FITS), feasible[0] if feasible else None)

    @property
    def best(self) -> ConfigResult | None:
        """The plan's answer: the recommended configuration, else the fastest that fits."""
        chosen = (result for result in self.results if result.config == self.recommended)
        return next(chosen, None) or self.fastest

    @property
    def tight_and_faster(self) -> list[ConfigResult]:
        """The tight configurations ranked above the fastest that fits: faster, if their memory holds."""
        fastest = self.fastest
        return [] if fastest is None else self.feasible[: self.feasible.index(fastest)]

    def tied(self, result: ConfigResult) -> bool:
        """Whether `result` is tied with the fastest: a schedule within `tie_tolerance` of its time (a
        tight one is not, beside a fastest that fits: it is not recommended over what fits)."""
        fastest = self.fastest
        if fastest is None or fastest.measure is None or result.measure is None:
            return False
        if result.memory_fit is not fastest.memory_fit:
            return False
        return fits(result.measure.iteration_ms, fastest.measure.iteration_ms * (1 + self.tie_tolerance))

    def count(self, outcome: Outcome) -> int:
        return sum(result.outcome == outcome for result in self.results)

    @property
    def feasible(self) -> list[ConfigResult]:
        return [result for result in self.results if result.measure is not None]


@dataclass(frozen=True)
class Gain:
    """What the plan's best costs and buys against another run of the same training (the user's
    current one): its iteration's change in ms and in % of the run's (negative: the best is faster),
    the change in tokens a second (%), in MFU (percentage points) and in the most memory a GPU holds
    (bytes; positive: the best holds more)."""

    iteration_ms: float
    iteration_pct: float
    tokens_per_s_pct: float
    mfu_points: float
    memory_per_gpu: float

    @classmethod
    def between(cls, run: Measure, best: Measure) -> Gain:
        """The best's measure against the run's."""
        return cls(
            iteration_ms=best.iteration_ms - run.iteration_ms,
            iteration_pct=100 * (best.iteration_ms - run.iteration_ms) / run.iteration_ms,
            tokens_per_s_pct=100 * (best.tokens_per_s - run.tokens_per_s) / run.tokens_per_s,
            mfu_points=100 * (best.mfu - run.mfu),
            memory_per_gpu=best.memory_per_gpu - run.memory_per_gpu,
        )
