"""The catalogue of bad input: every kind of bad instance, file and option, with the one line it must give.

Four tables, each run at the API and at the command line (`tests/test_bad_inputs.py`, and the model
and CLI tests for `BAD_INSTANCES`):
- `BAD_INSTANCES`: instance mappings `Instance.from_dict` refuses with an `InstanceError` (exit 2).
- `BAD_FILES`: files (instance, schedule, torch CSV) that a command refuses: the line and exit code at
  the command line, and the error its loader raises.
- `BAD_SPACES`: plan specs whose space `enumerate_space` refuses before any work (a count beyond its
  cap, a model the cost model refuses); each is also a row of `BAD_COMMANDS`.
- `BAD_COMMANDS`: option values and output files that a command refuses, before it does any work.
- `BAD_READS`: input files that are not regular files or are too large (a FIFO with no writer,
  /dev/zero, a folder, a file over `--max-input-mb`), which every command refuses at once; run in a
  child process with a timeout, so that one that would hang or fill the memory fails instead.
A new kind of bad input gets a row here. Not here: what needs root (replacing a device file is
refused like a FIFO: `tests/solver/io`), a write that fails (`tests/test_cli_files.py`), a signal
(`tests/test_cli_plan.py`).
"""

from __future__ import annotations

import importlib.util
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from pipesat.commands.options import MAX_WORKERS
from pipesat.solver.cpsat.processes import available_cores
from pipesat.solver.instances.calibration import MAX_ROWS
from pipesat.solver.plan.executors import JOBS_PER_CORE
from pipesat.solver.plan.schedules import SCHEDULE_NAMES
from tests.solver.plan.conftest import TINY

BASE: dict[str, Any] = {"num_devices": 2, "num_microbatches": 3}


def _case(case_id: str, message: str, **changes: Any) -> Any:
    return pytest.param({**BASE, **changes}, message, id=case_id)


BAD_INSTANCES = [
    _case("negative-time", "forward_times[1] = -1 must be positive", forward_times=[1, -1]),
    _case("zero-time", "backward_times[0] = 0 must be positive", backward_times=[0, 1]),
    _case("negative-scalar", "activation_memory = -2 must be non-negative", activation_memory=-2),
    _case("negative-p2p", "p2p_time must not be negative, got -0.5", p2p_time=-0.5),
    _case("negative-limit", "memory_limit must be positive, got -3", memory_limit=-3),
    _case("empty-list", "forward_times is an empty list; give 2 numbers, one per stage", forward_times=[]),
    _case("wrong-length", "backward_times has 3 values but there are 2 stages", backward_times=[1, 2, 3]),
    _case("wrong-length-chunks", "weight_times has 2 values but there are 4 stages", chunks=2, weight_times=[1, 1]),
    _case("nan", "forward_times[0] must be a finite number, got nan", forward_times=[float("nan"), 1]),
    _case("inf", "weight_times must be a finite number, got inf", weight_times=float("inf")),
    _case("nan-count", "num_devices must be a whole number, got nan", num_devices=float("nan")),
    _case("non-numeric", "forward_times[1] must be a number, got 'fast'", forward_times=[1, "fast"]),
    _case("non-numeric-scalar", "p2p_time must be a number, got [1]", p2p_time=[1]),
    _case("fractional-count", "num_microbatches must be a whole number, got 2.5", num_microbatches=2.5),
    _case(
        "unknown-placement",
        "unknown placement 'zigzag'; use one of linear, interleaved, vshape, bidirectional",
        placement="zigzag",
    ),
    _case("vshape-chunks-1", "placement 'vshape' needs chunks 2, got 1", placement="vshape"),
    _case("vshape-chunks-3", "placement 'vshape' needs chunks 2, got 3", placement="vshape", chunks=3),
    _case("linear-chunks-2", "placement 'linear' needs chunks 1, got 2", placement="linear", chunks=2),
    _case("placement-device", "placement[1] = 5 is not a device in 0..1", placement=[0, 5]),
    _case("placement-unbalanced", "placement puts 3 stages on device 0", placement=[0, 0, 0, 1]),
    _case(
        "placement-length",
        "placement lists 4 stages but num_devices x chunks = 2 x 1 = 2",
        placement=[0, 0, 1, 1],
        chunks=1,
    ),
    _case("p-zero", "num_devices must be at least 1, got 0", num_devices=0),
    _case("m-zero", "num_microbatches must be at least 1, got 0", num_microbatches=0),
    _case("m-negative", "num_microbatches must be at least 1, got -4", num_microbatches=-4),
    _case("chunks-zero", "chunks must be at least 1, got 0", chunks=0),
    _case("unknown-key", "unknown key 'forward_time'; did you mean 'forward_times'?", forward_time=[1, 1]),
    _case("unknown-alias-typo", "unknown key 'num_batchs'; did you mean 'num_batches'?", num_batchs=4),
    _case("alias-conflict", "'num_stages' and 'num_devices' disagree (3 vs 2); give one", num_stages=3),
    _case(
        "bad-relative-limit",
        "memory_limit 'halfx' is not a number, an amount like 12GiB or a relative limit",
        memory_limit="halfx",
    ),
    _case("zero-relative-limit", "memory_limit '0x' must be a positive factor", memory_limit="0x"),
    _case("weight-memory-fused", "weight_memory needs weight_times", weight_memory=0.5),
    _case(
        "weight-over-activation",
        "weight_memory[0] = 3 exceeds activation_memory[0] = 1",
        weight_times=1,
        activation_memory=1,
        weight_memory=[3, 0],
    ),
    _case(
        "communication-over-op",
        "forward_comm_times[1] = 1.5 exceeds forward_times[1] = 1; the communication is part of the op's time",
        forward_comm_times=[0.5, 1.5],
    ),
    _case("negative-communication", "backward_comm_times = -1 must be non-negative", backward_comm_times=-1),
    _case(
        "bidirectional-odd-microbatches",
        "placement 'bidirectional' runs half the microbatches each way; num_microbatches 3 is odd",
        chunks=2,
        placement="bidirectional",
        num_microbatches=3,
    ),
    _case(
        "bidirectional-copies-differ",
        "forward_times differs between the two copies of a bidirectional placement (stage p + i copies stage i)",
        chunks=2,
        placement="bidirectional",
        num_microbatches=4,
        forward_times=[1, 2, 3, 4],
    ),
    _case("huge-microbatches", "4,000,000,000 ops (2 devices x 1 chunks x 1,000,000,000", num_microbatches=10**9),
    _case("huge-devices", "ops (about 10^308 devices x 1 chunks x 3 microbatches", num_devices=1e308),
    _case("huge-integer", "forward_times must be a finite number, got 1000000", forward_times=10**400),
    _case("overflowing-times", "the default backward_times (twice forward_times) overflows", forward_times=1e308),
    _case("overflowing-total", "the total op time overflows", forward_times=1e100, backward_times=1),
    _case("overflowing-memory", "the total activation memory overflows", activation_memory=1e100),
    _case(
        "relative-limit-of-nothing",
        "relative to the 1F1B peak, which is 0 here",
        activation_memory=0,
        memory_limit="1x",
    ),
    _case(
        "unknown-memory-unit", "memory_unit 'gigs' is not a unit pipesat knows; use one of B, KiB", memory_unit="gigs"
    ),
    _case("unknown-time-unit", "time_unit 'min' is not a unit pipesat knows; use one of s, ms, us", time_unit="min"),
    _case(
        "limit-unit-unknown",
        "memory_limit '12 GBs': 'GBs' is not a memory unit",
        memory_limit="12 GBs",
        memory_unit="MiB",
    ),
    _case("limit-unit-without-instance-unit", "has a unit but the instance's memory has none", memory_limit="12GiB"),
    _case("limit-list-length", "memory_limit lists 3 limits but there are 2 devices", memory_limit=[1, 2, 3]),
    _case("link-bandwidth-zero", "host_link_bandwidth must be positive", host_link_bandwidth=0),
    _case("link-bandwidth-negative", "host_link_bandwidth must be positive", host_link_bandwidth=-2),
    _case(
        "link-bandwidth-per-second-unitless",
        "is per second but the instance's times have no unit",
        host_link_bandwidth="25GB/s",
        memory_unit="MiB",
    ),
    _case(
        "offload-fraction-over-one", "offload_fraction must be in [0, 1]", host_link_bandwidth=1, offload_fraction=1.5
    ),
    _case(
        "offload-fraction-negative", "offload_fraction must be in [0, 1]", host_link_bandwidth=1, offload_fraction=-0.1
    ),
    _case(
        "host-memory-below-one-offload",
        "host_memory 0.5 is less than one microbatch's offloaded activations of stage 0 (1)",
        host_link_bandwidth=1,
        host_memory=0.5,
    ),
    _case(
        "host-memory-below-one-offload-in-units",
        "host_memory '1GiB' is less than one microbatch's offloaded activations of stage 0 (2048 MiB)",
        host_link_bandwidth=1,
        host_memory="1GiB",
        memory_unit="MiB",
        activation_memory=2048,
    ),
    _case("host-memory-zero", "host_memory must be positive", host_link_bandwidth=1, host_memory=0),
    _case("limit-text-list-length", "memory_limit lists 3 limits but there are 2 devices", memory_limit="1,2,3"),
    _case("weight-eats-backward", "weight_times[0] = 4 leaves nothing of the whole backward", weight_times=4),
    _case(
        "per-device-lists-on-chunks",
        "forward_times has 2 values but there are 4 stages; give one per stage; one number (a device's share",
        chunks=2,
        forward_times=[1, 2],
    ),
]

_SCHEDULE = {
    "format": "pipesat-schedule/1",
    "instance": {"num_devices": 1, "num_microbatches": 1},
    "ops": [
        {"kind": "F", "stage": 0, "microbatch": 0, "device": 0, "start": 0, "end": 1},
        {"kind": "B", "stage": 0, "microbatch": 0, "device": 0, "start": 1, "end": 3},
    ],
}


def _schedule(**changes: Any) -> str:
    return json.dumps({**_SCHEDULE, **changes})


def _alias_bomb() -> str:
    lines = ["num_devices: 2", "num_microbatches: 2", "metadata:", "  a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"  a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 10)]
    return "\n".join(lines) + "\n"


SMALL_MODEL = ("instance", "from-model", "--layers", "4", "--hidden", "1024", "--heads", "8", "--seq-len", "1024")
SMALL_MODEL += ("-p", "2", "-m", "4", "--tflops", "100")
_LAYER = {
    **{"hidden": 64, "head_size": 16, "heads": 4, "kv_heads": 4, "mlp": "GELU", "mlp_width": 256, "seq_len": 32},
    **{"microbatch_size": 1, "recompute": "none", "tensor_parallel": 1, "forward_ms": 1.0, "backward_ms": 2.0},
    **{"weight_ms": 1.0, "recompute_ms": 0.0, "activation_bytes": 100, "weight_bytes": 10},
}


def _calibration(*rows: dict[str, Any]) -> str:
    head = {"device": "cpu", "dtype": "bf16", "torch": "2", "repeats": 5, "all_reduce_gpus": 0}
    return yaml.safe_dump({**head, "layers": [{**_LAYER, **row} for row in rows]}, sort_keys=False)


def _calibration_rows(count: int) -> str:
    """A calibration file of `count` rows, each a 0 (the number of rows is refused before a row is read)."""
    return _calibration().replace("layers: []", "layers: [" + ", ".join(["0"] * count) + "]", 1)


@dataclass(frozen=True)
class BadFile:
    """A file that `command FILE` refuses with `message` in its one error line and `exit_code`; its loader
    (`instance`, `schedule`, `csv` or `calibration`) raises the same message."""

    name: str
    text: str
    command: tuple[str, ...]
    message: str
    exit_code: int = 2

    @property
    def loader(self) -> str:
        if self.command[-1] == "--calibration":
            return "calibration"
        return {"instance": "instance", "check": "schedule", "render": "schedule", "import": "csv"}[self.command[0]]


BAD_FILES = [
    BadFile(
        "broken.yaml",
        "num_stages: 4\nnum_batches: [1, 2\nforward_times: 1\n",
        ("instance", "show"),
        "broken.yaml:3:14: not valid YAML",
    ),
    BadFile(
        "broken.json",
        '{"num_stages": 4,\n "num_batches": 8,,}\n',
        ("instance", "show"),
        "broken.json:2:19: not valid JSON",
    ),
    BadFile(
        "typo.yaml",
        "num_stages: 4\nnum_batchs: 8\n",
        ("instance", "show"),
        "unknown key 'num_batchs'; did you mean 'num_batches'?",
    ),
    BadFile("list.yaml", "[1, 2]\n", ("instance", "show"), "an instance file must hold a mapping of keys to values"),
    BadFile(
        "twice.yaml",
        "num_devices: 2\nnum_devices: 3\nnum_microbatches: 2\n",
        ("instance", "show"),
        "twice.yaml:2:1: not valid YAML: the key 'num_devices' is given twice",
    ),
    BadFile(
        "twice.json",
        '{"num_devices": 2, "num_devices": 3, "num_microbatches": 2}',
        ("instance", "show"),
        "the key 'num_devices' is given twice",
    ),
    BadFile(
        "nan.json",
        '{"num_devices": 2, "num_microbatches": 2, "forward_times": NaN}',
        ("instance", "show"),
        "NaN is not a finite number",
    ),
    BadFile("bomb.yaml", _alias_bomb(), ("instance", "show"), "its YAML aliases expand to more than 1,000,000 values"),
    BadFile(
        "deep.json",
        '{"num_devices": 2, "metadata": ' + "[" * 100_000 + "]" * 100_000 + "}",
        ("instance", "show"),
        "nested too deeply",
    ),
    BadFile(
        "deep.yaml",
        "num_devices: 2\nmetadata: " + "[" * 50_000 + "]" * 50_000 + "\n",
        ("instance", "show"),
        "nested too deeply",
    ),
    BadFile("many.yaml", "num_devices: 1000\nnum_microbatches: 100000\n", ("instance", "show"), "200,000,000 ops"),
    BadFile("absent.yaml", "", ("instance", "show"), "absent.yaml: no such file"),
    BadFile("truncated.json", _schedule()[:70], ("check",), "truncated.json:1:"),
    BadFile("wrong-format.json", _schedule(format="something-else"), ("check",), "not a pipesat schedule"),
    BadFile("source-text.json", _schedule(source="made by hand"), ("check",), "'source' must be an object"),
    BadFile("source-number.json", _schedule(source=5), ("render", "--ascii"), "'source' must be an object"),
    BadFile("source-list.json", _schedule(source=[1, 2]), ("check",), "'source' must be an object"),
    BadFile("name-list.json", _schedule(name=["x"]), ("check",), "'name' must be a string"),
    BadFile(
        "op-infinite.json",
        _schedule(ops=[{**_SCHEDULE["ops"][0], "end": 1e400}]),
        ("check",),
        "Infinity is not a finite number",
    ),
    BadFile(
        "op-word.json",
        _schedule(ops=[{**_SCHEDULE["ops"][0], "end": "late"}]),
        ("check",),
        "ops[0]: end must be a finite number, got 'late'",
    ),
    BadFile(
        "huge-instance.json",
        _schedule(instance={"num_devices": 4, "num_microbatches": 10**9}),
        ("check",),
        "ops (4 devices x 1 chunks x 1,000,000,000 microbatches",
    ),
    BadFile("absent.csv", "", ("import", "csv"), "absent.csv: no such file"),
    BadFile("cells.csv", "0F0,0X1\n", ("import", "csv"), "cells.csv: cell '0X1' is not a torch action"),
    BadFile(
        "cal-overflow.yaml",
        _calibration({"backward_ms": 1e308}),
        (*SMALL_MODEL, "--calibration"),
        "cal-overflow.yaml: layers[0].backward_ms must be in (0, 1e+09] (the input gradients B, recomputation",
    ),
    BadFile(
        "cal-zero.yaml",
        _calibration({"forward_ms": 0.0, "backward_ms": 0.0, "weight_ms": 0.0}),
        (*SMALL_MODEL, "--calibration"),
        "cal-zero.yaml: layers[0].forward_ms must be in (0, 1e+09] (the layer's forward F), got 0",
    ),
    BadFile(
        "cal-recompute.yaml",
        _calibration({"hidden": 32}, {"recompute_ms": 5.0}),
        (*SMALL_MODEL, "--calibration"),
        "cal-recompute.yaml: layers[1]: recompute_ms 5 is more than backward_ms 2; backward_ms includes",
    ),
    BadFile(
        "cal-memory.yaml",
        _calibration({"activation_bytes": 10**30}),
        (*SMALL_MODEL, "--calibration"),
        "cal-memory.yaml: layers[0].activation_bytes must be in [0, 1.15292e+18]",
    ),
    BadFile(
        "cal-rows.yaml",
        _calibration_rows(MAX_ROWS + 1),
        (*SMALL_MODEL, "--calibration"),
        f"cal-rows.yaml: {MAX_ROWS + 1:,} layer rows, more than the {MAX_ROWS:,} a calibration holds",
    ),
    BadFile(
        "early.json",
        _schedule(ops=[{**o, "start": o["start"] - 5, "end": o["end"] - 5} for o in _SCHEDULE["ops"]]),
        ("check",),
        "violation(s)",
        exit_code=1,
    ),
]


@dataclass(frozen=True)
class BadCommand:
    """A command line refused with `message` in its one error line and `exit_code`, before any work."""

    case: str
    args: tuple[Any, ...]
    message: str
    exit_code: int = 2


@dataclass(frozen=True)
class BadSpace:
    """The tiny plan spec with `changes` (by section), refused with `message` before any work: by
    `enumerate_space(spec, PlanLimits(**limits))`, and by `pipesat plan CASE.yaml --max-...` (exit 2),
    whose line names the option of the cap where the API names the cap (`max_gpus`: `--max-gpus`)."""

    case: str
    changes: dict[str, dict[str, Any]]
    message: str
    limits: dict[str, int] = field(default_factory=dict)

    @property
    def spec(self) -> dict[str, Any]:
        return {section: {**keys, **self.changes.get(section, {})} for section, keys in TINY.items()}

    @property
    def command(self) -> BadCommand:
        options = [part for name, value in self.limits.items() for part in ("--" + name.replace("_", "-"), value)]
        shown = re.sub(r"`(max_\w+)`", lambda cap: "--" + cap[1].replace("_", "-"), self.message)
        return BadCommand(f"plan-{self.case}", ("plan", f"{self.case}.yaml", *options), shown)


def _cap(key: str, value: int, cap: int, name: str) -> str:
    return f"{key} {value:,} is more than the plan's limit of {cap:,}; check the spec, or raise the limit with `{name}`"


BAD_SPACES = [
    BadSpace("gpus-1e9", {"cluster": {"gpus": 10**9}}, _cap("cluster.gpus", 10**9, 2**20, "max_gpus")),
    BadSpace("gpus-2-63", {"cluster": {"gpus": 2**63}}, _cap("cluster.gpus", 2**63, 2**20, "max_gpus")),
    BadSpace(
        "global-batch-1e12",
        {"training": {"global_batch": 10**12}},
        _cap("training.global_batch", 10**12, 2**20, "max_global_batch"),
    ),
    BadSpace("layers-1e6", {"model": {"layers": 10**6}}, _cap("model.layers", 10**6, 10_000, "max_layers")),
    BadSpace("gpus-over-a-lowered-cap", {}, _cap("cluster.gpus", 4, 2, "max_gpus"), {"max_gpus": 2}),
    BadSpace(
        "configurations",
        {},
        "the plan has more than 3 configurations; narrow the training section's lists (tensor_parallel, "
        "pipeline_parallel, chunks, microbatch_sizes, placements, recompute, recompute_layers, zero), or raise the "
        "limit with `max_configurations`",
        {"max_configurations": 3},
    ),
    BadSpace(
        "heads-not-dividing-hidden",
        {"model": {"hidden": 500}},
        "hidden 500 is not divisible by heads 8; the head size hidden/heads must be whole",
    ),
    BadSpace(
        "top-k-over-the-experts",
        {"model": {"experts": 4, "top_k": 8}},
        "top_k 8 is more than the 4 experts; a token goes to top_k distinct experts",
    ),
    BadSpace(
        "recompute-layers-without-full",
        {"training": {"recompute": ["none"], "recompute_layers": [2]}},
        "training.recompute_layers counts layers recomputed in full, but recompute does not try full; "
        "add full to training.recompute, or drop training.recompute_layers",
    ),
    BadSpace(
        "schedules-unknown",
        {"training": {"schedules": ["1f1b", "fast"]}},
        f"training.schedules must be a list of schedules out of {', '.join(SCHEDULE_NAMES)}, got ['1f1b', 'fast']",
    ),
    BadSpace(
        "runtime-unknown",
        {"training": {"runtime": "megatorn"}},
        "training.runtime must be one of any, megatron, megatron-zb, torchtitan, torch, got 'megatorn'; "
        "did you mean 'megatron'?",
    ),
    BadSpace(
        "runtime-schedule",
        {"training": {"runtime": "megatron", "schedules": ["zb-v"]}},
        "training.schedules zb-v is not run by megatron (Megatron-LM), which runs 1f1b, interleaved; drop it, or "
        "choose another training.runtime",
    ),
    BadSpace(
        "experts-2-63",
        {"model": {"experts": 2**63}},
        "model.experts must be in [0, 4096] (routed experts E of a mixture-of-experts layer's MLP (0: a dense "
        f"MLP)), got {2**63}",
    ),
    BadSpace(
        "experts-1e12",
        {"model": {"experts": 10**12}},
        "model.experts must be in [0, 4096] (routed experts E of a mixture-of-experts layer's MLP (0: a dense "
        f"MLP)), got {10**12}",
    ),
    BadSpace(
        "dense-layers-all",
        {"model": {"experts": 4, "dense_layers": 8}},
        "dense_layers 8 leaves none of the 8 layers a mixture of experts; give fewer, or experts 0",
    ),
    BadSpace("nics-per-node-0", {"cluster": {"nics_per_node": 0}}, "cluster.nics_per_node must be at least 1, got 0"),
    BadSpace(
        "nics-per-node-half",
        {"cluster": {"nics_per_node": 2.5}},
        "cluster.nics_per_node must be a whole number, got 2.5",
    ),
    BadSpace(
        "host-link-0",
        {"cluster": {"host_link_bandwidth": 0}},
        "cluster.host_link_bandwidth must be a positive number, got 0",
    ),
    BadSpace(
        "offload-unknown",
        {"training": {"offload": ["partial"]}},
        "training.offload must be a list of offload settings out of none, selective, full, got ['partial']",
    ),
    BadSpace(
        "offload-no-link",
        {"training": {"offload": ["none", "full"]}},
        "training.offload none, full needs a host link; give cluster.host_link_bandwidth (GB/s a direction), or "
        "name the cluster's gpu",
    ),
]

SMALL = ("-s", "2", "-b", "2")
PLAN = ("plan", "plan.yaml", "--time-budget", "5")
HAS_RAY = importlib.util.find_spec("ray") is not None
LOCAL_JOBS = JOBS_PER_CORE * available_cores()
BAD_COMMANDS = [
    BadCommand("time-limit-nan", ("solve", *SMALL, "--time-limit", "nan"), "'nan' is not a finite number"),
    BadCommand("time-limit-inf", ("solve", *SMALL, "--time-limit", "inf"), "'inf' is not a finite number"),
    BadCommand("gap-negative", ("solve", *SMALL, "--gap", "-1"), "Invalid value for '--gap'"),
    BadCommand("seed-too-large", ("solve", *SMALL, "--seed", "99999999999"), "99999999999 is not in the range"),
    BadCommand("workers-zero", ("solve", *SMALL, "--workers", "0"), "0 is not in the range 1<=x<=256"),
    BadCommand("workers-thousands", ("solve", *SMALL, "--workers", "100000"), "100000 is not in the range"),
    BadCommand("cap-nan", ("solve", *SMALL, "--minimize", "memory", "--makespan-cap", "nan"), "'nan' is not a finite"),
    BadCommand("timeout-nan", ("torch-run", "--timeout", "nan", "x.json"), "'nan' is not a finite number"),
    BadCommand(
        "placements-unknown",
        ("compare", *SMALL, "--no-solve", "--placements", "linear,diagonal"),
        "give named placements, each once, from linear, interleaved, vshape, bidirectional; got 'linear,diagonal'",
    ),
    BadCommand(
        "placements-with-torch",
        ("compare", *SMALL, "--no-solve", "--placements", "vshape", "--with-torch"),
        "--with-torch compares one placement; drop --placements or --with-torch",
    ),
    BadCommand("export-without-to", ("export", "x.json", "out.csv"), "Missing option '--to'"),
    BadCommand("offload-without-link", ("solve", *SMALL, "--offload"), "offload needs a host link: give the instance"),
    BadCommand(
        "offload-for-the-span",
        ("solve", *SMALL, "--host-link-bandwidth", "1", "--offload", "--objective", "span"),
        "offload is decided for the least makespan only",
    ),
    BadCommand("link-bandwidth-zero", ("solve", *SMALL, "--host-link-bandwidth", "0"), "must be positive"),
    BadCommand("offload-fraction-two", ("solve", *SMALL, "--offload-fraction", "2"), "must be in [0, 1]"),
    BadCommand("memory-limit-word", ("solve", *SMALL, "--memory-limit", "lots"), "--memory-limit must be a number"),
    BadCommand("memory-limit-unit", ("solve", *SMALL, "--memory-limit", "12GiB"), "has a unit but the instance's"),
    BadCommand("memory-limit-list", ("solve", *SMALL, "--memory-limit", "1,2,3"), "lists 3 limits but there are 2"),
    BadCommand(
        "model-state-over-the-gpu",
        (*SMALL_MODEL, "--gpu-memory", "100MiB"),
        "device 0 holds 432.07 MiB of weights, gradients and optimizer state plus a 10 MiB reserve, more than",
    ),
    BadCommand(
        "gpu-memory-without-unit", (*SMALL_MODEL, "--gpu-memory", "80"), "must be a positive amount with a unit"
    ),
    BadCommand(
        "expert-parallel-not-dividing-experts",
        (*SMALL_MODEL, "--experts", "6", "--expert-parallel", "4", "--data-parallel", "4"),
        "expert parallelism 4 does not divide the 6 experts; each GPU holds experts/EP of them",
    ),
    BadCommand(
        "expert-parallel-beyond-the-replicas",
        (*SMALL_MODEL, "--experts", "8", "--expert-parallel", "4", "--data-parallel", "2"),
        "expert parallelism 4 does not divide data parallelism 2; the expert-parallel GPUs are data-parallel replicas",
    ),
    BadCommand(
        "expert-parallel-without-experts",
        (*SMALL_MODEL, "--expert-parallel", "2", "--data-parallel", "2"),
        "expert parallelism 2 needs experts; give --experts, or --expert-parallel 1",
    ),
    BadCommand(
        "top-k-without-experts", (*SMALL_MODEL, "--top-k", "2"), "top_k is given but experts is 0 (a dense model)"
    ),
    BadCommand(
        "zero-3-with-experts",
        (*SMALL_MODEL, "--experts", "8", "--data-parallel", "2", "--zero", "3"),
        "ZeRO 3 with experts is not modelled; give --zero 0, 1 or 2",
    ),
    BadCommand("experts-negative", (*SMALL_MODEL, "--experts", "-1"), "--experts must be in [0, 4096]"),
    BadCommand(
        "experts-2-63",
        (*SMALL_MODEL, "--experts", str(2**63 - 1)),
        f"--experts must be in [0, 4096] (routed experts E of a mixture-of-experts layer's MLP (0: a dense MLP)), "
        f"got {2**63 - 1}",
    ),
    BadCommand(
        "from-model-layers-1e9",
        (*SMALL_MODEL, "--layers", "1000000000"),
        "--layers 1,000,000,000 is more than the limit of 10,000; check the sizes, or raise the limit with --max-layers",
    ),
    BadCommand(
        "calibrate-repeats-1e6",
        ("calibrate", "plan.yaml", "--repeats", "1000000"),
        "1000000 is not in the range 1<=x<=1000",
    ),
    BadCommand(
        "recompute-layers-without-full",
        (*SMALL_MODEL, "--recompute-layers", "2"),
        "recompute_layers counts layers recomputed in full, but recompute is none; give --recompute full",
    ),
    BadCommand(
        "from-model-host-link-0",
        (*SMALL_MODEL, "--host-link-bandwidth", "0"),
        "--host-link-bandwidth must be a positive number, got 0",
    ),
    BadCommand(
        "from-model-host-link-negative",
        (*SMALL_MODEL, "--host-link-bandwidth", "-2"),
        "--host-link-bandwidth must be a positive number, got -2",
    ),
    BadCommand(
        "from-model-host-link-without-bandwidth",
        (*SMALL_MODEL, "--host-link"),
        "--host-link needs its bandwidth; give --host-link-bandwidth (GB/s a direction), or --gpu",
    ),
    BadCommand("picture-suffix", ("solve", *SMALL, "-o", "x.jpg"), "name the picture .png, .svg or .pdf"),
    BadCommand(
        "max-ops", ("--max-ops", "5", "solve", *SMALL), "8 ops (2 devices x 1 chunks x 2 microbatches x 2 kinds"
    ),
    BadCommand("max-model-ops", ("--max-model-ops", "5", "solve", *SMALL), "the CP-SAT model would have 8 ops"),
    BadCommand(
        "save-is-input",
        ("solve", "cfg.yaml", "--save", "cfg.yaml"),
        "--save cfg.yaml is the instance file this command reads",
    ),
    BadCommand(
        "export-over-input",
        ("export", "s.json", "--to", "torch-csv", "s.json"),
        "OUT s.json is the schedule file this command reads",
    ),
    BadCommand("two-outputs", ("solve", *SMALL, "--save", "x.png", "-o", "x.png"), "x.png is both --save and -o"),
    BadCommand("existing-output", ("solve", *SMALL, "--save", "s.json"), "s.json already exists; add --force"),
    BadCommand("output-in-a-file", ("solve", *SMALL, "--save", "cfg.yaml/x.json"), "cannot write in"),
    BadCommand(
        "save-to-a-fifo",
        ("solve", *SMALL, "--save", "fifo", "--force"),
        "--save fifo is a FIFO (named pipe), not a regular file; name a file to write",
    ),
    BadCommand(
        "save-best-to-a-fifo", (*PLAN, "--save-best", "fifo"), "--save-best fifo is a FIFO (named pipe), not a regular"
    ),
    BadCommand(
        "save-to-a-link-to-a-fifo",
        ("solve", *SMALL, "--save", "to-fifo", "--force"),
        "is a FIFO (named pipe), not a regular file",
    ),
    BadCommand("save-best-to-a-folder", (*PLAN, "--save-best", "folder", "--force"), "'folder' is a directory"),
    *(
        [
            BadCommand(
                "save-best-to-dev-full",
                (*PLAN, "--save-best", "/dev/full", "--force"),
                "--save-best /dev/full is a character device, not a regular file",
            )
        ]
        if Path("/dev/full").exists()
        else []
    ),
    *(space.command for space in BAD_SPACES),
    BadCommand(
        "plan-largest-pipeline",
        ("--max-ops", "50", *PLAN),
        "the largest pipeline, t1 p4 d1 interleaved v2 b1 m4: 96 ops (4 devices x 2 chunks x 4 microbatches x 3 kinds) "
        "is more than the limit of 50",
    ),
    BadCommand(
        "plan-schedules-unknown", (*PLAN, "--schedules", "1f1b,fast"), "--schedules must be a list of schedules"
    ),
    BadCommand("plan-runtime-unknown", (*PLAN, "--runtime", "torchtitn"), "did you mean 'torchtitan'?"),
    BadCommand(
        "plan-runtime-schedule",
        (*PLAN, "--runtime", "megatron", "--schedules", "1f1b,zb-h1"),
        "training.schedules zb-h1 is not run by megatron",
    ),
    BadCommand(
        "plan-predict-gpus",
        (*PLAN, "--predict", "t1 p2 d1 b1 m4"),
        "t1 p2 d1 linear b1 m4: t·cp·p·d = 2 GPUs, the cluster has 4 (--gpus)",
    ),
    BadCommand("plan-predict-m-not-whole", (*PLAN, "--predict", "t1 p1 d4 b3 m1"), "with d4 b3, 12 does not divide it"),
    BadCommand(
        "plan-predict-not-a-configuration",
        (*PLAN, "--predict", "t1 p4 d1 b1 m4 fast"),
        "'fast' is not a word of a configuration",
    ),
    BadCommand(
        "plan-predict-schedule-not-served",
        (*PLAN, "--predict", "t1 p4 d1 b1 m4 dualpipe"),
        "DualPipe: needs chunks 2 with bidirectional placement",
    ),
    BadCommand("plan-workers-1000", (*PLAN, "--workers", "1000"), "1000 is not in the range 1<=x<=256"),
    BadCommand("plan-jobs-1000", (*PLAN, "--jobs", "1000"), "1000 is not in the range 1<=x<=256"),
    *(
        [
            BadCommand(
                "plan-jobs-beyond-the-cores",
                (*PLAN, "--jobs", LOCAL_JOBS + 1),
                f"--jobs {LOCAL_JOBS + 1} is more than the local executor's limit of {LOCAL_JOBS} ({JOBS_PER_CORE} a "
                f"core, {available_cores()} cores here)",
            )
        ]
        if LOCAL_JOBS < MAX_WORKERS
        else []
    ),
    BadCommand(
        "plan-ray-unreachable",
        (*PLAN, "--executor", "ray", "--ray-address", "127.0.0.1:1", "--ray-timeout", "2"),
        "cannot reach the Ray cluster at 127.0.0.1:1 within 2 s" if HAS_RAY else "the ray executor needs Ray",
    ),
]
"""Run in a folder holding `cfg.yaml` (an instance), `s.json` (a valid schedule), `plan.yaml` (the tiny
plan spec), `CASE.yaml` for each of `BAD_SPACES`, `fifo` (a FIFO), `to-fifo` (a link to it) and
`folder` (an empty folder)."""

BIG = ("--max-input-mb", "1")
"""With this cap, `big.yaml` (2 MiB) is too large."""
_READERS = {
    "plan": (("plan",), "plan spec"),
    "solve": (("solve", "-c"), "instance file"),
    "check": (("check",), "schedule file"),
    "calibrate": (("calibrate",), "plan spec"),
    "import-csv": (("import", "csv"), "torch schedule CSV"),
    "plan-calibration": (("plan", "plan.yaml", "--calibration"), "calibration file"),
    "from-model-calibration": ((*SMALL_MODEL, "--calibration"), "calibration file"),
    "tuning": (("solve", *SMALL, "--tuning"), "tuning file"),
}
"""Each command that reads an input file, as `name: (the command line before the file, what the file is)`."""
BAD_READS = [
    *(
        BadCommand(f"{name}-{label}", (*command, path), f"{path} is {kind}, not a regular file; the {what} must be one")
        for name, (command, what) in _READERS.items()
        for path, label, kind in (("fifo", "fifo", "a FIFO (named pipe)"), ("/dev/zero", "zero", "a character device"))
    ),
    BadCommand("tuning-toml-fifo", ("solve", *SMALL, "--tuning", "fifo.toml"), "fifo.toml is a FIFO (named pipe)"),
    BadCommand("plan-folder", ("plan", "folder"), "'folder' is a directory"),
    BadCommand(
        "plan-big",
        (*BIG, "plan", "big.yaml"),
        "big.yaml: larger than the limit of 1 MiB for an input file; check it is the plan spec, or raise the limit "
        "with --max-input-mb",
    ),
    BadCommand("solve-big", (*BIG, "solve", "big.yaml"), "big.yaml: larger than the limit of 1 MiB"),
    BadCommand("calibration-big", (*BIG, "plan", "plan.yaml", "--calibration", "big.yaml"), "big.yaml: larger than"),
    BadCommand("max-input-zero", ("--max-input-mb", "0", "plan", "plan.yaml"), "0 is not in the range x>=1"),
]
"""Run in a folder holding `plan.yaml` (the tiny plan spec), `fifo` and `fifo.toml` (FIFOs without a
writer), `folder` (an empty folder) and `big.yaml` (2 MiB)."""
