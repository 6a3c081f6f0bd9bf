"""Model state: the weights, gradients and optimizer state each GPU holds, and the activation budget
that leaves of its memory.

A layer has h·(h + 2g·d) + h² attention weights and 2h·f (GELU) or 3h·f (SwiGLU) MLP weights, split
over the t tensor-parallel GPUs, and 2h norm weights every GPU keeps. The first stage also holds the
embedding (V·h, split over t), the last the output head (V·h, split over t) and the final norm (h).
Each parameter costs `weight_bytes + grad_bytes + optimizer_bytes` (mixed-precision Adam: 2 + 4 + 12,
16-bit weights with 32-bit gradients, master weights and two moments); ZeRO-1 shards the optimizer
state over the data-parallel replicas. A device's activation budget is the GPU's memory less a
reserve (CUDA context, communication buffers, allocator fragmentation, temporary buffers) and less
the model state of its stages. docs/cost-model.md gives the sources.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pipesat.models import InstanceError
from pipesat.models.units import memory_text
from pipesat.solver.instances.cost_model import Hardware, StageCost, Training, Transformer


@dataclass(frozen=True)
class DeviceState:
    """One device's (one GPU's) parameters and the bytes they cost with their gradients and optimizer state."""

    parameters: float
    bytes: float


def layer_parameters(model: Transformer, training: Training) -> float:
    """One layer's parameters on one GPU: its matrices split over t, its two norms whole."""
    h, f = model.hidden, model.mlp_width
    matrices = h * (h + 2 * model.kv_width) + h * h + (3 if model.swiglu else 2) * h * f
    return matrices / training.tensor_parallel + 2 * h


def stage_parameters(model: Transformer, training: Training, stage: StageCost) -> float:
    """A stage's parameters on one GPU: its layers, plus the embedding or the head and final norm."""
    vocabulary = model.vocab * model.hidden / training.tensor_parallel
    extra = (vocabulary if stage.has_embedding else 0.0) + (vocabulary + model.hidden if stage.has_head else 0.0)
    return stage.layers * layer_parameters(model, training) + extra


def bytes_per_parameter(training: Training) -> float:
    """Weight, gradient and optimizer bytes of one parameter; ZeRO-1 divides the optimizer's by data parallelism."""
    optimizer = training.optimizer_bytes / (training.data_parallel if training.zero1 else 1)
    return training.weight_bytes + training.grad_bytes + optimizer


def device_states(
    model: Transformer, training: Training, stages: Sequence[StageCost], placement: Sequence[int]
) -> list[DeviceState]:
    """Each device's model state: the sum over the stages placed on it."""
    per_byte = bytes_per_parameter(training)
    parameters = [0.0] * (max(placement) + 1)
    for stage, device in zip(stages, placement, strict=True):
        parameters[device] += stage_parameters(model, training, stage)
    return [DeviceState(count, count * per_byte) for count in parameters]


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
                f"state plus a {memory_text(reserve, 'B')} reserve, more than --gpu-memory "
                f"{memory_text(hardware.gpu_memory, 'B')}; add pipeline devices (-p), --tensor-parallel, or "
                "--zero1 with --data-parallel"
            )
        budgets.append(budget)
    return budgets
