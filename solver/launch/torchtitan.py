"""The torchtitan launch: a Python function that sets a `Trainer.Config`'s parallelism, batch and
activation checkpointing to the chosen configuration, and the schedule CSV it names
(docs/runtimes/torchtitan.md; the fields are those of docs/runtimes/torchtitan-fields.txt).

torchtitan's configs are Python (`config_registry.py` functions returning `Trainer.Config`), so the
launch file is a function `pipesat_config(config)` that the user applies to their model's config.
The pipeline always runs the CSV (`pipeline_parallel_schedule_csv`, run by torch's
`_PipelineScheduleRuntime`), so that torchtitan runs exactly the order pipesat timed, whichever
schedule made it. torchtitan still reads `pipeline_parallel_schedule` for the stages' layout
(`_get_pp_rank_to_stage_indices_mapping`: the V layout for ZBVZeroBubble and DualPipeV, the looped
one otherwise), so the launch names the class of the schedule's placement, and gives the layers of
each stage as `module_fqns_per_model_part` (the modules of torchtitan's decoders: `tok_embeddings`,
`layers.i`, `norm`, `lm_head`).

What torchtitan cannot say exactly is written as its nearest setting with a comment: ZeRO 1 and 2
become FSDP that keeps parameters gathered from forward to backward (it shards them between steps
too), and recomputing a stage's first k layers becomes full recomputation of every layer.
"""

from __future__ import annotations

from pipesat.models import InputError
from pipesat.models.plan_result import Configuration
from pipesat.solver.launch.launch_input import LaunchInput
from pipesat.solver.launch.pipeline import csv_name, python_list, quoted, rank_stages, schedule_csv, stage_layers

PLACEMENT_CLASSES = {
    "linear": "PipelineScheduleSingle",
    "interleaved": "PipelineScheduleMulti",
    "vshape": "ZBVZeroBubble",
}
"""The torch schedule class whose stage layout torchtitan builds for each placement (its CSV runs the order)."""
AC_CONFIGS = {"full": "FullAC", "selective": "SelectiveAC"}
"""pipesat's recomputation -> torchtitan's activation-checkpointing class."""


def write_torchtitan(launch: LaunchInput) -> dict[str, str]:
    """The launch file (a `pipesat_config` function) and, with a pipeline, the schedule CSV it names."""
    config = launch.config
    files = {launch.launch_name: ""}  # the launch file first, its text once the rest is known
    body = _data_parallel(config) + _training(launch)
    if config.pipeline > 1:
        files[csv_name(launch.launch_name)] = schedule_csv(launch.schedule)
        body = _pipeline(launch) + body
    ac = AC_CONFIGS.get(config.recompute)
    body += _recompute(config, ac)
    imports = ["from torchtitan.trainer import Trainer"]
    if ac is not None:
        imports.insert(0, f"from torchtitan.distributed.activation_checkpoint import {ac}")
    files[launch.launch_name] = _file(launch, imports, body)
    return files


def _file(launch: LaunchInput, imports: list[str], body: list[str]) -> str:
    config, _spec = launch.config, launch.spec
    parallel = [
        f"config.parallelism.tensor_parallel_degree = {config.tensor_parallel}",
        f"config.parallelism.enable_sequence_parallel = {launch.sequence_parallel}",
        f"config.parallelism.context_parallel_degree = {config.context_parallel}",
        f"config.parallelism.pipeline_parallel_degree = {config.pipeline}",
    ]
    csv_line = ""
    if config.pipeline > 1:
        imports = ["from pathlib import Path", "", *imports]
        csv_line = f'\nSCHEDULE_CSV = str(Path(__file__).with_name("{csv_name(launch.launch_name)}"))\n'
    lines = "\n".join(f"    {line}" for item in parallel + body for line in item.split("\n"))
    return f'''"""torchtitan launch written by pipesat: {config.label}, schedule {launch.schedule_name}.

Apply it to your model's config in its config_registry.py, and name that function as the config
torchtitan's trainer runs (with the model's module), for example:

    def llama3_8b_pipesat() -> Trainer.Config:
        return pipesat_config(llama3_8b())
"""

{chr(10).join(imports)}
{csv_line}

def pipesat_config(config: Trainer.Config) -> Trainer.Config:
    """`config` with pipesat's parallel degrees, batch, schedule and recomputation."""
{lines}
    return config
'''


def _pipeline(launch: LaunchInput) -> list[str]:
    config, schedule = launch.config, launch.schedule
    layout = PLACEMENT_CLASSES.get(schedule.instance.placement_name())
    if layout is None:
        raise InputError(
            f"{config.label}: torchtitan lays stages out linearly, interleaved or as a V; a "
            f"{schedule.instance.placement_name()} placement has no torchtitan form"
        )
    ranks = "; ".join(
        f"rank {rank}: {', '.join(map(str, stages))}" for rank, stages in enumerate(rank_stages(schedule))
    )
    lines = [
        f"# the stages each rank builds ({ranks}); the order is {launch.schedule_name}'s, in the CSV",
        f'config.parallelism.pipeline_parallel_schedule = "{layout}"',
        "config.parallelism.pipeline_parallel_schedule_csv = SCHEDULE_CSV",
        f"config.parallelism.num_pp_microbatches = {config.microbatches}",
        "config.parallelism.module_fqns_per_model_part = [",
        *(
            python_list(quoted(modules), "    ", outer=4, after=",")
            for modules in _stage_modules(stage_layers(schedule))
        ),
        "]",
    ]
    if schedule.has_pairs:
        lines.append(
            "# OVERLAP_F_B cells: torch runs a pair's forward and backward one after the other unless a "
            "function is registered for OVERLAP_F_B"
        )
    return lines


def _stage_modules(layers: list[int]) -> list[list[str]]:
    """Each stage's modules in a torchtitan decoder: the embedding on the first, the norm and the
    output layer on the last."""
    modules, first = [], 0
    for stage, count in enumerate(layers):
        names = [f"layers.{layer}" for layer in range(first, first + count)]
        if stage == 0:
            names.insert(0, "tok_embeddings")
        if stage == len(layers) - 1:
            names += ["norm", "lm_head"]
        modules.append(names)
        first += count
    return modules


def _data_parallel(config: Configuration) -> list[str]:
    d, ep = config.data_parallel, config.expert_parallel
    if config.zero == 0:
        # Plain data parallelism (DDP) replicates; torchtitan's experts borrow their ranks from the shards.
        shard = ep if ep > 1 else 1
        lines = ["# torchtitan's experts take their ranks from the shards: HSDP"] if shard > 1 else []
        lines += [
            f"config.parallelism.data_parallel_replicate_degree = {d // shard}",
            f"config.parallelism.data_parallel_shard_degree = {shard}",
        ]
    else:
        policy = "always" if config.zero == 3 else "never"
        lines = [] if config.zero == 3 else [_zero_note(config.zero)]
        lines += [
            "config.parallelism.data_parallel_replicate_degree = 1",
            f"config.parallelism.data_parallel_shard_degree = {d}",
            f'config.parallelism.fsdp_reshard_after_forward = "{policy}"',
        ]
    return [*lines, f"config.parallelism.expert_parallel_degree = {ep}"]


def _zero_note(zero: int) -> str:
    return (
        f"# ZeRO {zero} has no torchtitan form: FSDP that keeps parameters gathered from forward to backward, "
        "sharding them between steps too"
    )


def _training(launch: LaunchInput) -> list[str]:
    config, spec = launch.config, launch.spec
    seq = spec.model.seq_len
    return [
        f"config.training.num_tokens_per_microbatch_per_dp_rank = {config.microbatch_size * seq}"
        f"  # b{config.microbatch_size} x {seq} tokens",
        f"config.training.num_tokens_per_train_step = {spec.global_batch * seq}  # {spec.global_batch} sequences",
        f"config.training.max_context_length = {seq}",
    ]


def _recompute(config: Configuration, ac: str | None) -> list[str]:
    if ac is None:
        return ["config.activation_checkpoint = None"]
    note = f"# every layer: torchtitan has no form of recomputing a stage's first {config.recompute_layers} alone"
    return [*([note] if config.recompute_layers else []), f"config.activation_checkpoint = {ac}.Config()"]
