"""The solver's tuning: every setting that changes what a search finds or what a bound proves, in one
frozen value that travels with the solve (to the search's child process, a plan's pool and Ray
workers, the bounds) and is part of every result.

The defaults are pipesat's; a field's docstring says what it trades and where it was measured (the
benchmark, its results file and the experiment's folder). Experts give another `Tuning` to `solve`
(`tuning=`), to a plan (`PlanOptions.tuning`), or to the command line in a TOML or YAML file
(a file given to its `tuning` option, read by `load_tuning`): one `field = value` a line, the fields named as here.
Settings that are facts rather than trades (CP-SAT's subsolver names, float noise, the two-worker
shape of the proof portfolio, `solver.cpsat.search_parameters.PROOF_PORTFOLIO_WORKERS`) stay where they are used.
"""

from __future__ import annotations

import dataclasses
import math
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipesat.models.document import read_document, read_input_text
from pipesat.models.errors import InputError, OptionError, unknown_hint

INFINITE = "inf"
"""An infinite value in a JSON document (which has no infinity)."""
SHARES = ("makespan_phase", "first_device_phase", "opening_share")
"""The fields that are a share of a time (at most 1)."""


@dataclass(frozen=True, kw_only=True)
class Tuning:
    """The settings that change a search or a bound (module notes); `Tuning()` is pipesat's default."""

    # The solve's phases and starts (`solver.solve`, `solver.span_phases`).
    makespan_phase: float = 1 / 3
    """Share of the time a max-span solve of more than `proof_small_ops` ops (not on a V placement,
    unless `makespan_phase_on_v`) first spends on the makespan, whose model CP-SAT searches far better
    and whose order, re-timed for the span, may lead the span's search; the span's own search gets the
    rest. bench_proofs and bench_targets (benchmarks/results/proofs.txt;
    benchmarks/experiments/2026-11-29_no-makespan-phase-small)."""
    makespan_phase_on_v: bool = False
    """Whether the makespan phase runs on V placements too, where its schedule led the span's search to
    worse values more often than to better ones. bench_proofs variant `v-makespan-phase`
    (benchmarks/results/proofs.txt) and bench_suite (benchmarks/results/suite.txt;
    benchmarks/experiments/2026-11-29_no-makespan-phase-on-v)."""
    first_device_phase: float = 1 / 3
    """Share of the time a max-span solve on one route with W apart first spends proving a bound from
    stage 0's device (phase 0: the makespan of `first_device_instance`, which CP-SAT settles far sooner
    than the span), taken from the span's search; 0 turns phase 0 off. bench_proofs variant
    `no-first-device` (benchmarks/results/proofs.txt; benchmarks/experiments/2026-11-28_phase-0)."""
    first_device_most_ticks: int = 10_000
    """Phase 0 runs only where its makespan model spans at most this many ticks (`ModelData.horizon`):
    on coarse times CP-SAT proves a makespan by exhausting the values above its bound; on fine ones
    the phase's time was lost to the search. bench_targets and bench_suite's profiled models
    (benchmarks/results/suite.txt; benchmarks/experiments/2026-11-29_phase-0-coarse-times)."""

    # The search's CP-SAT portfolios and probes (`solver.cpsat.search_parameters`, `solver.cpsat.probes`).
    proof_small_ops: int = 150
    """On two workers a model of at most this many ops runs CP-SAT's objective lower-bound search as a
    second full search in place of LNS (proofs are expected there), a larger one as a third thread
    beside the LNS that improves the warm start; a max-span solve of at most this many ops has no
    makespan phase and no phase 0 (its own search proves the span). bench_proofs and bench_targets
    (benchmarks/results/proofs.txt; benchmarks/experiments/2026-11-24_proof-portfolio)."""
    probe_precedences: bool = True
    """On two workers a probe runs CP-SAT's default_lp beside the same search branching on which of two
    ops of a device comes first (use_dynamic_precedence_in_disjunctive), which finds schedules at a
    tight value that branching on start times misses; off: CP-SAT's own two-worker portfolio.
    bench_proofs variant `no-probe-precedences` (benchmarks/results/proofs.txt;
    benchmarks/experiments/2026-11-25_precedence-branching)."""
    strong_probes: bool = True
    """With `probe_precedences`, a probe runs a third thread on the two cores: the search branching on
    precedences with CP-SAT's strong disjunctive propagation (use_strong_propagation_in_disjunctive),
    which refutes tight values the default propagation leaves open, for a share of the cores.
    bench_proofs variant `no-strong-probes` (benchmarks/results/proofs.txt;
    benchmarks/experiments/2026-11-29_strong-probes)."""
    opening_share: float = 0.1
    """Share of the search's time for one probe at the analytic bound before the search, when the start
    is within `opening_gap` of it (a schedule at the bound, which no search of the objective finds as
    fast, against time for the search); 0: no opening probe. bench_proofs variant `no-opening`
    (benchmarks/results/proofs.txt; benchmarks/experiments/2026-11-25_opening-probe)."""
    opening_gap: float = 0.1
    """How close to the analytic bound (a relative gap) the start must be for the opening probe.
    bench_proofs variant `no-opening` (benchmarks/results/proofs.txt;
    benchmarks/experiments/2026-11-25_opening-probe)."""
    stall_share: float = 0.25
    """A search whose value and bound have not moved for this share of its time, at a gap of at most
    `probe_gap`, hands the rest to bisection probes (`solver.cpsat.probes`); inf: never. Probes settle
    a search stuck near its bound; far from it CP-SAT's bound search may still prove the optimum after
    a long silence. bench_proofs variant `no-probes` (benchmarks/results/proofs.txt) and bench_targets
    (benchmarks/experiments/2026-11-25_bisection-probes)."""
    probe_gap: float = 0.05
    """The largest relative gap at which a stalled search hands over to the probes (`stall_share`).
    bench_targets (benchmarks/experiments/2026-11-25_bisection-probes)."""

    # The CP-SAT model (`solver.cpsat.constraints`, `solver.cpsat.variables`, `solver.cpsat.data`).
    tight_precedences: bool = True
    """The memory precedences of a limit that leaves less than W's memory beyond K activations: a
    higher bound sooner, for more constraints. bench_proofs variant `no-tight`
    (benchmarks/results/proofs.txt; benchmarks/experiments/2026-11-25_memory-precedences)."""
    nested_precedences: bool = True
    """The memory precedences between two stages of a device. bench_proofs variant `no-nested`
    (benchmarks/results/proofs.txt; benchmarks/experiments/2026-11-28_least-hold-and-nested-stages)."""
    least_holds: bool = True
    """Each held-memory interval's size starts from its microbatch's least round trip (`least_hold`),
    not 0, so that CP-SAT's cumulative reasons with that memory-time. bench_proofs variant `no-hold`
    (benchmarks/results/proofs.txt; benchmarks/experiments/2026-11-28_least-hold-and-nested-stages)."""
    value_grid: bool = True
    """A proven bound or refuted probe rises to the least value an optimum can take
    (`ModelData.least_value_from`), not to the next tick. bench_proofs variant `no-value-grid`
    (benchmarks/results/proofs.txt; benchmarks/experiments/2026-11-29_value-grid)."""

    # The analytic bounds (`solver.evaluate.bounds`).
    spaced_forwards: bool = True
    """The bounds let forwards arrive no faster than the slowest stage before them
    (`forward_spacing`): higher bounds for more time bounding. bench_proofs variant `no-spacing`
    (benchmarks/results/proofs.txt; benchmarks/experiments/2026-11-29_spaced-forwards)."""
    knapsack_nodes: int = 20_000
    """Branch-and-bound nodes of one knapsack of the bounds before it falls back to its fractional
    bound (sound, lower): tighter bounds against time bounding. Not measured apart; the plan's bound
    time (bench_plan, benchmarks/results/plan.txt) depends on it."""
    exact_tail_nodes: int = 200
    """Combinations of held backwards that `least_tail` enumerates for the exact least before it falls
    back to its Lagrangian bound (sound, lower): tighter span bounds against time bounding.
    bench_proofs and bench_targets (benchmarks/results/proofs.txt;
    benchmarks/experiments/2026-11-29_per-microbatch-bounds)."""
    bisections: int = 40
    """Halvings of the search for the least memory a time cap allows (`memory_bound_under_cap`): a
    relative precision of 2^-bisections, each halving a time bound. Not measured by a benchmark."""

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if isinstance(value, bool):
                continue
            if math.isnan(value) or value < 0:
                raise OptionError(f"tuning field {field.name} must be at least 0, got {value!r}")
            if field.name in SHARES and value > 1:
                raise OptionError(f"tuning field {field.name} is a share of the time, at most 1, got {value!r}")

    def changes(self) -> dict[str, Any]:
        """The fields that differ from the default, by name."""
        default = Tuning()
        return {name: value for name, value in vars(self).items() if value != getattr(default, name)}

    def as_dict(self) -> dict[str, Any]:
        """Every field by name, as a JSON document or a schedule's source holds it: an infinite value
        (`stall_share`: never) as the text "inf", which `from_mapping` reads back."""
        return {name: INFINITE if value == math.inf else value for name, value in dataclasses.asdict(self).items()}

    def describe(self) -> str:
        """`strong_probes=False, stall_share=inf`: the fields that differ from the default, or `the defaults`."""
        changed = self.changes()
        return ", ".join(f"{name}={value!r}" for name, value in changed.items()) or "the defaults"

    @classmethod
    def from_mapping(cls, mapping: Mapping[str, Any], source: str = "the tuning") -> Tuning:
        """A tuning from field names to values (the rest default), each of its field's type (an integer
        is a float too, and so is "inf"; a bool is neither); an unknown field or a wrong type is one `OptionError` line
        naming `source`."""
        if not isinstance(mapping, Mapping):
            raise OptionError(f"{source}: give field = value pairs, got {type(mapping).__name__}")
        kinds = {field.name: field.type for field in dataclasses.fields(cls)}
        values = {}
        for name, value in mapping.items():
            if name not in kinds:
                hint = unknown_hint(name, kinds, f"the fields are {', '.join(kinds)}")
                raise OptionError(f"{source}: unknown tuning field {name!r}{hint}")
            values[name] = _typed(name, value, str(kinds[name]), source)
        try:
            return cls(**values)
        except OptionError as error:
            raise OptionError(f"{source}: {error}") from None


def _typed(name: str, value: Any, kind: str, source: str) -> Any:
    """`value` as the field's type (`bool`, `int` or `float`, as the annotation names it)."""
    if kind == "bool" and isinstance(value, bool):
        return value
    if kind == "int" and isinstance(value, int) and not isinstance(value, bool):
        return value
    if kind == "float" and isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if kind == "float" and value == INFINITE:
        return math.inf
    wanted = {"bool": "true or false", "int": "a whole number", "float": "a number"}[kind]
    raise OptionError(f"{source}: tuning field {name} must be {wanted}, got {value!r}")


def load_tuning(path: str | Path) -> Tuning:
    """The tuning in a TOML file (`.toml`) or a YAML (or JSON) one: field = value pairs (module notes)."""
    path = Path(path)
    if path.suffix.lower() != ".toml":
        return Tuning.from_mapping(read_document(path, "tuning file") or {}, str(path))
    text = read_input_text(path, "tuning file")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise InputError(f"{path}: not valid TOML: {error}") from None
    return Tuning.from_mapping(data, str(path))


DEFAULT_TUNING = Tuning()
"""pipesat's default tuning."""
