"""The measured profile: a tiny GPT-like model on the CPU, split backward, saved-tensor memory, CLI."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from cli_options import EXIT_BAD_INPUT
from models import Instance, InstanceError, load_instance
from solver.evaluate.validator import validate
from solver.heuristics import run_heuristic
from solver.torch.profile import INSTALL_HINT, ProfileSpec, profile_instance
from tests.cli_helpers import run_cli

torch = pytest.importorskip("torch")
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402
from torch.utils.flop_counter import flop_registry  # noqa: E402

TINY = ProfileSpec(devices=2, microbatches=4, layers=2, hidden=64, heads=4, seq_len=32, repeats=3)


class _CountedFlops(TorchDispatchMode):
    """Counts the FLOPs of every operation torch runs (torch's own FLOP formulas, by operator)."""

    def __init__(self) -> None:
        super().__init__()
        self.total = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if func._overloadpacket in flop_registry:
            self.total += flop_registry[func._overloadpacket](*args, **kwargs, out_val=out)
        return out


@pytest.fixture(scope="module", autouse=True)
def one_thread() -> Iterator[None]:
    # One torch thread: the machine's two cores are shared, and threads fighting for them make the
    # medians swing; one thread keeps B + W against the whole backward within a few percent.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def profiled(one_thread: None) -> Instance:
    torch.manual_seed(0)
    return profile_instance(TINY, name="tiny")


def test_times_and_memory_are_positive(profiled: Instance) -> None:
    for values in (profiled.forward_times, profiled.backward_times, profiled.weight_times):
        assert len(values) == 2 and all(value > 0 for value in values)
    assert all(a > 0 for a in profiled.activation_memory)
    assert all(0 < w <= a for w, a in zip(profiled.weight_memory, profiled.activation_memory, strict=True))
    assert profiled.metadata["device"].startswith("cpu")
    assert profiled.metadata["model"]["layers_per_stage"] == [1, 1]


@pytest.mark.parametrize(("first", "last"), [(True, False), (False, True)])
def test_backward_plus_weight_does_the_work_of_the_whole_backward(first: bool, last: bool) -> None:
    # Counted, not timed (a wall-clock ratio on a shared machine is noise): F + B + W runs exactly the
    # FLOPs of F + the whole backward, so neither B nor W is missing or done twice.
    from solver.torch.profile import _StageRunner

    runner = _StageRunner(torch, TINY, torch.device("cpu"), layers=1, first=first, last=last)
    stage_input = torch.randn(runner.shape, requires_grad=True)
    with _CountedFlops() as split:
        runner.split_pass(stage_input)
    with _CountedFlops() as whole:
        runner.full_pass(stage_input)
    assert split.total == whole.total > 0


def test_profiled_instance_runs_a_heuristic_and_validates(profiled: Instance) -> None:
    for name in ("1f1b", "zb-h1"):
        schedule = run_heuristic(name, profiled)
        assert validate(schedule) == []


def test_profiled_instance_solves_briefly(profiled: Instance) -> None:
    solve_module = pytest.importorskip("solver.solve")
    result = solve_module.solve(profiled, time_limit=2, workers=1)
    assert result.schedule is not None
    assert validate(result.schedule) == []
    # The solver starts from the heuristics, so it is never worse than the best of them.
    assert result.starting_point is not None and result.value <= result.starting_point.value


def test_split_backward_gives_the_same_gradients_as_one_backward() -> None:
    # One stage holding everything: embedding, a block, head and loss.
    from solver.torch.profile import _StageRunner

    spec = ProfileSpec(devices=1, microbatches=1, layers=1, hidden=32, heads=2, seq_len=8, vocab=50)
    runner = _StageRunner(torch, spec, torch.device("cpu"), layers=1, first=True, last=True)
    runner.split_pass(None)
    split = {name: param.grad.clone() for name, param in runner.stage.named_parameters()}
    runner.stage.zero_grad(set_to_none=True)
    runner.store.deferring = False
    loss = runner.stage(runner.stage.embed(runner.tokens), runner.targets)
    loss.backward()
    for name, param in runner.stage.named_parameters():
        assert torch.allclose(split[name], param.grad, atol=1e-6), name


def test_activation_memory_grows_with_the_microbatch() -> None:
    # Saved tensors scale with b·s; the model's weights do not count.
    small = ProfileSpec(devices=1, microbatches=1, layers=1, hidden=32, heads=2, seq_len=16, repeats=1)
    larger = ProfileSpec(
        devices=1, microbatches=1, layers=1, hidden=32, heads=2, seq_len=16, repeats=1, microbatch_size=2
    )
    ratio = profile_instance(larger).activation_memory[0] / profile_instance(small).activation_memory[0]
    assert ratio == pytest.approx(2, rel=0.05)


PROFILE_ARGS = ["profile", "-p", "2", "--chunks", "2", "-m", "4", "--layers", "4", "--hidden", "32", "--heads", "2"]


def test_profile_command_writes_an_instance_that_loads(tmp_path: Path) -> None:
    path = tmp_path / "measured.yaml"
    result = run_cli(*PROFILE_ARGS, "--seq-len", "16", "--repeats", "1", "--placement", "vshape", "-o", str(path))
    assert result.exit_code == 0, result.output
    assert "measured on cpu" in result.stdout and f"wrote {path}" in result.stdout
    instance = load_instance(path)
    assert instance.num_stages == 4 and instance.placement_name() == "vshape"
    assert path.read_text().startswith("# measured by: pipesat profile")
    assert validate(run_heuristic("zb-v", instance)) == []


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        (["--layers", "3", "--seq-len", "16"], "3 layers do not split evenly over 2 x 2 = 4 stages"),
        (["--heads", "3", "--seq-len", "16"], "hidden 32 is not divisible by heads 3"),
        (["--seq-len", "0"], "seq_len must be at least 1, got 0"),
        (["--seq-len", "16", "--repeats", "0"], "repeats must be at least 1, got 0"),
        (["--seq-len", "16", "-p", "0"], "devices must be at least 1, got 0"),
        (["--seq-len", "16", "--chunks", "0"], "chunks must be at least 1, got 0"),
    ],
)
def test_profile_bad_options_exit_2(changes: list[str], message: str) -> None:
    result = run_cli(*PROFILE_ARGS, *changes)
    assert result.exit_code == EXIT_BAD_INPUT, result.output
    assert message in result.stderr and len(result.stderr.splitlines()) == 1


def test_profile_on_cuda_without_cuda_says_so() -> None:
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    result = run_cli(*PROFILE_ARGS, "--seq-len", "16", "--device", "cuda")
    assert result.exit_code == EXIT_BAD_INPUT
    assert "torch sees no CUDA device; use --device cpu" in result.stderr


def test_profile_without_torch_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)  # makes `import torch` raise ImportError
    with pytest.raises(InstanceError, match="pip install -e"):
        profile_instance(TINY)
    result = run_cli(*PROFILE_ARGS, "--seq-len", "16")
    assert result.exit_code == EXIT_BAD_INPUT
    assert result.stderr.strip() == f"error: {INSTALL_HINT}"
