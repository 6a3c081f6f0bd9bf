"""The Megatron launch files: Megatron-LM's command-line flags (a bash script), and for mainline
Megatron the same configuration as Megatron-Bridge / NeMo 2 overrides (a second file).

Every flag is one the framework's parser takes (docs/runtimes/megatron-flags.txt for Megatron-LM,
docs/runtimes/megatron-zb-flags.txt for the Sea AI zero-bubble fork, docs/runtimes/bridge-keys.txt
for Bridge's keys; the tests hold the writers to them), and the two differ: the fork is Megatron 0.9,
which has no stage layout, no microbatch group size, no attention backend and few MoE shape flags
(`Dialect`). The layers: an even split is the default (each stage the same number of layers: with
chunks, the layers of a virtual pipeline stage), an uneven one Megatron's layout string, the
embedding `E` on the first stage and the loss `L` on the last, stages in order (stage s on device s
mod p, as Megatron's chunks are). What the fork cannot say is written as a note in the script.
Data, tokenizer, optimizer and checkpoint flags are the user's, after the script's name.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from pipesat.models import InputError
from pipesat.models.names import SCHEDULE_TITLES, SPLIT_OUT
from pipesat.solver.instances.from_model import derive
from pipesat.solver.launch.launch_input import LaunchInput
from pipesat.solver.launch.offload_flags import fork_offload_flags, megatron_offload_flags, offloaded_share
from pipesat.solver.plan.space import description

MEGATRON_LM = "Megatron-LM 0.20.0 (NVIDIA/Megatron-LM d98e8a64ddf34856e74b24714e3bedb2f5a39553)"
ZERO_BUBBLE_FORK = (
    "the zero-bubble fork of Megatron-LM 0.9.0 (sail-sg/zero-bubble-pipeline-parallelism "
    "39f2c186a27580b7051eb51e0f651e1efd0a8170)"
)
BRIDGE = "Megatron-Bridge 0.7.0 (NVIDIA-NeMo/Megatron-Bridge 067f987df03b8355b03192d88d70f1709fedf51a)"
ZERO_BUBBLE_MEMORY = {"zb-h1": 1, "zb-h2": 2}
"""The fork's automatic ZB scheduler under ZB-H1's and ZB-H2's memory: this many times p pending backwards."""
V_MEMORY = {"zb-v": "zb", "v-half": "half", "v-min": "min"}
"""The fork's V schedule memory setup of each V schedule."""

Flag = tuple[str, str | tuple[str, ...] | None]
"""A flag's name without its dashes (`micro-batch-size`) and its value (None: a switch; a tuple: a
list, its values one argument each)."""
DASHES = "-" * 2


@dataclass(frozen=True)
class Dialect:
    """What a Megatron's parser takes beyond the common flags: the stage layout string, the
    interleaved order's microbatch group size, the attention kernel's flag, the MoE shape flags."""

    name: str
    version: str
    layout: bool
    group_size: bool
    flash_attention: Flag
    moe_shapes: bool


MEGATRON = Dialect("megatron", MEGATRON_LM, True, True, ("attention-backend", "flash"), True)
FORK = Dialect("megatron-zb", ZERO_BUBBLE_FORK, False, False, ("use-flash-attn", None), False)


def write_megatron(launch: LaunchInput) -> dict[str, str]:
    """Megatron-LM's script, and Megatron-Bridge's overrides beside it (`<name>-bridge.txt`)."""
    stem = launch.launch_name.rsplit(".", 1)[0]
    return {
        launch.launch_name: _script(launch, MEGATRON),
        f"{stem}-bridge.txt": "\n".join(bridge_overrides(launch)) + "\n",
    }


def write_megatron_zb(launch: LaunchInput) -> dict[str, str]:
    """The zero-bubble fork's script."""
    return {launch.launch_name: _script(launch, FORK)}


def _script(launch: LaunchInput, dialect: Dialect) -> str:
    flags, notes, env = megatron_flags(launch, dialect)
    cluster = launch.spec.cluster
    per_node = min(cluster.gpus, cluster.gpus_per_node)
    lines = [
        "#!/usr/bin/env bash",
        f"# {launch.config.label}, {_title(launch.schedule_name)}: the configuration `pipesat plan` chose,",
        f"# as the flags of {dialect.version} (docs/runtimes/megatron.md).",
        *(f"# note: {note}" for note in notes),
        "# Data, tokenizer, optimizer, checkpoints and the rendezvous are yours: give them after this script's name.",
        "set -euo pipefail",
        *(f"export {name}={value}" for name, value in env),
        "MEGATRON_ARGS=(",
        *(f"    {DASHES}{flag}{_arguments(value)}" for flag, value in flags),
        ")",
        f"exec torchrun {DASHES}nnodes {cluster.gpus // per_node} {DASHES}nproc-per-node {per_node} "
        '"${PRETRAIN:-pretrain_gpt.py}" "${MEGATRON_ARGS[@]}" "$@"',
    ]
    return "\n".join(lines) + "\n"


def _arguments(value: str | tuple[str, ...] | None) -> str:
    """A flag's value as the script writes it after the flag: nothing for a switch, each of a list's apart."""
    values = () if value is None else (value,) if isinstance(value, str) else value
    return "".join(f" {shlex.quote(each)}" for each in values)


def _title(made_by: str) -> str:
    return SCHEDULE_TITLES.get(made_by, made_by)


def megatron_flags(launch: LaunchInput, dialect: Dialect) -> tuple[list[Flag], list[str], list[tuple[str, str]]]:
    """The flags (flag, value or None) of `launch` in `dialect`, the notes on what they cannot say,
    and the environment the runtime needs."""
    spec, config, schedule = launch.spec, launch.config, launch.schedule_name
    notes: list[str] = []
    env: list[tuple[str, str]] = []
    if schedule.endswith(SPLIT_OUT) or schedule.startswith("cp-sat"):
        notes.append(f"{schedule} is not one of {dialect.name}'s schedules; this is its configuration only")
    flags: list[Flag] = [
        ("tensor-model-parallel-size", str(config.tensor_parallel)),
        ("pipeline-model-parallel-size", str(config.pipeline)),
    ]
    if config.context_parallel > 1:
        flags.append(("context-parallel-size", str(config.context_parallel)))
    if config.expert_parallel > 1:
        flags.append(("expert-model-parallel-size", str(config.expert_parallel)))
    if launch.sequence_parallel:
        flags.append(("sequence-parallel", None))
    flags += _stage_flags(launch, dialect, notes)
    flags += _schedule_flags(launch, dialect, env)
    flags += recompute_flags(config.recompute, config.recompute_layers)
    flags += fork_offload_flags(launch, notes) if dialect is FORK else megatron_offload_flags(launch)
    flags += _optimizer_flags(launch, dialect, notes)
    flags += [
        ("micro-batch-size", str(config.microbatch_size)),
        ("global-batch-size", str(spec.global_batch)),
    ]
    flags += _model_flags(launch, dialect, notes)
    return flags, notes, env


def layer_split(launch: LaunchInput) -> tuple[int, ...]:
    """The layers of each stage, in stage order, as the plan split them."""
    return derive(description(launch.spec, launch.config)).split


def layout_string(split: tuple[int, ...]) -> str:
    """Megatron's pipeline model-parallel layout of the split: `Ett|tt|ttL` (E the embedding, t a
    layer, L the loss), one `|` between stages; a run of n layers written `t*n` past three."""
    stages = []
    for stage, layers in enumerate(split):
        body = "t" * layers if layers <= 3 else f"t*{layers}"
        stages.append(("E" if stage == 0 else "") + body + ("L" if stage == len(split) - 1 else ""))
    return "|".join(stages)


def _stage_flags(launch: LaunchInput, dialect: Dialect, notes: list[str]) -> list[Flag]:
    """How the layers are laid on the stages: the default even split, chunks of an interleaved
    pipeline, or the layout of an uneven split. Without a layout (the fork) an uneven split is
    written even, with a note, and one that cannot be even is refused in one line."""
    config, layers = launch.config, launch.spec.model.layers
    split = layer_split(launch)
    if len(set(split)) > 1 and dialect.layout:
        flags: list[Flag] = [("pipeline-model-parallel-layout", layout_string(split))]
    else:
        if len(set(split)) > 1:
            if layers % len(split):
                raise InputError(
                    f"{dialect.name} splits the layers evenly, and {layers} layers (model.layers) do not fill the "
                    f"{len(split)} stages of {config.label} so; choose a layout whose stages divide them"
                )
            notes.append(f"{dialect.name} splits the layers evenly; the plan timed its split {list(split)}")
        chunked = config.placement == "interleaved"  # the fork's V schedule makes its two chunks itself
        flags = [("num-layers-per-virtual-pipeline-stage", str(layers // len(split)))] if chunked else []
    if config.placement == "interleaved" and dialect.group_size:
        flags.append(("microbatch-group-size-per-virtual-pipeline-stage", str(config.pipeline)))
    return flags


def _schedule_flags(launch: LaunchInput, dialect: Dialect, env: list[tuple[str, str]]) -> list[Flag]:
    """The fork's zero-bubble schedules (Megatron's own need no flag: its interleaving follows from the chunks)."""
    schedule, p = launch.schedule_name, launch.config.pipeline
    if dialect is not FORK or schedule not in (*ZERO_BUBBLE_MEMORY, "zb-auto", *V_MEMORY):
        return []
    env.append(("CUDA_DEVICE_MAX_CONNECTIONS", "8"))  # the fork's runtime asks for at least 8 with overlapped p2p
    if schedule in V_MEMORY:
        v_flags: list[Flag] = [
            ("zero-bubble-v-schedule", None),
            ("zero-bubble-v-schedule-mem-setup", V_MEMORY[schedule]),
        ]
        return v_flags + post_validation_flags(launch)
    flags: list[Flag] = [("enable-zero-bubble", None)]
    if schedule in ZERO_BUBBLE_MEMORY:
        flags.append(("zero-bubble-max-pending-backward", str(ZERO_BUBBLE_MEMORY[schedule] * p)))
    return flags + post_validation_flags(launch)


def post_validation_flags(launch: LaunchInput) -> list[Flag]:
    """The optimizer step post-validated, as the fork's example script runs every zero-bubble schedule in
    half precision (the fork asserts fp16 or bf16 with it): the plan timed the schedule by its max span
    on that ground (`Runtime.iterates_on_span`)."""
    return [("enable-optimizer-post-validation", None)] if launch.spec.training.bytes_per_value == 2 else []


def recompute_flags(recompute: str, layers: int) -> list[Flag]:
    """Megatron's recomputation: selective (the attention core), or full of every layer (uniform,
    one layer a unit) or of a stage's first `layers` (block)."""
    if recompute == "selective":
        return [("recompute-granularity", "selective")]
    if recompute != "full":
        return []
    method, count = ("block", layers) if layers else ("uniform", 1)
    return [
        ("recompute-granularity", "full"),
        ("recompute-method", method),
        ("recompute-num-layers", str(count)),
    ]


def _optimizer_flags(launch: LaunchInput, dialect: Dialect, notes: list[str]) -> list[Flag]:
    """The distributed optimizer (ZeRO 1) and the overlaps of the data-parallel communication."""
    config, training = launch.config, launch.spec.training
    flags: list[Flag] = [("use-distributed-optimizer", None)] if config.zero == 1 else []
    zero_bubble = dialect is FORK and launch.schedule_name in (*ZERO_BUBBLE_MEMORY, "zb-auto", *V_MEMORY)
    if zero_bubble and config.zero == 1:
        notes.append(
            "the fork does not overlap the gradient reduction or the weight gather of a zero-bubble schedule with "
            "its distributed optimizer; the plan's times assumed them as training.overlap_grad_reduce and "
            "training.overlap_param_gather say"
        )
        return flags
    if training.overlap_grad_reduce and config.data_parallel > 1:
        flags.append(("overlap-grad-reduce", None))
    if training.overlap_param_gather and config.zero == 1:
        flags.append(("overlap-param-gather", None))
    if training.overlap_tp_comm and launch.sequence_parallel:
        flags.append(("tp-comm-overlap", None))
        notes.append("tp-comm-overlap needs Transformer Engine's userbuffers")
    return flags


def _model_flags(launch: LaunchInput, dialect: Dialect, notes: list[str]) -> list[Flag]:
    """The model's shape, precision and attention kernel; embedding and output weights apart, as
    the plan counts them."""
    model, training = launch.spec.model, launch.spec.training
    flags: list[Flag] = [
        ("num-layers", str(model.layers)),
        ("hidden-size", str(model.hidden)),
        ("num-attention-heads", str(model.heads)),
        ("seq-length", str(model.seq_len)),
        ("max-position-embeddings", str(model.seq_len)),
    ]
    if 0 < model.kv_heads < model.heads:
        flags += [("group-query-attention", None), ("num-query-groups", str(model.kv_heads))]
    if model.ffn_hidden:
        flags += [("swiglu", None), ("ffn-hidden-size", str(model.ffn_hidden))]
    else:
        flags.append(("ffn-hidden-size", str(4 * model.hidden)))
    if model.experts:
        flags += [("num-experts", str(model.experts)), ("moe-router-topk", str(model.top_k))]
        if dialect.moe_shapes:
            flags += _moe_shape_flags(launch)
        else:
            notes.append(f"{dialect.name} has no flags for the experts' width, shared experts or dense layers")
    if model.vocab:
        flags.append(("untie-embeddings-and-output-weights", None))
    if training.bytes_per_value == 2:
        flags.append(("bf16", None))
    if training.flash_attention:
        flags.append(dialect.flash_attention)
    return flags


def _moe_shape_flags(launch: LaunchInput) -> list[Flag]:
    model = launch.spec.model
    width = model.expert_ffn_hidden or model.ffn_hidden or 4 * model.hidden
    flags: list[Flag] = [("moe-ffn-hidden-size", str(width))]
    if model.shared_experts:
        flags.append(("moe-shared-expert-intermediate-size", str(model.shared_experts * width)))
    if model.dense_layers:
        flags.append(("moe-layer-freq", f"([0]*{model.dense_layers}+[1]*{model.layers - model.dense_layers})"))
    return flags


def bridge_overrides(launch: LaunchInput) -> list[str]:
    """The configuration as Megatron-Bridge's `key=value` overrides (Hydra's grammar: a string with
    `|` or `*` quoted), one a line, after a comment saying what they are."""
    config, spec = launch.config, launch.spec
    split = layer_split(launch)
    values: list[tuple[str, object]] = [
        ("model.tensor_model_parallel_size", config.tensor_parallel),
        ("model.pipeline_model_parallel_size", config.pipeline),
        ("model.context_parallel_size", config.context_parallel),
        ("model.expert_model_parallel_size", config.expert_parallel),
        ("model.sequence_parallel", launch.sequence_parallel),
    ]
    if len(set(split)) > 1:
        values.append(("model.pipeline_model_parallel_layout", f"'{layout_string(split)}'"))
    elif config.placement == "interleaved":
        values.append(("model.virtual_pipeline_model_parallel_size", config.chunks))
    if config.placement == "interleaved":
        values.append(("model.microbatch_group_size_per_vp_stage", config.pipeline))
    for flag, value in recompute_flags(config.recompute, config.recompute_layers):
        values.append((f"model.{flag.replace('-', '_')}", value))
    offload = megatron_offload_flags(launch)[:2]  # Bridge 0.7.0 has no activation_offload_fraction
    for flag, value in offload:
        listed = f"[{','.join(value)}]" if isinstance(value, tuple) else True
        values.append((f"model.{flag.replace('-', '_')}", listed))
    distributed = config.zero == 1
    values += [
        ("train.micro_batch_size", config.microbatch_size),
        ("train.global_batch_size", spec.global_batch),
        ("ddp.use_distributed_optimizer", distributed),
        ("optimizer.use_distributed_optimizer", distributed),
        ("ddp.overlap_grad_reduce", spec.training.overlap_grad_reduce and config.data_parallel > 1),
        ("ddp.overlap_param_gather", spec.training.overlap_param_gather and distributed),
    ]
    header = [
        f"# {config.label}, {_title(launch.schedule_name)}, as {BRIDGE} overrides (docs/runtimes/megatron.md);",
        "# the model's recipe gives its shape. Pass them as arguments: mapfile -t O < <(grep -v '^#' THIS); ... \"${O[@]}\"",
    ]
    if offload:
        header.append(
            f"# note: Bridge has no activation_offload_fraction; the schedule offloads {offloaded_share(launch):.4g}"
        )
    return [*header, *(f"{key}={_hydra(value)}" for key, value in values)]


def _hydra(value: object) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)
