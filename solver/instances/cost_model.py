"""An analytic cost model: a transformer, how it is trained and its hardware -> each stage's `Cost`.

A layer's work and memory are `solver.instances.layer_work`'s (docs/cost-model.md derives every
term and names its source), the description it reads is `solver.instances.description`'s. A
mixture-of-experts layer's F dispatches the n·k routed copies and combines them back (two
all-to-alls among the EP GPUs), B mirrors them: that communication is part of F's and B's times,
and apart (`forward_a2a_ms`, `backward_a2a_ms`) it is what an overlapped pair can hide (`from_model`
writes it as the instance's `forward_comm_times` and `backward_comm_times`).

The layers are split over the p·v stages (evenly, by an explicit per-stage count:
`solver.instances.layer_split`; or balanced by `solver.instances.layer_balance`). The embedding sits
on the first stage and is a lookup: no FLOPs and no activation memory, only the rows it reads and
writes and its tensor-parallel reduction, which the shape model times (`embedding_cost`). The output
head sits on the last stage: one h x V matmul (split over t), so F, B and W each cost 2n·h·V / t
FLOPs, and it keeps its input and the logits (then their gradient).

Times come from the work's shapes on the GPU's roofline, or from FLOPs at a flat rate
(`solver.instances.pass_times`). To them comes the exposed communication
(`solver.instances.communication`). Times are in milliseconds rounded to 6 significant digits;
memory is in MiB (bytes over 2^20, no rounding). Weights, gradients and optimizer state are in
`solver.instances.model_state`.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

from pipesat.models import InstanceError
from pipesat.models.units import MIB
from pipesat.solver.instances.collectives import Collective
from pipesat.solver.instances.communication import layer_comm_ms, tensor_parallel_ms
from pipesat.solver.instances.description import Hardware, Training, Transformer
from pipesat.solver.instances.layer_work import (
    Passes,
    Tensor,
    head_passes,
    held_bytes,
    layer_activations,
    layer_passes,
    local_tokens,
    weight_gradient_inputs,
)
from pipesat.solver.instances.pass_times import compute, roofline
from pipesat.solver.instances.roofline import Work

TIME_UNIT = "ms"
MEMORY_UNIT = "MiB"


def instance_bandwidth(gb_per_s: float) -> float:
    """A link of `gb_per_s` (10^9 bytes a second) in the instance's units, MiB a ms."""
    return gb_per_s * 1e9 / MIB / 1e3


@dataclass(frozen=True)
class Cost:
    """Of one GPU: the FLOPs of the three passes, the memory (bytes) held from F to B (M_B) and from B
    to W (M_W), the exposed tensor-, context- and expert-parallel communication (ms) in F and in B, of
    which `forward_a2a_ms` and `backward_a2a_ms` are the experts' all-to-all (what an overlapped pair
    can hide), and the compute time (ms) of each pass, of which `recompute_ms` is the part of B that
    recomputes."""

    forward_flops: float
    backward_flops: float
    weight_flops: float
    activation_bytes: float
    weight_bytes: float
    forward_comm_ms: float = 0.0
    backward_comm_ms: float = 0.0
    forward_ms: float = 0.0
    backward_ms: float = 0.0
    weight_ms: float = 0.0
    recompute_ms: float = 0.0
    forward_a2a_ms: float = 0.0
    backward_a2a_ms: float = 0.0

    def plus(self, other: Cost, times: int = 1) -> Cost:
        """This cost plus `times` copies of `other`."""
        return Cost(*(getattr(self, f.name) + times * getattr(other, f.name) for f in fields(Cost)))


NO_COST = Cost(0, 0, 0, 0, 0)


@dataclass(frozen=True)
class StageCost:
    """One stage: its layer count (of which `moe_layers` mixture-of-experts), whether it holds the
    embedding or the head, and its total cost."""

    layers: int
    has_embedding: bool
    has_head: bool
    cost: Cost
    moe_layers: int = 0


def layer_cost(model: Transformer, training: Training, hardware: Hardware) -> Cost:
    """One transformer layer on one GPU (see the module notes)."""
    passes = layer_passes(model, training)
    activation = held_bytes(layer_activations(model, training), training)
    # W frees at most what F allocated (the memory model's rule); with full recomputation B makes
    # more than F kept, which this caps (docs/cost-model.md says so).
    weight = min(held_bytes(weight_gradient_inputs(model, training), training), activation)
    forward_comm, backward_comm, forward_a2a, backward_a2a = layer_comm_ms(model, training, hardware, passes)
    return Cost(
        activation_bytes=activation,
        weight_bytes=weight,
        forward_comm_ms=forward_comm,
        backward_comm_ms=backward_comm,
        forward_a2a_ms=forward_a2a,
        backward_a2a_ms=backward_a2a,
        **compute(passes, training, hardware),
    )


def embedding_cost(model: Transformer, training: Training, hardware: Hardware) -> Cost:
    """The embedding lookup on the first stage, memory-bound, timed by the shape model only (the flat
    model counts FLOPs, and a lookup has none): F reads the n looked-up rows of h and writes them, and
    its vocabulary-parallel output is all-reduced over the t GPUs (reduce-scattered with sequence
    parallelism); B adds the output's gradient into those rows of the table's gradient (gathering it
    first with sequence parallelism). The table's gradient is B's: W has nothing left to do."""
    if roofline(hardware) is None or model.vocab == 0:
        return NO_COST
    n, h, bpv = local_tokens(model, training), model.hidden, training.bytes_per_value
    forward = Work(elementwise_bytes=2 * n * h * bpv)
    backward = Work(elementwise_bytes=n * h * (bpv + 2 * training.grad_bytes))
    parallel = training.sequence_parallel
    reduce = Collective.REDUCE_SCATTER if parallel else Collective.ALL_REDUCE
    gather = tensor_parallel_ms(Collective.ALL_GATHER, model, training, hardware) if parallel else 0.0
    return Cost(
        activation_bytes=0.0,
        weight_bytes=0.0,
        forward_comm_ms=tensor_parallel_ms(reduce, model, training, hardware),
        backward_comm_ms=gather,
        **compute(Passes(forward, backward, Work(), Work()), training, hardware),
    )


def head_cost(model: Transformer, training: Training, hardware: Hardware) -> Cost:
    """The output head (h x V matmul, vocabulary split over t) and the loss: its input and the loss's
    softmax over the logits (at `loss_bytes` a value) held until B, its input and the logits' gradient
    until W. Its column-parallel matmul gathers its input in F with sequence parallelism, and reduces
    its input's gradient in B."""
    n, h, vocab, bpv = local_tokens(model, training), model.hidden, model.vocab, training.bytes_per_value
    head_input = Tensor("head input", n * h, bpv, sharded=False)
    held = held_bytes([head_input, Tensor("loss softmax", n * vocab, training.loss_bytes, sharded=True)], training)
    until_w = held_bytes([head_input, Tensor("logits gradient", n * vocab, bpv, sharded=True)], training)
    parallel = training.sequence_parallel
    gather = tensor_parallel_ms(Collective.ALL_GATHER, model, training, hardware) if parallel else 0.0
    reduce = Collective.REDUCE_SCATTER if parallel else Collective.ALL_REDUCE
    return Cost(
        activation_bytes=held,
        weight_bytes=min(until_w, held),  # W frees at most what F allocated (docs/cost-model.md)
        forward_comm_ms=gather,
        backward_comm_ms=tensor_parallel_ms(reduce, model, training, hardware),
        **compute(head_passes(model, training), training, hardware),
    )


@dataclass(frozen=True)
class LayerCosts:
    """A layer's cost by kind, dense or mixture-of-experts (`NO_COST` without experts): `recomputed` as
    the training recomputes it, `kept` keeping its activations. With `recompute_layers` r > 0 a stage's
    first r layers are recomputed and the rest kept (Megatron's block method); with 0 every layer is."""

    model: Transformer
    recompute_layers: int
    recomputed: tuple[Cost, Cost]
    kept: tuple[Cost, Cost]

    def recomputed_count(self, count: int) -> int:
        """How many of a stage's `count` layers are recomputed."""
        return count if self.recompute_layers == 0 else min(self.recompute_layers, count)

    def stage(self, first: int, count: int) -> Cost:
        """The `count` layers of a stage from layer `first` on."""
        recomputed = self.recomputed_count(count)
        total = NO_COST
        for (dense, moe), start, n in (
            (self.recomputed, first, recomputed),
            (self.kept, first + recomputed, count - recomputed),
        ):
            dense_count, moe_count = self.model.layer_kinds(start, n)
            total = total.plus(dense, dense_count).plus(moe, moe_count)
        return total


def without_recomputation(training: Training) -> Training:
    """The training of a layer that `recompute_layers` keeps whole: no recomputation."""
    return replace(training, recompute="none", recompute_layers=0)


def layer_costs(model: Transformer, training: Training, hardware: Hardware, dense: Cost | None = None) -> LayerCosts:
    """The layers' costs; `dense` is one dense layer's cost when known otherwise (measured:
    `solver.instances.calibration`), else the model's."""
    kept = without_recomputation(training)

    def kinds(training: Training) -> tuple[Cost, Cost]:
        return layer_cost(model.dense(), training, hardware), (
            layer_cost(model, training, hardware) if model.moe else NO_COST
        )

    recomputed = kinds(training)
    if dense is not None:
        recomputed = (dense, recomputed[1])
    return LayerCosts(
        model, training.recompute_layers, recomputed, kinds(kept) if training.recompute_layers else recomputed
    )


def stage_costs(
    model: Transformer, training: Training, hardware: Hardware, split: tuple[int, ...], layer: Cost | None = None
) -> list[StageCost]:
    """Per-stage costs (FLOPs, times, memory) for `split` (layers per stage); the embedding on stage 0,
    the head and loss on the last stage; of a mixture-of-experts model, the first `dense_layers` dense;
    with `recompute_layers`, each stage's first layers recomputed (`LayerCosts`). `layer` is one dense
    layer's cost when known otherwise (measured: `solver.instances.calibration`), else the model's."""
    layers = layer_costs(model, training, hardware, layer)
    head = head_cost(model, training, hardware)
    last = len(split) - 1
    costs = []
    for s, count in enumerate(split):
        with_head = s == last and model.vocab > 0
        first = sum(split[:s])
        _, moe_count = model.layer_kinds(first, count)
        cost = (head if with_head else NO_COST).plus(layers.stage(first, count))
        if s == 0:
            cost = cost.plus(embedding_cost(model, training, hardware))
        forward, backward, _ = stage_times(cost)
        if forward <= 0 or backward <= 0:
            what = "the embedding lookup, which only a gpu's shape model times" if s == 0 else "nothing"
            raise InstanceError(
                f"stage {s} has 0 layers and only {what}, so it does no work; give it at least one layer"
            )
        costs.append(StageCost(count, s == 0, with_head, cost, moe_count))
    return costs


def stage_times(cost: Cost) -> tuple[float, float, float]:
    """F, B and W of a stage in ms: its compute, plus its exposed communication in F and B."""
    return (
        cost.forward_ms + cost.forward_comm_ms,
        cost.backward_ms + cost.backward_comm_ms,
        cost.weight_ms,
    )


def significant(value: float) -> float:
    """Times keep 6 significant digits: the model is far less precise, and the files stay readable."""
    return float(f"{value:.6g}")
