"""Megatron's activation-offload options for a chosen configuration that offloads (`training.offload`).

Mainline Megatron-LM (0.20.0, NVIDIA/Megatron-LM d98e8a64dd) has fine-grained activation offloading:
options `fine-grained-activation-offloading`, `offload-modules` (a list of the submodules whose
inputs are offloaded) and `activation-offload-fraction` (the part of the eligible offload groups
offloaded), built by megatron/training/arguments.py from the TransformerConfig fields of the same
names (megatron/core/transformer/transformer_config.py: `fine_grained_activation_offloading`,
`offload_modules`, its choices attn_norm, qkv_linear, core_attn, attn_proj, mlp_norm, expert_fc1,
moe_act, fused_group_mlp, gdp_qkv; `activation_offload_fraction` in [0, 1]). The plan offloads a
stage's whole activation, so every module of a layer is named (the MoE ones with experts), and the
fraction is the part of the (stage, microbatch)s the chosen schedule offloads. Megatron decides
when its copies run; pipesat's transfer times are the plan's model of them, not Megatron's order.

The zero-bubble fork (sail-sg/zero-bubble-pipeline-parallelism 39f2c186) runs PipeOffload with
options `enable-zb-runtime` (its README: the runtime must be on with offload), `cpu-offload`,
`offload-chunk-num` (the chunks of a device offloaded, megatron/core/zbpp_utils.py) and
`offload-time`, the time ratio (D2H + H2D) / 2 / (F + B) (its README), here from the instance: a
stage's transfer over its F and whole backward, the mean over the stages. Its PipeOffload scheduler is its
interleaved 1F1B's (`group_interleaved_1f1b.create_schedule`), so the script says the fork runs its
own offload order, not the one the plan timed.
"""

from __future__ import annotations

from pipesat.models.ops import Kind, transfer_time
from pipesat.solver.launch.launch_input import LaunchInput

DENSE_MODULES = ("attn_norm", "qkv_linear", "core_attn", "attn_proj", "mlp_norm")
"""Megatron's offload modules of a dense layer: the inputs of every part of it."""
MOE_MODULES = ("expert_fc1", "moe_act")
"""And of a mixture-of-experts layer's experts."""


def offloaded_share(launch: LaunchInput) -> float:
    """The part of the (stage, microbatch)s the chosen schedule offloads (0: none)."""
    instance = launch.schedule.instance
    offloads = sum(1 for op in launch.schedule.transfers if op.kind == Kind.O)
    return offloads / (instance.num_stages * instance.stage_microbatches)


def megatron_offload_flags(launch: LaunchInput) -> list[tuple[str, str | tuple[str, ...] | None]]:
    """Mainline Megatron's fine-grained activation offloading, where the chosen schedule offloads."""
    share = offloaded_share(launch)
    if share == 0:
        return []
    modules = DENSE_MODULES + (MOE_MODULES if launch.spec.model.moe else ())
    return [
        ("fine-grained-activation-offloading", None),
        ("offload-modules", modules),
        ("activation-offload-fraction", f"{share:.4g}"),
    ]


def fork_offload_flags(launch: LaunchInput, notes: list[str]) -> list[tuple[str, str | tuple[str, ...] | None]]:
    """The zero-bubble fork's PipeOffload options, where the chosen schedule offloads (module notes)."""
    if offloaded_share(launch) == 0:
        return []
    instance, config = launch.schedule.instance, launch.config
    weights = instance.weight_times or (0.0,) * instance.num_stages  # the backward whole: B and W
    ratios = [
        transfer_time(instance, stage) / (instance.forward_times[stage] + instance.backward_times[stage] + weight)
        for stage, weight in enumerate(weights)
    ]
    chunks = config.chunks if config.offload == "full" else 1
    notes.append(
        "the fork's PipeOffload runs its own offload order (its interleaved 1F1B's scheduler), not the one the plan "
        "timed; offload-time is the plan's transfer over F + B"
    )
    return [
        ("enable-zb-runtime", None),
        ("cpu-offload", None),
        ("offload-chunk-num", str(chunks)),
        ("offload-time", f"{sum(ratios) / len(ratios):.4g}"),
    ]
