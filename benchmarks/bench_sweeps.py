"""Hold the plan against measured sweeps: many layouts of one model on one cluster, each timed.

Every layout of benchmarks/data/measured_sweeps.yaml is predicted as it ran, through the code a
plan uses and the way benchmarks/bench_cost_model.py predicts a published run (its functions, not a
copy): the layout becomes a plan spec with one value in every searched list and the source's
cluster, and the plan predicts it as it ran (`solver.plan.predict`, what `pipesat plan --predict`
runs: `space.description`, `from_model.derive`, the run's own schedule (1F1B unless its row names
one: interleaved 1F1B, ZB-1p, ZB-2p), built by the handwritten heuristic and validated, and
`measure` for its iteration time). Each layout is
predicted alone, so that every layout gets a number; the plan would consider it unless it refuses
it by memory or its space leaves it out (tensor parallelism over nodes, say). Nothing is tuned per
sweep: each GPU type has its catalogue setting.

    python benchmarks/bench_sweeps.py [--only SWEEP,...] [--format text|markdown] [--explain LAYOUT,...]

Per sweep it prints every layout (measured and predicted iteration time, the error, the memory a
GPU predicted against what the plan lets a GPU use, whether the plan would refuse it, or why it
cannot be predicted), Spearman's rank correlation of the predicted times with the measured, whether
the plan's pick (the fastest predicted of the layouts it would consider) is the measured best and
how much slower it measured (each layout by its time a sequence, so that rows of different global
batches compare as throughput), the median absolute error, the layouts refused or unpredictable, and
where each predicted iteration goes. The targets (issue 44) are printed ok or MISS per sweep:
rho >= 0.8, the pick within 3% of the measured best, median |error| <= 8%, no layout refused or
unpredictable; the exit status is 1 when any is missed. `--explain` prints, for the layouts named
(`vtrain-175b t4 p32 d4 b2`), how the instance was derived and where its iteration goes.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from bench_cost_model import (
    Prediction,
    Run,
    breakdown_table,
    fits_text,
    iteration,
    plan_spec,
    predict,
    run_description,
    run_from_fields,
)
from results_header import results_header

from pipesat.models import InputError, PipesatError
from pipesat.models.units import GIB
from pipesat.solver.instances.explain import explain
from pipesat.solver.plan.measure import iteration_lines, usable_memory
from pipesat.solver.report.tables import Column, format_percent, format_rows

DATA = Path(__file__).resolve().parent / "data" / "measured_sweeps.yaml"
LEAST_RHO = 0.8
"""Issue 44's targets: Spearman's rho at least this, ..."""
MOST_PICK_SLOWER = 0.03
"""... the plan's pick measured at most this much slower than the measured best, ..."""
MOST_MEDIAN_ERROR = 0.08
"""... the median absolute error at most this, and no layout refused or unpredictable."""


@dataclass(frozen=True)
class Sweep:
    """One measured sweep: its name, its source, and its layouts, each a run as bench_cost_model
    holds one (measured in seconds an iteration)."""

    name: str
    source: str
    layouts: list[Run]


COLUMNS_BY_DEFAULT = ("tensor_parallel", "pipeline_parallel", "data_parallel", "microbatch_size", "ms")
"""A layout row's fields when its sweep names no `columns`: t, p, d, b and the measured ms."""
MEASURES = ("ms", "samples_per_s_per_gpu")
"""What a row may give as measured: an iteration's ms, or samples (sequences) a second a GPU."""


def load_sweeps(path: Path = DATA) -> list[Sweep]:
    """The sweeps of the data file, each layout with its source's settings and cluster, checked
    (t·p·d its GPUs, the global batch whole microbatches on every replica). A row gives the fields
    its sweep's `columns` name (t, p, d, b and ms by default), over the sweep's `layout`; its global
    batch is the sweep's, or its microbatches' sequences; samples a second a GPU become the
    iteration's seconds, the global batch over them and the GPUs."""
    data = yaml.safe_load(path.read_text())
    sweeps = []
    for raw in data["sweeps"]:
        source = data["sources"][raw["from"]]
        columns = tuple(raw.get("columns", COLUMNS_BY_DEFAULT))
        repeats: Counter[str] = Counter()
        layouts = []
        for values in raw["layouts"]:
            if len(values) != len(columns):
                raise InputError(f"{path.name}: sweep {raw['name']}: row {values} does not give {', '.join(columns)}")
            row = {**raw.get("layout", {}), **dict(zip(columns, values, strict=True))}
            layout = layout_name(raw["name"], row, columns)
            repeats[layout] += 1
            fields: dict[str, Any] = {
                **source["defaults"],
                **{key: value for key, value in row.items() if key not in MEASURES and key != "microbatches"},
                "cluster": source["cluster"],
                "name": layout + (f" #{repeats[layout]}" if repeats[layout] > 1 else ""),
                "model": raw["name"],
                "gpus": raw["gpus"],
                "global_batch": global_batch(raw, row),
            }
            fields["measured"] = {"s_per_iter": iteration_seconds(row, fields, path)}
            layouts.append(run_from_fields(fields, source["source"], {raw["name"]: raw["model"]}, path))
        sweeps.append(Sweep(raw["name"], source["source"], layouts))
    return sweeps


def layout_name(sweep: str, row: dict[str, Any], columns: Sequence[str]) -> str:
    """`vtrain-18.4b t8 p1 d32 b8`; the chunks, the microbatches and the schedule where the row gives
    them (`zb-1.5b t1 p8 d1 v3 b6 m24 interleaved`)."""
    t, p, d, b = row["tensor_parallel"], row["pipeline_parallel"], row["data_parallel"], row["microbatch_size"]
    chunks = f" v{row['chunks']}" if row.get("chunks", 1) > 1 else ""
    microbatches = f" m{row['microbatches']}" if "microbatches" in columns else ""
    schedule = f" {row['schedule']}" if "schedule" in columns else ""
    return f"{sweep} t{t} p{p} d{d}{chunks} b{b}{microbatches}{schedule}"


def global_batch(raw: dict[str, Any], row: dict[str, Any]) -> int:
    """The sweep's global batch, else the row's microbatches of b sequences on each of d replicas."""
    if "global_batch" in raw:
        return int(raw["global_batch"])
    return int(row["microbatches"]) * int(row["microbatch_size"]) * int(row["data_parallel"])


def iteration_seconds(row: dict[str, Any], fields: dict[str, Any], path: Path) -> float:
    """The row's measured iteration in seconds, from its ms or its samples a second a GPU."""
    given = [key for key in MEASURES if key in row]
    if len(given) != 1:
        raise InputError(f"{path.name}: run {fields['name']}: give one measured value, ms or samples_per_s_per_gpu")
    if given[0] == "ms":
        return float(row["ms"]) / 1e3
    return fields["global_batch"] / (float(row["samples_per_s_per_gpu"]) * fields["gpus"])


def layout_key(run: Run) -> tuple[int, int, int, int, int, int, str]:
    """(t, p, d, b, global batch, chunks, schedule): two rows of one layout are one layout measured twice."""
    return (
        run.tensor_parallel,
        run.pipeline_parallel,
        run.data_parallel,
        run.microbatch_size,
        run.global_batch,
        run.chunks,
        run.schedule,
    )


@dataclass(frozen=True)
class Row:
    """One layout of a sweep: its prediction (None when the model cannot predict it), the memory a
    GPU may use in the plan (bytes), and why the plan would not run it ('' when it would)."""

    run: Run
    prediction: Prediction | None
    usable_memory: float
    why: str

    @property
    def measured_ms(self) -> float:
        return self.run.measured * 1e3

    @property
    def predicted_ms(self) -> float:
        assert self.prediction is not None
        return self.prediction.measure.iteration_ms

    @property
    def error(self) -> float:
        """The predicted iteration time over the measured, less 1 (positive: predicted slower)."""
        return self.predicted_ms / self.measured_ms - 1


def predict_row(run: Run) -> Row:
    """The layout predicted, and the one reason the plan would not run it: refused by memory,
    outside the plan's space, or not predicted at all."""
    try:
        usable = usable_memory(plan_spec(run))
        prediction = predict(run)
    except PipesatError as error:
        return Row(run, None, 0.0, f"cannot be predicted: {error}")
    if prediction.refusal:
        why = f"refused by memory: {prediction.refusal}"
    elif prediction.outside_plan:
        why = f"outside the plan's space: {prediction.outside_plan}"
    else:
        why = ""
    return Row(run, prediction, usable, why)


def ranks(values: Sequence[float]) -> np.ndarray:
    """1-based ranks, ties given the mean of the ranks they share."""
    array = np.asarray(values, dtype=float)
    order = np.argsort(array, kind="stable")
    _, first, counts = np.unique(array[order], return_index=True, return_counts=True)
    ranked = np.empty(len(array))
    ranked[order] = np.repeat(first + (counts + 1) / 2, counts)
    return ranked


def spearman(xs: Sequence[float], ys: Sequence[float]) -> float:
    """Spearman's rank correlation: Pearson's of the ranks (NaN for fewer than two, or all tied)."""
    if len(xs) < 2:
        return float("nan")
    x, y = ranks(xs), ranks(ys)
    if np.ptp(x) == 0 or np.ptp(y) == 0:
        return float("nan")
    return float(np.corrcoef(x, y)[0, 1])


@dataclass(frozen=True)
class Summary:
    """A sweep against its targets, each layout by its time a sequence (its iteration over its global
    batch: a sweep whose rows run different batches is ranked by throughput): rho over the predicted
    layouts; the plan's pick (the fastest predicted of those it would run; None when none) and the
    measured best, each by its layout's mean measured iteration (a layout measured twice counts
    once); the median absolute error; the rows the plan would not run; whether the rows' global
    batches differ."""

    rho: float
    pick: Row | None
    pick_ms: float
    best: Row
    best_ms: float
    median_error: float
    not_run: list[Row]
    batches_differ: bool = False

    @property
    def pick_slower(self) -> float:
        """How much slower a sequence the pick measured than the measured best (inf without a pick)."""
        if self.pick is None:
            return float("inf")
        return (self.pick_ms / self.pick.run.global_batch) / (self.best_ms / self.best.run.global_batch) - 1

    @property
    def pick_is_best(self) -> bool:
        """The pick is the measured best, or measured as fast a sequence (a tie in the source's figures)."""
        return self.pick is not None and self.pick_slower <= 0

    def targets(self) -> list[tuple[str, bool]]:
        return [
            (f"rho >= {LEAST_RHO:g}", self.rho >= LEAST_RHO),
            (f"pick within {MOST_PICK_SLOWER:.0%} of the measured best", self.pick_slower <= MOST_PICK_SLOWER),
            (f"median |error| <= {MOST_MEDIAN_ERROR:.0%}", self.median_error <= MOST_MEDIAN_ERROR),
            ("none refused or unpredictable", not self.not_run),
        ]


def summarize(rows: Sequence[Row]) -> Summary:
    predicted = [row for row in rows if row.prediction is not None]
    measured: dict[tuple[int, int, int, int, int, int, str], list[float]] = {}
    for row in rows:
        measured.setdefault(layout_key(row.run), []).append(row.measured_ms)

    def mean_ms(row: Row) -> float:
        return statistics.mean(measured[layout_key(row.run)])

    def a_sequence(row: Row, ms: float) -> float:
        return ms / row.run.global_batch

    considered = [row for row in predicted if not row.why]
    pick = min(considered, key=lambda row: a_sequence(row, row.predicted_ms), default=None)
    best = min(rows, key=lambda row: a_sequence(row, mean_ms(row)))
    errors = [abs(row.error) for row in predicted]
    return Summary(
        rho=spearman(
            [a_sequence(row, row.predicted_ms) for row in predicted],
            [a_sequence(row, row.measured_ms) for row in predicted],
        ),
        pick=pick,
        pick_ms=mean_ms(pick) if pick is not None else float("nan"),
        best=best,
        best_ms=mean_ms(best),
        median_error=statistics.median(errors) if errors else float("inf"),
        not_run=[row for row in rows if row.why],
        batches_differ=len({row.run.global_batch for row in rows}) > 1,
    )


# ---------------------------------------------------------------------------------------------- printing

COLUMNS = [
    Column("layout", "layout", align_right=False),
    Column("microbatches", "m"),
    Column("measured", "measured ms", text=lambda v: f"{v:,.0f}"),
    Column("predicted", "predicted ms", text=lambda v: f"{v:,.0f}" if math.isfinite(v) else "-"),
    Column("error", "error", text=lambda v: f"{v * 100:+.1f}%" if math.isfinite(v) else "-"),
    Column("memory", "memory GiB: predicted / usable", align_right=False),
    Column("plan", "fits, or why the plan would not run it", align_right=False),
]


def row_cells(row: Row) -> dict[str, Any]:
    run, prediction = row.run, row.prediction
    cells: dict[str, Any] = {
        "layout": run.name.split(" ", 1)[1],  # the name less the sweep's: t, p, d, b (and #2 when measured again)
        "microbatches": run.microbatches,
        "measured": row.measured_ms,
        "predicted": float("nan"),
        "error": float("nan"),
        "memory": "-",
        "plan": row.why,
    }
    if prediction is not None:
        cells["predicted"], cells["error"] = row.predicted_ms, row.error
        cells["memory"] = f"{prediction.measure.memory_per_gpu / GIB:.1f} / {row.usable_memory / GIB:.1f}"
        cells["plan"] = row.why or fits_text(prediction)
    return cells


def summary_lines(summary: Summary) -> list[str]:
    best = summary.best.run
    lines = [f"Spearman's rho, predicted vs measured: {summary.rho:.2f}"]
    if summary.pick is None:
        lines.append(f"the plan's pick: none (it would run no layout); the measured best is {best.name}")
    else:
        pick = summary.pick.run

        def sequences(run: Run) -> str:
            return f" for {run.global_batch} sequences" if summary.batches_differ else ""

        lines.append(
            f"the plan's pick: {pick.name}, measured {summary.pick_ms:,.0f} ms{sequences(pick)}; the measured best: "
            f"{best.name}, {summary.best_ms:,.0f} ms{sequences(best)}; "
            + (
                "the pick is the measured best"
                if summary.pick_is_best
                else f"{summary.pick_slower:+.1%} slower" + (" a sequence" if summary.batches_differ else "")
            )
        )
    lines.append(f"median |error|: {format_percent(summary.median_error)}")
    lines.append(
        "refused or unpredictable: "
        + ("; ".join(f"{row.run.name} ({row.why})" for row in summary.not_run) if summary.not_run else "none")
    )
    lines += [f"{'ok  ' if hit else 'MISS'}  {label}" for label, hit in summary.targets()]
    return lines


def explain_lines(run: Run) -> list[str]:
    """How the layout's instance was derived and where its iteration goes (`pipesat plan --explain`)."""
    found = iteration(run)
    described = run_description(found.spec, found.config, run)
    return [
        f"how {run.name} was derived:",
        *explain(described, found.derivation),
        *iteration_lines(found.spec, found.config, found.derivation, found.schedule),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="sweep names, separated by commas")
    parser.add_argument("--format", choices=("text", "markdown"), default="text")
    parser.add_argument("--explain", help="layouts to explain, by name, separated by commas")
    args = parser.parse_args()
    sweeps = load_sweeps()
    if args.only:
        names = {name.strip() for name in args.only.split(",")}
        unknown = sorted(names - {sweep.name for sweep in sweeps})
        if unknown:
            parser.error(f"--only: no sweep {', '.join(unknown)}; the sweeps: {', '.join(s.name for s in sweeps)}")
        sweeps = [sweep for sweep in sweeps if sweep.name in names]
    by_name = {run.name: run for sweep in sweeps for run in sweep.layouts}
    explained = [name.strip() for name in args.explain.split(",")] if args.explain else []
    unknown = [name for name in explained if name not in by_name]
    if unknown:
        parser.error(
            f"--explain: no layout {', '.join(unknown)} in the sweeps run (name one as the table does, with its sweep: '{next(iter(by_name))}')"
        )
    print(results_header())
    started = time.perf_counter()
    missed = []
    for sweep in sweeps:
        first = sweep.layouts[0]
        batches = sorted({run.global_batch for run in sweep.layouts})
        batch = f"global batch {batches[0]}" if len(batches) == 1 else f"global batches {batches[0]} to {batches[-1]}"
        print(f"\n{sweep.name}: {first.gpus} {first.gpu} GPUs, {batch}, {len(sweep.layouts)} layouts ({sweep.source})")
        rows = [predict_row(run) for run in sweep.layouts]
        print(format_rows(COLUMNS, [row_cells(row) for row in rows], args.format))
        summary = summarize(rows)
        print()
        for line in summary_lines(summary):
            print(line)
        missed += [f"{sweep.name}: {label}" for label, hit in summary.targets() if not hit]
        predictions = [row.prediction for row in rows if row.prediction is not None]
        print("\nwhere the predicted iteration goes:")
        print(breakdown_table(predictions, args.format))
    for name in explained:
        print()
        for line in explain_lines(by_name[name]):
            print(line)
    print(f"\n{sum(len(sweep.layouts) for sweep in sweeps)} layouts in {time.perf_counter() - started:.1f} s")
    if missed:
        sys.exit(f"{len(missed)} target(s) missed: {'; '.join(missed)}")


if __name__ == "__main__":
    main()
