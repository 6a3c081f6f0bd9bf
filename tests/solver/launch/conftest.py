"""Launch files written for configurations of the README's Llama 3 8B spec, each predicted as it runs
(`solver.plan.predict`), and the name lists of docs/runtimes/ they are held against."""

from __future__ import annotations

from pathlib import Path

from pipesat.models import Schedule
from pipesat.models.plan_result import Configuration
from pipesat.solver.launch import WRITERS, LaunchInput
from pipesat.solver.plan.predict import parse_configuration, predict
from pipesat.solver.plan.spec import PlanSpec, load_spec
from tests.conftest import ROOT

SPEC: PlanSpec = load_spec(ROOT / "instances" / "plan" / "llama3-8b-32gpu.yaml")
PIPELINES = [
    "t4 p4 d2 vshape b1 m128 full-recompute zero1 zb-v",  # zero bubble, V placement, W split out
    "t2 p4 d4 interleaved v2 b1 m64 zero1",  # Megatron's interleaved 1F1B
    "t8 p2 d2 b1 m128 selective-recompute zb-h1",  # zero bubble, linear
    "t4 p4 d2 vshape b1 m128 dualpipe-v",  # overlapped F and B pairs
    "t4 p4 d2 b2 m64 zero3",  # 1F1B, ZeRO 3 as FSDP
]
"""Configurations with a pipeline: a zero-bubble, an interleaved, an overlapped one among them."""


def predicted(text: str) -> tuple[Configuration, Schedule, str]:
    """The configuration written `text`, its schedule as it runs (validated), and its maker."""
    config, schedule_name = parse_configuration(text)
    prediction = predict(SPEC, config, schedule_name)
    return config, prediction.schedule, prediction.made_by


def launch_files(runtime: str, text: str, launch_name: str = "launch.py") -> dict[str, str]:
    """The files the runtime's writer returns for the configuration written `text`."""
    config, schedule, made_by = predicted(text)
    launch = LaunchInput(spec=SPEC, config=config, schedule=schedule, schedule_name=made_by, launch_name=launch_name)
    return WRITERS[runtime](launch)


def name_lists(file: str) -> dict[str, set[str]]:
    """The `[section]` lists of a docs/runtimes/ names file: one name a line, `#` lines comments."""
    sections: dict[str, set[str]] = {}
    current = ""
    for line in Path(ROOT / "docs" / "runtimes" / file).read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("[") and line.endswith("]"):
            current = line[1:-1]
            sections[current] = set()
        else:
            sections[current].add(line)
    return sections
