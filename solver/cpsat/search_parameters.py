"""The SatParameters of a search and of a probe, from the search's settings (`SearchOptions`).

CP-SAT gets the solve's workers, seed and gap, and the time left to the deadline less a reserve for
reading its solution back; on two workers (and not deterministic) a search runs the proof portfolio
and a probe the probe portfolio, unless an expert chose the subsolvers. The expert's parameters
(`solver.cpsat.parameters`) come last and win, but the wall seconds stay pipesat's.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from dataclasses import dataclass

from google.protobuf import text_format
from ortools.sat import sat_parameters_pb2

from pipesat.models.tuning import DEFAULT_TUNING, Tuning
from pipesat.solver.cpsat.child import STOP_GRACE, cpsat_log_wanted

# Kept back from the search: the grace a stopping child gets and, per op of the model, the time to read
# back, re-time and validate a schedule (with margin over its measured cost:
# benchmarks/experiments/2026-11-22_cpsat-stop-and-readback), at most RESERVE_SHARE of what is left.
# The least time a search gets.
FINISH_SECONDS_PER_OP = 3e-5
RESERVE_SHARE = 0.1
MIN_SEARCH_SECONDS = 0.05
# With two workers CP-SAT runs one full search (default_lp) and one thread of LNS, and leaves out every
# bound-raising subsolver. pipesat adds CP-SAT's objective lower-bound search: on a model of at most
# `Tuning.proof_small_ops` ops as a second full search in place of LNS (small models are where proofs are
# expected), on a larger one as a third thread sharing the two cores, so that the LNS which improves
# the warm start stays. Measured in benchmarks/bench_proofs.py and bench_targets.py
# (benchmarks/experiments/2026-11-24_proof-portfolio). An expert's parameters that choose workers or
# subsolvers replace this whole; a deterministic search runs CP-SAT on one worker, without it.
PROOF_PORTFOLIO_WORKERS = 2
PROOF_SUBSOLVER = "objective_lb_search"
# A probe on two workers runs two full searches (and `Tuning.strong_probes`' third): CP-SAT's default_lp and
# the same search branching on which of two ops of a device comes first
# (use_dynamic_precedence_in_disjunctive), which finds schedules at a tight value that branching on
# start times misses. CP-SAT calls the option experimental; in the portfolio's main search it lowered
# bounds and once aborted, so only the probes branch so. Measured in bench_proofs (variant
# `no-probe-precedences`; benchmarks/experiments/2026-11-25_precedence-branching).
# `Tuning.probe_precedences` turns it off.
PROBE_PRECEDENCE_SUBSOLVER = "precedences"
# A probe on two workers runs, as a third thread sharing the two cores, the search branching on
# precedences with each device's no-overlap propagated by CP-SAT's stronger, costlier disjunctive
# reasoning (use_strong_propagation_in_disjunctive): with the objective's domain cut to T it refutes
# what the default leaves open. On a thread of their own the two others keep finding schedules as
# fast: strong propagation in place of either slowed that, and in the portfolio's own searches it cost
# bounds. Measured in bench_proofs (variant `no-strong-probes`) and bench_targets
# (benchmarks/experiments/2026-11-29_strong-probes). `Tuning.strong_probes` turns it off.
PROBE_STRONG_SUBSOLVER = "strong_precedences"
PORTFOLIO_FIELDS = {"num_workers", "subsolvers", "extra_subsolvers", "ignore_subsolvers", "num_full_subsolvers"}
LOG = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class SearchOptions:
    """The search's settings; `deadline` is the `time.monotonic()` by which the solve returns and
    `time_limit` the seconds it was given.

    `deterministic` makes `time_limit` CP-SAT's deterministic time (wall clock stops it only at
    `wall_factor` times that) on one CP-SAT worker; nothing it decides reads the wall
    clock, so a run slowed by a busy machine searches exactly as far as one that was not. `gap` stops
    it at that relative gap. `cpsat_params` are SatParameters in text form (`solver.cpsat.parameters`),
    applied after these. `tuning` chooses the portfolios and the probes (`Tuning`'s search fields).
    """

    workers: int
    seed: int
    deterministic: bool
    gap: float
    deadline: float
    time_limit: float
    wall_factor: float = 10.0
    cpsat_params: str = ""
    tuning: Tuning = DEFAULT_TUNING

    def share(self, fraction: float) -> SearchOptions:
        """These options for a phase given `fraction` of the time: of the time limit when
        deterministic, else of the wall time left to the deadline."""
        now = time.monotonic()
        left = self.deadline - now
        limit = self.time_limit if self.deterministic else left
        return dataclasses.replace(self, deadline=now + fraction * left, time_limit=fraction * limit)


def search_parameters(
    options: SearchOptions, num_ops: int, seconds: float | None = None, probe: bool = False
) -> tuple[str, float]:
    """The search's SatParameters (text form) and the wall seconds it may run: `seconds` when given,
    else what is left to the deadline less the reserve. The expert's `options.cpsat_params` come last
    and win, but the wall seconds stay pipesat's: the solve returns by its deadline whatever time
    limit they give CP-SAT. With two workers (and not deterministic), unless the expert chose the
    subsolvers, a search runs the proof portfolio (PROOF_PORTFOLIO_WORKERS) and a `probe` (which has
    no objective to bound) the probe portfolio (`Tuning.probe_precedences`, `Tuning.strong_probes`)."""
    params = sat_parameters_pb2.SatParameters()
    params.num_workers = cpsat_workers(options.workers, options.deterministic)
    params.random_seed = options.seed
    # CP-SAT's relative gap is (value - bound) / value; pipesat's gap is (value - bound) / bound.
    params.relative_gap_limit = options.gap / (1 + options.gap)
    remaining = search_seconds(options, num_ops) if seconds is None else max(seconds, MIN_SEARCH_SECONDS)
    if options.deterministic:
        params.max_deterministic_time = remaining
        params.max_time_in_seconds = options.wall_factor * remaining
    else:
        params.max_time_in_seconds = remaining
    seconds = params.max_time_in_seconds
    params.log_search_progress = cpsat_log_wanted()
    expert = text_format.Parse(options.cpsat_params, sat_parameters_pb2.SatParameters())
    expert_sets = {field.name for field, _ in expert.ListFields()}
    two_workers = options.workers == PROOF_PORTFOLIO_WORKERS and not options.deterministic
    if two_workers and not expert_sets & PORTFOLIO_FIELDS:
        if not probe:
            _add_proof_portfolio(params, num_ops, options.tuning.proof_small_ops)
        elif options.tuning.probe_precedences:
            _add_probe_portfolio(params, options.tuning.strong_probes)
    params.MergeFrom(expert)
    return text_format.MessageToString(params), seconds


def cpsat_workers(workers: int, deterministic: bool) -> int:
    """The CP-SAT workers a search runs: `workers`, or one when deterministic (CP-SAT's interleaved
    search of two workers returned different optimal schedules of one instance in runs on a loaded
    machine; one worker gave the same schedule in every run)."""
    return 1 if deterministic else workers


def search_seconds(options: SearchOptions, num_ops: int) -> float:
    """The seconds left to the deadline (a deterministic search: its whole time limit), less the
    reserve for reading the result back."""
    left = options.time_limit if options.deterministic else options.deadline - time.monotonic()
    reserve = min(STOP_GRACE + FINISH_SECONDS_PER_OP * num_ops, RESERVE_SHARE * left)
    return max(left - reserve, MIN_SEARCH_SECONDS)


def _add_proof_portfolio(params: sat_parameters_pb2.SatParameters, num_ops: int, small_ops: int) -> None:
    """Two workers' portfolio for proofs (see PROOF_PORTFOLIO_WORKERS), for a small model (at most
    `small_ops` ops) or a larger one."""
    params.extra_subsolvers.append(PROOF_SUBSOLVER)
    if num_ops <= small_ops:
        params.num_full_subsolvers = PROOF_PORTFOLIO_WORKERS
        role, size = "a second full search", "at most"
    else:
        params.num_workers = PROOF_PORTFOLIO_WORKERS + 1
        role, size = "a third thread beside LNS", "more than"
    LOG.info("CP-SAT subsolvers: %s added as %s (%d ops, %s %d)", PROOF_SUBSOLVER, role, num_ops, size, small_ops)


def _add_probe_portfolio(params: sat_parameters_pb2.SatParameters, strong: bool) -> None:
    """Two workers' portfolio for a probe (see PROBE_PRECEDENCE_SUBSOLVER): default_lp beside the search
    branching on precedences and, when `strong` (PROBE_STRONG_SUBSOLVER), as a third thread, the same
    propagating strongly."""
    precedences = params.subsolver_params.add()
    precedences.name = PROBE_PRECEDENCE_SUBSOLVER
    precedences.use_dynamic_precedence_in_disjunctive = True
    params.extra_subsolvers.append(PROBE_PRECEDENCE_SUBSOLVER)
    params.num_full_subsolvers = PROOF_PORTFOLIO_WORKERS
    if strong:
        strongly = params.subsolver_params.add()
        strongly.CopyFrom(precedences)
        strongly.name = PROBE_STRONG_SUBSOLVER
        strongly.use_strong_propagation_in_disjunctive = True
        params.extra_subsolvers.append(PROBE_STRONG_SUBSOLVER)
        params.num_workers = params.num_full_subsolvers = PROOF_PORTFOLIO_WORKERS + 1
