"""Whether a description's keys fit together: the transformer's sizes, the parallelism against the
model and against itself, and the pipeline's split. Each check raises `InstanceError` with one line
that names the keys as a description writes them (`training.tensor_parallel`), leaving the command
line's flags to the command line.
"""

from __future__ import annotations

from pipesat.models import InstanceError
from pipesat.solver.instances.description import Hardware, Pipeline, Training, Transformer


def check_description(model: Transformer, training: Training, hardware: Hardware, pipeline: Pipeline) -> None:
    """Raise `InstanceError` with one line for the first thing wrong in how the description's keys fit
    together (each key alone was checked when its record was made)."""
    check_model(model)
    check_training(model, training)
    check_pipeline(pipeline)


def check_training(model: Transformer, training: Training) -> None:
    """Raise `InstanceError` when the parallelism does not fit the model or itself."""
    t = training.tensor_parallel
    kv_heads = model.kv_heads or model.heads
    widths = (("ffn_hidden", model.mlp_width),) + ((("expert_ffn_hidden", model.expert_width),) if model.moe else ())
    for what, count in (("heads", model.heads), ("kv_heads", kv_heads), *widths):
        if count % t:
            raise InstanceError(
                f"tensor parallelism {t} does not divide {what} {count}; choose a tensor-parallel degree that does"
            )
    if training.sequence_parallel and t == 1:
        raise InstanceError(
            "sequence parallelism splits over the tensor-parallel GPUs; give training.tensor_parallel 2 or more"
        )
    cp = training.context_parallel
    if model.seq_len % cp:
        raise InstanceError(
            f"context parallelism {cp} does not divide seq_len {model.seq_len}; each GPU takes a cp-th of a sequence"
        )
    if training.sequence_parallel and model.seq_len // cp % t:
        share = f"seq_len {model.seq_len}" + (f" / context parallelism {cp}" if cp > 1 else "")
        raise InstanceError(f"sequence parallelism needs {share} divisible by tensor parallelism {t}")
    if training.recompute_layers and training.recompute != "full":
        raise InstanceError(
            f"recompute_layers counts layers recomputed in full, but recompute is {training.recompute}; "
            "give training.recompute full, or drop training.recompute_layers"
        )
    if training.zero and training.data_parallel == 1:
        raise InstanceError(
            f"ZeRO stage {training.zero} shards over data parallelism; give training.data_parallel 2 or more, or training.zero 0"
        )
    check_expert_parallel(model, training)


def check_expert_parallel(model: Transformer, training: Training) -> None:
    """Raise `InstanceError` when expert parallelism does not fit: it splits the experts, and its GPUs
    are data-parallel replicas (as Megatron-Core carves the expert-parallel group out of the
    data-parallel one), so EP divides both; ZeRO 3 of experts is not modelled."""
    ep, d = training.expert_parallel, training.data_parallel
    if not model.moe:
        if ep > 1:
            raise InstanceError(
                f"expert parallelism {ep} needs experts; give model.experts, or training.expert_parallel 1"
            )
        return
    if model.experts % ep:
        raise InstanceError(
            f"expert parallelism {ep} does not divide the {model.experts} experts; each GPU holds experts/EP of them"
        )
    if d % ep:
        raise InstanceError(
            f"expert parallelism {ep} does not divide data parallelism {d}; the expert-parallel GPUs are "
            "data-parallel replicas, give training.data_parallel a multiple of it"
        )
    if training.zero == 3:
        raise InstanceError("ZeRO 3 with experts is not modelled; give training.zero 0, 1 or 2")


def check_pipeline(pipeline: Pipeline) -> None:
    """Raise `InstanceError` when both an explicit split and `balance` are asked for."""
    if pipeline.balance and pipeline.layers_per_stage is not None:
        raise InstanceError("give pipeline.balance or pipeline.layers_per_stage, not both")


def check_model(model: Transformer) -> None:
    """Raise `InstanceError` when the transformer's sizes do not fit together (heads dividing hidden,
    key/value heads dividing heads)."""
    if model.hidden % model.heads:
        raise InstanceError(
            f"hidden {model.hidden} is not divisible by heads {model.heads}; the head size hidden/heads must be whole"
        )
    if model.kv_heads and model.heads % model.kv_heads:
        raise InstanceError(
            f"heads {model.heads} is not divisible by kv_heads {model.kv_heads}; each key/value head serves a "
            "whole group of query heads"
        )
    check_experts(model)


def check_experts(model: Transformer) -> None:
    """Raise `InstanceError` when the mixture-of-experts keys do not fit together: a dense model
    given expert keys, more experts a token than there are, no mixture-of-experts layer left."""
    if not model.moe:
        given = [name for name in ("shared_experts", "expert_ffn_hidden", "dense_layers") if getattr(model, name)]
        if given or model.top_k > 1:
            name = given[0] if given else "top_k"
            raise InstanceError(f"{name} is given but experts is 0 (a dense model); give experts, or leave {name} out")
        return
    if model.top_k > model.experts:
        raise InstanceError(
            f"top_k {model.top_k} is more than the {model.experts} experts; a token goes to top_k distinct experts"
        )
    if model.dense_layers >= model.layers:
        raise InstanceError(
            f"dense_layers {model.dense_layers} leaves none of the {model.layers} layers a mixture of experts; "
            "give fewer, or experts 0"
        )
