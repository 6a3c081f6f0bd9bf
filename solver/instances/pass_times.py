"""A pass's compute time on one GPU: by its work's shapes on the GPU's roofline
(`solver.instances.roofline`) when the hardware names a `gpu` and no `efficiency`; else its FLOPs over
the effective throughput (TFLOP/s x efficiency).
"""

from __future__ import annotations

from pipesat.solver.instances.description import Hardware, Training
from pipesat.solver.instances.gpus import CATALOGUE
from pipesat.solver.instances.layer_work import Passes
from pipesat.solver.instances.roofline import Roofline, Work


def roofline(hardware: Hardware) -> Roofline | None:
    """The GPU the shape model times work on: the catalogue's `gpu` at the hardware's peak and memory
    bandwidth; None where the work is timed flat (an efficiency given, or no gpu)."""
    if hardware.efficiency is not None or hardware.gpu is None:
        return None
    gpu = CATALOGUE[hardware.gpu]
    return Roofline(hardware.tflops, hardware.memory_bandwidth, gpu.sms, gpu.gemm_efficiency, gpu.attention_efficiency)


def pass_ms(work: Work, training: Training, hardware: Hardware) -> float:
    """A pass's compute time in ms: by shape on the GPU's roofline, or its FLOPs at the flat rate."""
    gpu = roofline(hardware)
    if gpu is not None:
        return work.ms(training.bytes_per_value, gpu)
    return work.flops / effective_flops_per_ms(hardware)


def compute(passes: Passes, training: Training, hardware: Hardware) -> dict[str, float]:
    """The `Cost` fields of the passes' compute: FLOPs and times, B's including what it recomputes."""
    recompute_ms = pass_ms(passes.recompute, training, hardware)
    return {
        "forward_flops": passes.forward.flops,
        "backward_flops": passes.backward.flops + passes.recompute.flops,
        "weight_flops": passes.weight.flops,
        "forward_ms": pass_ms(passes.forward, training, hardware),
        "backward_ms": pass_ms(passes.backward, training, hardware) + recompute_ms,
        "weight_ms": pass_ms(passes.weight, training, hardware),
        "recompute_ms": recompute_ms,
    }


def effective_flops_per_ms(hardware: Hardware) -> float:
    """The flat model's rate: the peak times the efficiency reached, in FLOP a ms."""
    assert hardware.efficiency is not None, "the shape model (a gpu, no efficiency) has no flat rate"
    return hardware.tflops * 1e12 * hardware.efficiency / 1e3
