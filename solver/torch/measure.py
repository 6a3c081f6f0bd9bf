"""Measuring one stage: F, B, W, the whole backward and B's recomputation timed in rounds, and the memory
held from F to B and from B to W.

The memory held from F to B (M_B) is the size of the tensors autograd saves during F, found with
`torch.autograd.graph.saved_tensors_hooks`; the memory held from B to W (M_W) is the size of the
tensors the stored closures keep (and, on the first stage, the input gradient the embedding's weight
gradient needs). Both count each storage once and leave out parameters. M_W can come out slightly
above M_B (the output gradients it keeps are new tensors); the instance then caps weight_memory at
activation_memory, since W can free no more than F allocated, and keeps the measured value in metadata.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pipesat.solver.torch.profile_spec import DTYPES, ProfileSpec
from pipesat.solver.torch.stage_model import Recomputation, WeightGradStore, model_classes, synchronize

# A round of samples is stable when no median moved more than this since the previous round.
STABLE_CHANGE = 0.05
MAX_ROUNDS = 4
WARMUP = 2


@dataclass(frozen=True)
class StageProfile:
    """Medians in ms of F, B, W, the whole (unsplit) backward and the part of B that recomputes; M_B
    and M_W in bytes."""

    forward: float
    backward: float
    weight: float
    full_backward: float
    activation_bytes: int
    weight_bytes: int
    rounds: int
    stable: bool
    recompute: float = 0.0


def profile_stage(torch: Any, spec: ProfileSpec, device: Any, layers: int, first: bool, last: bool) -> StageProfile:
    """Time F, B, W, the whole backward and B's recomputation of one stage (`layers` blocks, with the
    embedding when `first`, the head and loss when `last`), in rounds until their medians are stable."""
    runner = _StageRunner(torch, spec, device, layers, first, last)
    for _ in range(WARMUP):
        runner.sample()
    samples: list[tuple[float, ...]] = []
    medians: tuple[float, ...] = ()
    rounds, stable = 0, False
    while rounds < MAX_ROUNDS and not stable:
        rounds += 1
        samples += [runner.sample() for _ in range(spec.repeats)]
        latest = tuple(statistics.median(column) for column in zip(*samples, strict=True))
        stable = bool(medians) and all(
            abs(new - old) <= STABLE_CHANGE * old for new, old in zip(latest, medians, strict=True)
        )
        medians = latest
    forward, backward, weight, recompute, full_backward = (measured_value(value) for value in medians)
    activation_bytes, weight_bytes = runner.memory
    return StageProfile(
        forward, backward, weight, full_backward, activation_bytes, weight_bytes, rounds, stable, recompute
    )


class _StageRunner:
    """One stage with fixed inputs; `sample` runs F, B, W, then F and the whole backward, timing each
    (and the recomputation within B)."""

    def __init__(self, torch: Any, spec: ProfileSpec, device: Any, layers: int, first: bool, last: bool) -> None:
        torch.manual_seed(spec.seed)
        self.torch, self.first = torch, first
        self.store = WeightGradStore()
        self.recomputation = Recomputation(torch, device)
        stage_class, deferred_linear = model_classes(torch)
        self.dtype = getattr(torch, DTYPES[spec.dtype_name])
        stage = stage_class(self.store, self.recomputation, spec, layers, first, last)
        self.stage = stage.to(device=device, dtype=self.dtype)
        # Parameters whose gradients come through the deferred layers (the embedding's come from its own backward).
        self.deferred_params = [
            p for module in self.stage.modules() if isinstance(module, deferred_linear) for p in module.parameters()
        ]
        self.shape = (spec.microbatch_size, spec.seq_len, spec.hidden)
        self.device = device
        self.tokens = torch.randint(spec.vocab, self.shape[:2], device=device)
        self.targets = torch.randint(spec.vocab, self.shape[:2], device=device) if last else None
        self.grad_output = None if last else torch.randn(self.shape, device=device, dtype=self.dtype)
        self.memory = (0, 0)

    def sample(self) -> tuple[float, float, float, float, float]:
        """Milliseconds of F, B, W, B's recomputation and the whole backward; also records M_B and M_W
        in `memory`."""
        stage_input = self.torch.randn(self.shape, device=self.device, dtype=self.dtype, requires_grad=True)
        return (*self.split_pass(stage_input), self.full_pass(stage_input))

    def split_pass(self, stage_input: Any) -> tuple[float, float, float, float]:
        """F, then B (input gradient only, weight work deferred; the recomputation in it timed apart),
        then W; leaves the weights' gradients in `.grad`."""
        torch, store, recomputation = self.torch, self.store, self.recomputation
        self.stage.zero_grad(set_to_none=True)
        store.deferring = True
        with _SavedTensors(torch, self.stage.parameters()) as saved:
            forward_ms, (embedded, x, output) = self._timed(self._forward, stage_input)
        recomputation.timing, recomputation.ms = True, 0.0
        try:
            backward_ms, (grad_x,) = self._timed(torch.autograd.grad, output, [x], self.grad_output)
        finally:
            recomputation.timing = False
        held = [*store.held_tensors(), grad_x] if self.first else store.held_tensors()
        self.memory = (saved.bytes(), _storage_bytes(held, ()))
        weight_ms, _ = self._timed(self._weight, embedded, grad_x)
        return forward_ms, backward_ms, weight_ms, recomputation.ms

    def full_pass(self, stage_input: Any) -> float:
        """F (untimed), then the whole backward in one autograd call."""
        self.store.deferring = False
        full_ms, _ = self._timed(self._full_backward, *self._forward(stage_input))
        return full_ms

    def _forward(self, stage_input: Any) -> tuple[Any, Any, Any]:
        """(embedding output or None, the tensor B differentiates for, the stage output or loss)."""
        if self.first:
            embedded = self.stage.embed(self.tokens)
            x = embedded.detach().requires_grad_()
            return embedded, x, self.stage(x, self.targets)
        return None, stage_input, self.stage(stage_input, self.targets)

    def _weight(self, embedded: Any, grad_x: Any) -> None:
        self.store.flush()
        if self.first:
            self.torch.autograd.backward(embedded, grad_x)

    def _full_backward(self, embedded: Any, x: Any, output: Any) -> None:
        grads = self.torch.autograd.grad(output, [x, *self.deferred_params], self.grad_output)
        if self.first:
            self.torch.autograd.backward(embedded, grads[0])

    def _timed(self, work: Callable[..., Any], *args: Any) -> tuple[float, Any]:
        synchronize(self.torch, self.device)
        start = time.perf_counter()
        result = work(*args)
        synchronize(self.torch, self.device)
        return (time.perf_counter() - start) * 1e3, result


class _SavedTensors:
    """Records the tensors autograd saves for the backward while active (parameters left out)."""

    def __init__(self, torch: Any, parameters: Any) -> None:
        self.hooks = torch.autograd.graph.saved_tensors_hooks(self._pack, lambda tensor: tensor)
        self.parameters = list(parameters)
        self.tensors: list[Any] = []

    def _pack(self, tensor: Any) -> Any:
        self.tensors.append(tensor)
        return tensor

    def bytes(self) -> int:
        return _storage_bytes(self.tensors, self.parameters)

    def __enter__(self) -> _SavedTensors:
        self.hooks.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.hooks.__exit__(*exc)


def _storage_bytes(tensors: Any, excluded: Any) -> int:
    """Bytes of the distinct storages behind `tensors`, leaving out those of `excluded`."""
    skip = {t.untyped_storage().data_ptr() for t in excluded}
    sizes = {}
    for tensor in tensors:
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in skip:
            sizes[storage.data_ptr()] = storage.nbytes()
    return sum(sizes.values())


def measured_value(value: float) -> float:
    """Measured times keep 4 significant digits; the noise is far larger."""
    return float(f"{value:.4g}")
