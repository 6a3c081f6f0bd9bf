"""The measured profile: a tiny GPT-like model on the CPU, profiled stage by stage into an instance, and the CLI."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import pytest

from pipesat.commands.frame import EXIT_BAD_INPUT
from pipesat.models import Instance, InstanceError, load_instance
from pipesat.solver.evaluate.validator import validate
from pipesat.solver.heuristics import run_heuristic
from pipesat.solver.torch import profile as profile_module
from pipesat.solver.torch.profile import INSTALL_HINT, profile_instance
from pipesat.solver.torch.profile_spec import ProfileSpec
from tests.cli_helpers import cli_error, run_cli
from tests.solver.torch.profile_specs import TINY

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.usefixtures("one_thread")


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
    assert profiled.metadata["dtype"] == "fp32"  # the default on the CPU
    assert profiled.metadata["model"]["attention"] == "torch scaled_dot_product_attention, causal"
    assert (profiled.metadata["model"]["mlp"], profiled.metadata["model"]["mlp_width"]) == ("GELU", 256)


def test_bf16_keeps_half_the_activations_of_fp32(profiled: Instance) -> None:
    half = profile_instance(dataclasses.replace(TINY, dtype="bf16", repeats=1))
    assert half.metadata["dtype"] == "bf16"
    assert all(value > 0 for value in (*half.forward_times, *half.backward_times, *half.weight_times))
    # Every saved activation is bf16 but the few statistics torch keeps in fp32 (norms, logsumexp).
    for bf16, fp32 in zip(half.activation_memory, profiled.activation_memory, strict=True):
        assert 0.45 < bf16 / fp32 < 0.55


def test_default_dtype_is_bf16_on_cuda_and_fp32_on_cpu() -> None:
    assert ProfileSpec(devices=1, microbatches=1, device="cuda").dtype_name == "bf16"
    assert ProfileSpec(devices=1, microbatches=1).dtype_name == "fp32"
    assert ProfileSpec(devices=1, microbatches=1, device="cuda", dtype="fp16").dtype_name == "fp16"
    with pytest.raises(InstanceError, match="dtype must be one of bf16, fp16, fp32, got 'fp8'"):
        profile_instance(dataclasses.replace(TINY, dtype="fp8"))


def test_profiled_instance_runs_a_heuristic_and_validates(profiled: Instance) -> None:
    for name in ("1f1b", "zb-h1"):
        schedule = run_heuristic(name, profiled)
        assert validate(schedule) == []


def test_profiled_instance_solves_briefly(profiled: Instance) -> None:
    solve_module = pytest.importorskip("pipesat.solver.solve")
    result = solve_module.solve(profiled, time_limit=2, workers=1)
    assert result.schedule is not None
    assert validate(result.schedule) == []
    # The solver starts from the heuristics, so it is never worse than the best of them.
    assert result.starting_point is not None and result.value <= result.starting_point.value


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
    architecture = ["--kv-heads", "1", "--ffn-hidden", "48", "--dtype", "bf16"]
    options = ["--seq-len", "16", "--repeats", "1", "--placement", "vshape", "--save-instance", str(path)]
    result = run_cli(*PROFILE_ARGS, *architecture, *options)
    assert result.exit_code == 0, result.output
    assert "measured on cpu" in result.stdout and f"wrote {path}" in result.stdout
    assert "heads 2 (1 key/value), SwiGLU MLP 48, sequence 16, microbatch 1, vocabulary 256, bf16;" in result.stdout
    instance = load_instance(path)
    assert instance.num_stages == 4 and instance.placement_name() == "vshape"
    model = instance.metadata["model"]
    assert (instance.metadata["dtype"], model["kv_heads"], model["ffn_hidden"], model["mlp"]) == (
        "bf16",
        1,
        48,
        "SwiGLU",
    )
    assert path.read_text().startswith("# measured by: pipesat profile")
    assert validate(run_heuristic("zb-v", instance)) == []


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        (["--layers", "3", "--seq-len", "16"], "3 layers do not split evenly over 2 x 2 = 4 stages"),
        (["--heads", "3", "--seq-len", "16"], "hidden 32 is not divisible by heads 3"),
        (["--seq-len", "0"], "--seq-len must be at least 1, got 0"),
        (["--seq-len", "16", "--repeats", "0"], "0 is not in the range 1<=x<=1000"),
        (["--seq-len", "16", "-p", "0"], "devices must be at least 1, got 0"),
        (["--seq-len", "16", "--chunks", "0"], "chunks must be at least 1, got 0"),
        (["--seq-len", "16", "--kv-heads", "3"], "heads 2 is not divisible by kv_heads 3"),
        (["--seq-len", "16", "--ffn-hidden", "-1"], "--ffn-hidden must be at least 0, got -1"),
        (
            ["--seq-len", "16", "--dtype", "fp8"],
            "Invalid value for '--dtype': 'fp8' is not one of 'bf16', 'fp16', 'fp32'",
        ),
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


@pytest.mark.parametrize(
    "error",
    [
        torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB. GPU 0 has a total capacity of 79 GiB"),
        RuntimeError("CUDA error: out of memory\nCUDA kernel errors might be asynchronously reported"),
        RuntimeError("[enforce fail at alloc_cpu.cpp:117] DefaultCPUAllocator: can't allocate memory: you tried"),
    ],
)
def test_running_out_of_memory_is_one_line_naming_the_stage_and_what_to_lower(
    monkeypatch: pytest.MonkeyPatch, error: RuntimeError
) -> None:
    calls = []

    def stage_that_runs_out(*args):
        calls.append(args)
        if len(calls) == 2:  # stage 1
            raise error
        return real_stage(*args)

    real_stage = profile_module.profile_stage
    monkeypatch.setattr(profile_module, "profile_stage", stage_that_runs_out)
    line = cli_error(run_cli(*PROFILE_ARGS, "--seq-len", "16", "--repeats", "1"), EXIT_BAD_INPUT)
    assert line == (
        "error: stage 1 (1 layer, fp32) ran out of memory on cpu; lower --seq-len, --microbatch-size or --hidden, "
        "or put fewer layers on each stage (fewer --layers, or more -p or --chunks)"
    )


def test_a_dtype_torch_cannot_run_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    def unsupported(*args):
        raise RuntimeError("\"addmm_impl_cpu_\" not implemented for 'Half'")

    monkeypatch.setattr(profile_module, "profile_stage", unsupported)
    line = cli_error(run_cli(*PROFILE_ARGS, "--seq-len", "16", "--dtype", "fp16"), EXIT_BAD_INPUT)
    assert line.startswith(f"error: torch {torch.__version__} cannot run the model in fp16 on cpu (")
    assert line.endswith("not implemented for 'Half'); choose another --dtype")


def test_other_runtime_errors_are_not_hidden(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args):
        raise RuntimeError("mat1 and mat2 shapes cannot be multiplied")

    monkeypatch.setattr(profile_module, "profile_stage", broken)
    with pytest.raises(RuntimeError, match="shapes cannot be multiplied"):
        profile_instance(TINY)
