"""Hold the cost model against published training runs: predicted vs measured throughput and memory.

Every run of benchmarks/data/published_runs.yaml is predicted through the code a plan uses: the
run's pinned configuration becomes a plan spec with one value in every searched list, and the plan
predicts that configuration as it ran (`solver.plan.predict`, what `pipesat plan --predict` runs):
the plan's description of it (`space.description`) is derived (`from_model.derive`), the
schedule the run used (1F1B, or Megatron's interleaved 1F1B with its v) is built by the handwritten
heuristic and validated, and `measure` turns it into an iteration time. The iteration time is then
put in the source's own convention (seconds an iteration, hardware TFLOP/s counting recomputation,
model TFLOP/s, tokens a second a GPU) and compared with the published number. Each GPU type has one
setting, its catalogue entry's `gemm_efficiency` and `attention_efficiency`: no run is tuned.

    python benchmarks/bench_cost_model.py [--only NAME,...] [--format text|markdown] [--fractions GPU=GEMM,ATTENTION]
    python benchmarks/bench_cost_model.py --fit [--gemm 0.5:0.95:0.05] [--attention 0.3:0.8:0.1] [--jobs 2]

It prints, per run, the predicted and the measured throughput and the error, the memory a GPU
predicted against the published where the source gives it, whether the plan would refuse the
configuration by memory (it must not refuse one that trained) and whether the run's own schedule
fits its budgets; then the median absolute error per GPU type and in all, Korthikanti et al.'s
full/selective iteration-time ratios, and where each predicted iteration goes (compute,
recomputation, communication, bubble, optimizer step). `--fit` scans the two fractions of each GPU
type over a grid and prints each point's median absolute error, so the catalogue's values can be
chosen from the whole grid (the script never edits the catalogue).
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import yaml

from pipesat.models import InputError, PipesatError, Schedule
from pipesat.models.plan_result import Configuration, Measure
from pipesat.models.units import GIB, MIB
from pipesat.solver.evaluate.metrics import compute_metrics
from pipesat.solver.instances.from_model import Derivation, Description, derive
from pipesat.solver.instances.gpus import CATALOGUE
from pipesat.solver.plan.measure import model_flops
from pipesat.solver.plan.predict import configured_schedule, unbounded
from pipesat.solver.plan.predict import predict as predict_configuration
from pipesat.solver.plan.space import description, enumerate_space
from pipesat.solver.plan.spec import PlanSpec, spec_from_dict
from pipesat.solver.report.tables import Column, format_percent, format_rows

DATA = Path(__file__).resolve().parent / "data" / "published_runs.yaml"
PRECISION_BYTES = {"bf16": 2.0, "fp16": 2.0}
"""The precisions a run may train in: one bytes-per-value for every op (an fp8 run is not expressed)."""
CONVENTIONS = ("s_per_iter", "hardware_tflops", "model_tflops", "tokens_per_s_per_gpu")
"""What a source measured (published_runs.yaml says what each means)."""
SPLITS = ("even", "ends_one_fewer")
V_SCHEDULES = ("dualpipe-v", "zb-v")
"""The schedules a run may name that place two chunks a device in a V."""


@dataclass(frozen=True)
class Run:
    """One published run: where it comes from, the model and the GPU, the configuration it pinned,
    its measured number in the source's convention (`convention`, `measured`), the other numbers
    the source gives (`reported`), the memory a GPU it gives, the spec's cluster keys where the
    source names its network (`cluster`: the catalogue's node otherwise), and the spec's further
    training keys where the framework holds its model state its own way (`training`: bytes a weight,
    gradient and optimizer state)."""

    name: str
    source: str
    model: dict[str, int]
    seq_len: int
    gpu: str
    gpus: int
    tensor_parallel: int
    pipeline_parallel: int
    data_parallel: int
    context_parallel: int
    chunks: int
    layer_split: str
    microbatch_size: int
    global_batch: int
    recompute: str
    sequence_parallel: bool
    flash_attention: bool
    dropout: bool
    zero: int
    overlap_grad_reduce: bool
    precision: str
    convention: str
    measured: float
    reported: dict[str, float]
    memory_gib: dict[str, float]
    read: str
    expert_parallel: int = 1
    run_schedule: str = ""
    apart: str = ""
    recompute_layers: int = 0
    overlap_tp_comm: bool = False
    scatter_gather_p2p: bool = True
    cluster: dict[str, float] = dataclasses.field(default_factory=dict)
    training: dict[str, float] = dataclasses.field(default_factory=dict)

    @property
    def microbatches(self) -> int:
        """m: the microbatches a data-parallel replica runs an iteration."""
        return self.global_batch // (self.data_parallel * self.microbatch_size)

    @property
    def placement(self) -> str:
        if self.run_schedule == "dualpipe":
            return "bidirectional"
        if self.run_schedule in V_SCHEDULES:
            return "vshape"
        return "interleaved" if self.chunks > 1 else "linear"

    @property
    def schedule(self) -> str:
        """The handwritten schedule the run used: the one it names, else Megatron's interleaved 1F1B
        with v > 1, else 1F1B."""
        return self.run_schedule or ("interleaved" if self.chunks > 1 else "1f1b")


@dataclass(frozen=True)
class Unexpressed:
    """A published run the model cannot express, and why."""

    name: str
    source: str
    why: str


@dataclass(frozen=True)
class Prediction:
    """One run predicted: the measure of its schedule, its throughput in the source's convention, the
    memory a GPU (GiB, by the names of `Run.memory_gib`), why the plan would refuse it by memory and
    why its own schedule does not fit (`Iteration`), why the plan's space does not hold its
    configuration ('' when it does), and the seconds the prediction took."""

    run: Run
    measure: Measure
    predicted: float
    memory_gib: dict[str, float]
    refusal: str
    over_budget: str
    outside_plan: str
    seconds: float

    @property
    def error(self) -> float:
        return throughput_error(self.run, self.predicted)


def throughput_error(run: Run, predicted: float) -> float:
    """Predicted over measured throughput, less 1 (for seconds an iteration, measured over predicted)."""
    if run.convention == "s_per_iter":
        return run.measured / predicted - 1
    return predicted / run.measured - 1


def load_runs(path: Path = DATA) -> tuple[list[Run], list[Unexpressed]]:
    """The runs the model expresses, each with its source's shared fields filled in, and those it does not."""
    data = yaml.safe_load(path.read_text())
    models, sources = data["models"], data["sources"]
    runs = []
    for raw in data["runs"]:
        source = sources[raw["from"]]
        fields = {**source["defaults"], **{k: v for k, v in raw.items() if k != "from"}}
        runs.append(run_from_fields(fields, source["source"], models, path))
    unexpressed = [Unexpressed(raw["name"], raw["source"], raw["why"]) for raw in data["not_expressed"]]
    return runs, unexpressed


def run_from_fields(fields: dict[str, Any], source: str, models: dict[str, dict[str, int]], data: Path = DATA) -> Run:
    """A run from its fields (the source's defaults and its own) in the file `data`, checked for consistency."""
    ((convention, measured),) = fields["measured"].items()
    run = Run(
        name=fields["name"],
        source=source,
        model=models[fields["model"]],
        seq_len=fields["seq_len"],
        gpu=fields["gpu"],
        gpus=fields["gpus"],
        tensor_parallel=fields.get("tensor_parallel", 1),
        pipeline_parallel=fields.get("pipeline_parallel", 1),
        data_parallel=fields.get("data_parallel", 1),
        context_parallel=fields.get("context_parallel", 1),
        chunks=fields.get("chunks", 1),
        layer_split=fields.get("layer_split", "even"),
        microbatch_size=fields["microbatch_size"],
        global_batch=fields["global_batch"],
        recompute=fields.get("recompute", "none"),
        sequence_parallel=fields.get("sequence_parallel", False),
        flash_attention=fields["flash_attention"],
        dropout=fields["dropout"],
        zero=fields.get("zero", 0),
        overlap_grad_reduce=fields.get("overlap_grad_reduce", True),
        precision=fields["precision"],
        convention=convention,
        measured=float(measured),
        reported=dict(fields.get("reported", {})),
        memory_gib=dict(fields.get("memory_gib", {})),
        read=fields["read"],
        expert_parallel=fields.get("expert_parallel", 1),
        run_schedule=fields.get("schedule", ""),
        apart=fields.get("apart", ""),
        recompute_layers=fields.get("recompute_layers", 0),
        overlap_tp_comm=fields.get("overlap_tp_comm", False),
        scatter_gather_p2p=fields.get("scatter_gather_p2p", True),
        cluster=dict(fields.get("cluster", {})),
        training=dict(fields.get("training", {})),
    )
    check_run(run, data)
    return run


def check_run(run: Run, data: Path = DATA) -> None:
    """Refuse, in one line, a run whose numbers do not add up (a mistake in the data file)."""
    degrees = run.tensor_parallel * run.context_parallel * run.pipeline_parallel * run.data_parallel
    problems = [
        (degrees != run.gpus, f"t·cp·p·d = {degrees}, not its {run.gpus} GPUs"),
        (
            run.global_batch % (run.data_parallel * run.microbatch_size) != 0,
            f"global batch {run.global_batch} is not a whole number of microbatches of {run.microbatch_size} "
            f"on each of {run.data_parallel} replicas",
        ),
        (run.convention not in CONVENTIONS, f"measured {run.convention!r} is not one of {', '.join(CONVENTIONS)}"),
        (run.precision not in PRECISION_BYTES, f"precision {run.precision!r} is not one of bf16, fp16"),
        (run.layer_split not in SPLITS, f"layer_split {run.layer_split!r} is not one of {', '.join(SPLITS)}"),
        (run.gpu not in CATALOGUE, f"gpu {run.gpu!r} is not in the catalogue"),
    ]
    for wrong, what in problems:
        if wrong:
            raise InputError(f"{data.name}: run {run.name}: {what}")


def plan_spec(run: Run) -> PlanSpec:
    """The plan spec that pins the run: one value in every list the plan searches."""
    training: dict[str, Any] = {
        "global_batch": run.global_batch,
        "tensor_parallel": [run.tensor_parallel],
        "pipeline_parallel": [run.pipeline_parallel],
        "context_parallel": [run.context_parallel],
        "expert_parallel": [run.expert_parallel],
        "microbatch_sizes": [run.microbatch_size],
        "placements": [run.placement],
        "recompute": [run.recompute],
        "recompute_layers": [run.recompute_layers],
        "zero": [run.zero],
        "sequence_parallel": run.sequence_parallel,
        "flash_attention": run.flash_attention,
        "dropout": run.dropout,
        "overlap_grad_reduce": run.overlap_grad_reduce,
        "overlap_tp_comm": run.overlap_tp_comm,
        "scatter_gather_p2p": run.scatter_gather_p2p,
        "bytes_per_value": PRECISION_BYTES[run.precision],
        **run.training,
    }
    if run.chunks > 1:
        training["chunks"] = [run.chunks]
    data = {
        "model": {**run.model, "seq_len": run.seq_len},
        "cluster": {"gpus": run.gpus, "gpu": run.gpu, **run.cluster},
        "training": training,
    }
    return spec_from_dict(data, where=f"{run.name}: ")


def configuration(run: Run) -> Configuration:
    return Configuration(
        tensor_parallel=run.tensor_parallel,
        pipeline=run.pipeline_parallel,
        data_parallel=run.data_parallel,
        chunks=run.chunks,
        placement=run.placement,
        microbatch_size=run.microbatch_size,
        microbatches=run.microbatches,
        context_parallel=run.context_parallel,
        recompute=run.recompute,
        recompute_layers=run.recompute_layers,
        zero=run.zero,
        expert_parallel=run.expert_parallel,
    )


def layer_split(run: Run) -> tuple[int, ...] | None:
    """The run's published layers per stage, or None for the plan's own (balanced) split: with
    `ends_one_fewer` the embedding and the head each take a layer's place on the first and the last
    stage (BLOOM's pipeline; Llama 3 405B's)."""
    if run.layer_split == "even":
        return None
    stages = run.pipeline_parallel * run.chunks
    per_stage, left = divmod(run.model["layers"] + 2, stages)
    if left:
        raise InputError(f"{run.name}: {run.model['layers']} layers and two ends do not split over {stages} stages")
    return (per_stage - 1, *[per_stage] * (stages - 2), per_stage - 1)


def run_description(spec: PlanSpec, config: Configuration, run: Run) -> Description:
    """The plan's description of the configuration, with the run's own layer split where it published one."""
    planned = description(spec, config)
    split = layer_split(run)
    if split is None:
        return planned
    pipeline = dataclasses.replace(planned.pipeline, balance=False, layers_per_stage=split)
    return dataclasses.replace(planned, pipeline=pipeline)


@dataclass(frozen=True)
class Iteration:
    """One run through the plan's code: its spec and configuration, the derivation, the validated
    schedule and its measure; why the plan would refuse the configuration by memory, and why the
    run's own schedule does not fit its budgets ('' each when it does)."""

    spec: PlanSpec
    config: Configuration
    derivation: Derivation
    schedule: Schedule
    measure: Measure
    refusal: str
    over_budget: str


def iteration(run: Run) -> Iteration:
    """The run's iteration as the plan predicts one configuration (`solver.plan.predict`, module
    notes): its own schedule, measured without a memory budget where the plan refuses it by memory."""
    spec, config = plan_spec(run), configuration(run)
    described = run_description(spec, config, run)
    found = predict_configuration(spec, config, run.schedule, described=described, name=run.name)
    return Iteration(spec, config, found.derivation, found.schedule, found.measure, found.refusal, found.over_budget)


def outside_plan_space(spec: PlanSpec, config: Configuration) -> str:
    """Why the plan's space of the pinned spec does not hold the configuration ('' when it does)."""
    try:
        space = enumerate_space(spec)
    except PipesatError as error:
        return str(error)
    if config in space.configs:
        return ""
    return space.skipped[0] if space.skipped else "not enumerated"


def predict(run: Run) -> Prediction:
    """The run predicted: its iteration in the source's convention, its memory, whether it fits, and
    whether the plan considers its configuration."""
    started = time.perf_counter()
    found = iteration(run)
    return Prediction(
        run=run,
        measure=found.measure,
        predicted=in_convention(run, found.spec, found.measure),
        memory_gib=memory_gib(run, found),
        refusal=found.refusal,
        over_budget=found.over_budget,
        outside_plan=outside_plan_space(found.spec, found.config),
        seconds=time.perf_counter() - started,
    )


def in_convention(run: Run, spec: PlanSpec, result: Measure) -> float:
    """The predicted iteration as the source counts throughput (published_runs.yaml's conventions)."""
    seconds = result.iteration_ms / 1e3
    if run.convention == "s_per_iter":
        return seconds
    if run.convention == "hardware_tflops":
        return megatron_hardware_flops(run) / (seconds * run.gpus) / 1e12
    if run.convention == "model_tflops":
        return model_flops(spec) / (seconds * run.gpus) / 1e12
    return result.tokens_per_s / run.gpus


def megatron_hardware_flops(run: Run) -> float:
    """Narayanan et al.'s FLOPs of an iteration with full recomputation, the count behind their (and
    BLOOM's, MT-NLG's) TFLOP/s: 96·B·s·l·h²·(1 + s/6h + V/16lh), for a GELU model with full attention."""
    model = run.model
    if model.get("ffn_hidden") or model.get("kv_heads") or run.recompute != "full":
        raise InputError(f"{run.name}: hardware TFLOP/s are Megatron's count for a GPT layer with full recompute")
    b, s, layers, h, vocab = run.global_batch, run.seq_len, model["layers"], model["hidden"], model["vocab"]
    return 96 * b * s * layers * h**2 * (1 + s / (6 * h) + vocab / (16 * layers * h))


def memory_gib(run: Run, found: Iteration) -> dict[str, float]:
    """The memory a GPU the model predicts, for the amounts the source gives: the largest device's
    model state, its schedule's peak activations, and the peak activations of the same configuration
    without recomputation or sequence parallelism (Korthikanti et al.'s Figure 1)."""
    amounts: dict[str, float] = {}
    if "model_state" in run.memory_gib:
        amounts["model_state"] = max(state.bytes for state in found.derivation.states) / GIB
    if "activations" in run.memory_gib:
        amounts["activations"] = max(compute_metrics(found.schedule).peak_memory) * MIB / GIB
    if "activations_no_recompute" in run.memory_gib:
        spec = found.spec
        plain = dataclasses.replace(spec, sequence_parallel=False)
        described = run_description(plain, dataclasses.replace(found.config, recompute="none"), run)
        peaks = compute_metrics(configured_schedule(run.schedule, derive(unbounded(described)).instance)).peak_memory
        amounts["activations_no_recompute"] = max(peaks) * MIB / GIB
    return amounts


def predict_all(runs: Sequence[Run]) -> tuple[list[Prediction], list[tuple[Run, str]]]:
    """Every run predicted, and the runs the model refused to derive, each with its one line."""
    predictions, failures = [], []
    for run in runs:
        try:
            predictions.append(predict(run))
        except PipesatError as error:
            failures.append((run, str(error)))
    return predictions, failures


def median_error(errors: Sequence[float]) -> float:
    """The median absolute throughput error (NaN for none)."""
    return statistics.median(abs(error) for error in errors) if errors else float("nan")


def gpu_types(predictions: Sequence[Prediction]) -> list[str]:
    return sorted({p.run.gpu for p in predictions})


# ---------------------------------------------------------------------------------------------- printing

COLUMNS = [
    Column("run", "run", align_right=False),
    Column("gpu", "GPU", align_right=False),
    Column("layout", "t cp p d v b m", align_right=False),
    Column("recompute", "recompute", align_right=False),
    Column("convention", "measured as", align_right=False),
    Column("measured", "measured", text=lambda v: f"{v:,.4g}"),
    Column("predicted", "predicted", text=lambda v: f"{v:,.4g}"),
    Column("error", "error", text=lambda v: f"{v * 100:+.1f}%"),
    Column("memory", "memory GiB: predicted / published", align_right=False),
    Column("fits", "fits", align_right=False),
]


def row(prediction: Prediction) -> dict[str, Any]:
    run = prediction.run
    memory = ", ".join(
        f"{name.replace('_', ' ')} {prediction.memory_gib[name]:.1f} / {published:g}"
        for name, published in run.memory_gib.items()
    )
    return {
        "run": run.name + ("" if run.read == "text" else " (recalled)") + (" (apart)" if run.apart else ""),
        "gpu": run.gpu,
        "layout": f"{run.tensor_parallel} {run.context_parallel} {run.pipeline_parallel} {run.data_parallel} "
        f"{run.chunks} {run.microbatch_size} {run.microbatches}"
        + (f" ep{run.expert_parallel}" if run.expert_parallel > 1 else "")
        + (f" {run.schedule}" if run.run_schedule else ""),
        "recompute": run.recompute
        + (f" {run.recompute_layers}/stage" if run.recompute_layers else "")
        + (" +SP" if run.sequence_parallel else ""),
        "convention": run.convention.replace("_", " "),
        "measured": run.measured,
        "predicted": prediction.predicted,
        "error": prediction.error,
        "memory": memory or "-",
        "fits": fits_text(prediction),
    }


def fits_text(prediction: Prediction) -> str:
    if prediction.refusal:
        return f"refused: {prediction.refusal}"
    if prediction.over_budget:
        return f"yes, but not under its own schedule: {prediction.over_budget}"
    return "yes"


def breakdown_table(predictions: Sequence[Prediction], fmt: str) -> str:
    """Where each predicted iteration goes: its seconds and each part's share (`Measure.breakdown`)."""
    names = [name for name, _ in predictions[0].measure.breakdown.parts()] if predictions else []
    columns = [Column("run", "run", align_right=False), Column("seconds", "iteration s", text=lambda v: f"{v:.3g}")]
    columns += [Column(name, name, text=lambda v: f"{v * 100:.1f}%") for name in names]
    rows = []
    for prediction in predictions:
        measured = prediction.measure
        shares = {name: ms / measured.iteration_ms for name, ms in measured.breakdown.parts()}
        rows.append({"run": prediction.run.name, "seconds": measured.iteration_ms / 1e3, **shares})
    return format_rows(columns, rows, fmt)


def summary_lines(predictions: Sequence[Prediction]) -> list[str]:
    """The median absolute error per GPU type and in all (the runs held apart left out), and what fits."""
    counted = [p for p in predictions if not p.run.apart]
    lines = [
        f"median |error| {gpu}: {format_percent(median_error(of))} over {len(of)} runs"
        for gpu in gpu_types(counted)
        for of in [[p.error for p in counted if p.run.gpu == gpu]]
    ]
    errors = [p.error for p in counted]
    lines.append(f"median |error| in all: {format_percent(median_error(errors))} over {len(errors)} runs")
    refused = [p.run.name for p in predictions if p.refusal]
    lines.append(f"refused by memory: {', '.join(refused) if refused else 'none'}")
    over = [p.run.name for p in predictions if p.over_budget and not p.refusal]
    lines.append(f"the run's own schedule over its memory budget: {', '.join(over) if over else 'none'}")
    outside = [f"{p.run.name} ({p.outside_plan})" for p in predictions if p.outside_plan]
    lines.append(f"configurations outside the plan's space: {'; '.join(outside) if outside else 'none'}")
    lines += [
        f"held apart (not in the medians or the fit): {p.run.name}: {p.run.apart}" for p in predictions if p.run.apart
    ]
    return lines


def recompute_ratios(predictions: Sequence[Prediction]) -> list[str]:
    """Korthikanti et al.'s full over selective (+SP) iteration time, predicted and measured, per model."""
    by_key = {(p.run.source, p.run.model["hidden"], p.run.recompute): p for p in predictions}
    lines = []
    for (source, hidden, recompute), full in by_key.items():
        selective = by_key.get((source, hidden, "selective"))
        if recompute != "full" or selective is None or full.run.convention != "s_per_iter":
            continue
        measured = full.run.measured / selective.run.measured
        predicted = full.predicted / selective.predicted
        lines.append(
            f"full/selective {full.run.name.removesuffix('-full')}: predicted {predicted:.3f}, measured "
            f"{measured:.3f} ({(predicted / measured - 1) * 100:+.1f}%)"
        )
    return lines


# ---------------------------------------------------------------------------------------------- fitting


def grid(text: str) -> list[float]:
    """`0.5:0.9:0.1` -> [0.5, 0.6, 0.7, 0.8, 0.9]."""
    low, high, step = (float(part) for part in text.split(":"))
    count = round((high - low) / step)
    return [round(low + i * step, 6) for i in range(count + 1)]


@contextmanager
def fractions(gpu: str, gemm: float, attention: float) -> Iterator[None]:
    """The catalogue's `gpu` with these two fractions while the block runs (the file is not changed)."""
    held = CATALOGUE[gpu]
    CATALOGUE[gpu] = dataclasses.replace(held, gemm_efficiency=gemm, attention_efficiency=attention)
    try:
        yield
    finally:
        CATALOGUE[gpu] = held


def throughput_errors(runs: Sequence[Run]) -> list[float]:
    """The throughput error of each run the model derives (the fit's quick path: no memory, no space)."""
    errors = []
    for run in runs:
        try:
            found = iteration(run)
        except PipesatError:
            continue
        errors.append(throughput_error(run, in_convention(run, found.spec, found.measure)))
    return errors


def grid_error(point: tuple[str, float, float], runs: Sequence[Run]) -> float:
    """The median absolute error of `runs` with the GPU's fractions at `point` (gpu, gemm, attention)."""
    gpu, gemm, attention = point
    with fractions(gpu, gemm, attention):
        return median_error(throughput_errors(runs))


def fit(runs: Sequence[Run], gemms: Sequence[float], attentions: Sequence[float], jobs: int) -> None:
    """Print, per GPU type, the median absolute error at every point of the grid, and the best point;
    `jobs` points at a time, each in its own process."""
    for gpu in sorted({run.gpu for run in runs}):
        of = [run for run in runs if run.gpu == gpu]
        points = [(gpu, gemm, attention) for gemm in gemms for attention in attentions]
        score = partial(grid_error, runs=of)
        if jobs > 1:
            with ProcessPoolExecutor(jobs) as pool:
                found = list(pool.map(score, points))
        else:
            found = [score(point) for point in points]
        errors = {(gemm, attention): error for (_, gemm, attention), error in zip(points, found, strict=True)}
        held = CATALOGUE[gpu]
        print(f"\n{gpu} ({len(of)} runs): median |error| by gemm_efficiency (rows) and attention_efficiency")
        print("gemm  " + " ".join(f"{a:>6.2f}" for a in attentions))
        for gemm in gemms:
            print(f"{gemm:4.2f}  " + " ".join(f"{errors[gemm, a] * 100:5.1f}%" for a in attentions))
        (gemm, attention), best = min(errors.items(), key=lambda item: (item[1], item[0]))
        print(
            f"best: gemm_efficiency {gemm:g}, attention_efficiency {attention:g}: {format_percent(best)} "
            f"(the catalogue holds {held.gemm_efficiency:g}, {held.attention_efficiency:g})"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="run names, separated by commas")
    parser.add_argument("--format", choices=("text", "markdown"), default="text")
    parser.add_argument("--fit", action="store_true", help="scan each GPU type's two fractions over a grid")
    parser.add_argument("--gemm", default="0.5:0.95:0.05", help="gemm_efficiency grid LOW:HIGH:STEP")
    parser.add_argument("--attention", default="0.3:0.8:0.1", help="attention_efficiency grid LOW:HIGH:STEP")
    parser.add_argument("--jobs", type=int, default=1, help="grid points scanned at a time")
    parser.add_argument(
        "--fractions",
        action="append",
        default=[],
        metavar="GPU=GEMM,ATTENTION",
        help="predict with these fractions for a GPU type instead of the catalogue's (to see a fit's choice)",
    )
    args = parser.parse_args()
    runs, unexpressed = load_runs()
    if args.only:
        names = set(args.only.split(","))
        runs = [run for run in runs if run.name in names]
    if args.fit:
        fit([run for run in runs if not run.apart], grid(args.gemm), grid(args.attention), args.jobs)
        return
    started = time.perf_counter()
    with ExitStack() as stack:
        for given in args.fractions:
            gpu, values = given.split("=")
            gemm, attention = (float(value) for value in values.split(","))
            stack.enter_context(fractions(gpu, gemm, attention))
        predictions, failures = predict_all(runs)
    print(format_rows(COLUMNS, [row(p) for p in predictions], args.format))
    print()
    for line in [*summary_lines(predictions), *recompute_ratios(predictions)]:
        print(line)
    print("\nwhere the predicted iteration goes:")
    print(breakdown_table(predictions, args.format))
    print("\nnot expressed:")
    for gone in unexpressed:
        print(f"  {gone.name} ({gone.source}): {gone.why}")
    for run, why in failures:
        print(f"  {run.name} ({run.source}): the cost model refuses it: {why}")
    slowest = max(predictions, key=lambda p: p.seconds)
    print(
        f"\n{len(predictions)} runs in {time.perf_counter() - started:.1f} s; the slowest, {slowest.run.name}, "
        f"{slowest.seconds:.1f} s"
    )


if __name__ == "__main__":
    main()
