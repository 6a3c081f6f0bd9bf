"""What a profile and a calibration measured, as readable lines for the command line."""

from __future__ import annotations

from typing import Any

from pipesat.models import Instance
from pipesat.models.units import MIB, memory_text
from pipesat.solver.instances.calibration import Calibration
from pipesat.solver.torch.measure import STABLE_CHANGE


def calibration_table(calibration: Calibration) -> list[str]:
    """What a calibration measured, as readable lines: the device, one row per layer shape, the bus bandwidth."""
    lines = [
        f"measured on {calibration.device} (torch {calibration.torch}), {calibration.dtype}, one layer each, "
        f"medians of rounds of {calibration.repeats}",
        f"{'t':>3} {'heads':>5} {'kv':>3} {'mlp':>12} {'seq':>6} {'b':>3} {'recompute':>9} {'F ms':>8} "
        f"{'B ms':>8} {'W ms':>8} {'R ms':>8} {'M_B MiB':>9} {'M_W MiB':>9}",
    ]
    for row in calibration.layers:
        lines.append(
            f"{row.tensor_parallel:>3} {row.heads:>5} {row.kv_heads:>3} {f'{row.mlp} {row.mlp_width}':>12} "
            f"{row.seq_len:>6} {row.microbatch_size:>3} {row.recompute:>9} {row.forward_ms:>8.4g} "
            f"{row.backward_ms:>8.4g} {row.weight_ms:>8.4g} {row.recompute_ms:>8.4g} "
            f"{row.activation_bytes / MIB:>9.4g} {row.weight_bytes / MIB:>9.4g}"
        )
    lines.append("heads, kv and mlp are one GPU's share (of t); R = the part of B that recomputes")
    if calibration.all_reduce:
        sizes = ", ".join(
            f"{memory_text(size.size_bytes, 'B')} {size.bus_bandwidth:.4g} GB/s" for size in calibration.all_reduce
        )
        lines.append(f"all-reduce bus bandwidth over {calibration.all_reduce_gpus} GPUs: {sizes}")
    else:
        lines.append("all-reduce bus bandwidth: not measured (needs two or more CUDA GPUs)")
    return lines


def profile_lines(instance: Instance) -> list[str]:
    """What a profile measured, as readable lines: the device, then one row per stage."""
    metadata = instance.metadata
    model = metadata["model"]
    lines = [
        f"measured on {metadata['device']} (torch {metadata['torch']}), medians of rounds of {metadata['repeats']}"
        + (
            ""
            if metadata["stable_medians"]
            else f"; some medians still moved over {STABLE_CHANGE:.0%} in the last round"
        ),
        f"model: {model['layers']} layers, hidden {model['hidden']}, {_heads_text(model)}, {model['mlp']} MLP "
        f"{model['mlp_width']}, sequence {model['seq_len']}, microbatch {model['microbatch_size']}, vocabulary "
        f"{model['vocab']}, {metadata['dtype']}; p2p_time not measured (0)",
        f"{'stage':>5} {'layers':>6} {'F ms':>8} {'B ms':>8} {'W ms':>8} {'B+W ms':>8} {'bwd ms':>8} {'M_B MiB':>9} {'M_W MiB':>9}",
    ]
    weights = instance.weight_times
    assert weights is not None  # a profile measures W apart
    for s in range(instance.num_stages):
        b, w = instance.backward_times[s], weights[s]
        lines.append(
            f"{s:>5} {model['layers_per_stage'][s]:>6} {instance.forward_times[s]:>8.4g} {b:>8.4g} {w:>8.4g} "
            f"{b + w:>8.4g} {metadata['full_backward_times'][s]:>8.4g} {instance.activation_memory[s]:>9.4g} "
            f"{metadata['measured_weight_memory'][s]:>9.4g}"
        )
    lines.append("bwd = the whole backward timed in one go; B + W does the same products, split")
    over = [s for s, held in enumerate(metadata["measured_weight_memory"]) if held > instance.weight_memory[s]]
    if over:
        lines.append(
            f"M_W measured above M_B on stage(s) {', '.join(map(str, over))}: weight_memory is capped at "
            "activation_memory there (an instance's W frees at most what its F allocated)"
        )
    return lines


def _heads_text(model: dict[str, Any]) -> str:
    """`heads 8`, or `heads 8 (2 key/value)` with grouped-query attention."""
    kv_heads = model["kv_heads"] or model["heads"]
    return f"heads {model['heads']}" + (f" ({kv_heads} key/value)" if kv_heads != model["heads"] else "")
