"""Model state: the weights, gradients and optimizer state each GPU holds, and the activation budget
that leaves of its memory.

A layer has h·(h + 2g·d) + h² attention weights and 2h·f (GELU) or 3h·f (SwiGLU) MLP weights, split
over the t tensor-parallel GPUs, and 2h norm weights every GPU keeps; a mixture-of-experts layer has,
in place of the MLP, E/EP routed and s_e shared experts of width f_e (split over t) and an h x E
router (whole). The first stage also holds the
embedding (V·h, split over t), the last the output head (V·h, split over t) and the final norm (h).
Each parameter costs `weight_bytes + grad_bytes + optimizer_bytes` (mixed-precision Adam: 2 + 4 + 12,
16-bit weights with 32-bit main gradients, master weights and two moments). The ZeRO stage `zero`
shards them over the d data-parallel replicas: 1 the optimizer state (Megatron's distributed
optimizer: 2 + 4 + 12/d), 2 the gradients too (2 + (4 + 12)/d), 3 the weights too (FSDP, 18/d). A
ZeRO-3 device also holds the gathered weights of the unit it computes and of the one it prefetches:
twice its largest unit (a layer, the embedding or the head), at `gathered_weight_bytes` a weight (FSDP
gathers fp32 sharded weights as bf16 under its mixed-precision policy: torchtitan's default, 4 + 4 + 8
bytes a parameter sharded and 2 gathered). The routed experts' state is sharded
over the d/EP replicas that hold the same experts. A device's activation budget is the
GPU's memory less a reserve (CUDA context, communication buffers, allocator fragmentation, temporary
buffers) and less the model state of its stages. docs/cost-model.md gives the sources.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pipesat.models import InstanceError
from pipesat.models.units import memory_text
from pipesat.solver.instances.cost_model import StageCost
from pipesat.solver.instances.description import Hardware, Training, Transformer
from pipesat.solver.instances.layer_work import Mlp, MlpKind, gpu_mlps


@dataclass(frozen=True)
class DeviceState:
    """One device's (one GPU's) parameters, whole (the ones it computes with, before any ZeRO
    sharding), of them its routed experts' (`expert_parameters`, which the d/EP replicas of the
    same experts share), and the bytes they cost with their gradients and optimizer state as it
    holds them."""

    parameters: float
    bytes: float
    expert_parameters: float = 0.0


def layer_parameters(model: Transformer, training: Training) -> float:
    """One layer's parameters on one GPU: its matrices split over t (a mixture-of-experts layer's
    E/EP routed experts, its shared experts and its router, which is whole), its two norms whole."""
    h = model.hidden
    matrices = h * (h + 2 * model.kv_width) + h * h + _mlp_parameters(model, gpu_mlps(model, training))
    return matrices / training.tensor_parallel + 2 * h + h * model.experts


def expert_parameters(model: Transformer, training: Training) -> float:
    """One mixture-of-experts layer's routed-expert parameters on one GPU: its E/EP experts, split over t."""
    routed = [mlp for mlp in gpu_mlps(model, training) if mlp.kind is MlpKind.ROUTED]
    return _mlp_parameters(model, routed) / training.tensor_parallel


def _mlp_parameters(model: Transformer, mlps: Sequence[Mlp]) -> float:
    """The weights of these MLPs (each `groups` of them) before the t split: two or three (SwiGLU)
    h x width matrices each."""
    return sum((3 if model.swiglu else 2) * model.hidden * mlp.width * mlp.groups for mlp in mlps)


def stage_units(model: Transformer, training: Training, stage: StageCost) -> list[float]:
    """The parameters on one GPU of each unit of a stage, in the forward's order: the embedding
    (first stage; none without a vocabulary), each layer, and the head with the final norm (last
    stage). ZeRO-3 gathers a unit at a time, and the unit is what FSDP wraps."""
    vocabulary = model.vocab * model.hidden / training.tensor_parallel
    embedding = [vocabulary] if stage.has_embedding else []
    head = [vocabulary + model.hidden] if stage.has_head else []
    dense = [layer_parameters(model.dense(), training)] * (stage.layers - stage.moe_layers)
    return [*embedding, *dense, *[layer_parameters(model, training)] * stage.moe_layers, *head]


def stage_parameters(model: Transformer, training: Training, stage: StageCost) -> float:
    """A stage's parameters on one GPU: its layers, plus the embedding or the head and final norm."""
    return sum(stage_units(model, training, stage))


def bytes_per_parameter(training: Training, replicas: int | None = None) -> float:
    """The bytes one parameter costs a GPU: ZeRO stage 1 and up shard the optimizer state over its
    replicas (the d data-parallel ones unless given: a routed expert's are d/EP), 2 and up the
    gradients, 3 the weights."""

    def share(stage: int) -> int:
        return (replicas or training.data_parallel) if training.zero >= stage else 1

    return training.weight_bytes / share(3) + training.grad_bytes / share(2) + training.optimizer_bytes / share(1)


def gathered_parameters(model: Transformer, training: Training, stages: Sequence[StageCost]) -> float:
    """The whole weights a ZeRO-3 device holds besides its shards: the unit it computes and the one it
    prefetches, at most its two largest units (0 below ZeRO-3)."""
    if training.zero < 3:
        return 0.0
    units = sorted(unit for stage in stages for unit in stage_units(model, training, stage))
    return sum(units[-2:])


def device_states(
    model: Transformer, training: Training, stages: Sequence[StageCost], placement: Sequence[int]
) -> list[DeviceState]:
    """Each device's model state: the sum over the stages placed on it (its routed experts' sharded
    over their d/EP replicas), and its gathered weights."""
    per_byte = bytes_per_parameter(training)
    per_expert_byte = bytes_per_parameter(training, training.data_parallel // training.expert_parallel)
    held: list[list[StageCost]] = [[] for _ in range(max(placement) + 1)]
    for stage, device in zip(stages, placement, strict=True):
        held[device].append(stage)
    states = []
    for own in held:
        parameters = sum(stage_parameters(model, training, stage) for stage in own)
        experts = sum(stage.moe_layers for stage in own) * expert_parameters(model, training)
        gathered = gathered_parameters(model, training, own) * training.gathered_weight_bytes
        held_bytes = (parameters - experts) * per_byte + experts * per_expert_byte
        states.append(DeviceState(parameters, held_bytes + gathered, experts))
    return states


def reserve_bytes(hardware: Hardware) -> float:
    """The memory kept back from activations and model state: a fraction of the GPU below 1, else bytes."""
    return hardware.reserve * hardware.gpu_memory if hardware.reserve < 1 else hardware.reserve


def activation_budgets(hardware: Hardware, states: Sequence[DeviceState]) -> list[float]:
    """What each device may hold in activations, in bytes: the GPU less the reserve and its model
    state. Refused in one line when the model state alone does not fit."""
    reserve = reserve_bytes(hardware)
    budgets = []
    for device, state in enumerate(states):
        budget = hardware.gpu_memory - reserve - state.bytes
        if budget <= 0:
            raise InstanceError(
                f"device {device} holds {memory_text(state.bytes, 'B')} of weights, gradients and optimizer "
                f"state plus a {memory_text(reserve, 'B')} reserve, more than hardware.gpu_memory "
                f"{memory_text(hardware.gpu_memory, 'B')}; add pipeline devices (pipeline.devices), "
                "training.tensor_parallel, or training.zero 1, 2 or 3 with training.data_parallel"
            )
        budgets.append(budget)
    return budgets
