"""The GPU catalogue, and a `gpu` filling the hardware keys not given (from-model's `Hardware` and the
plan's `Cluster`), while a description without one keeps today's flat model."""

from __future__ import annotations

import pytest

from pipesat.models import InputError, InstanceError
from pipesat.models.units import GIB
from pipesat.solver.instances.description import Hardware, Pipeline, Training, Transformer
from pipesat.solver.instances.explain import command_line, explain
from pipesat.solver.instances.from_model import Description, derive
from pipesat.solver.instances.gpus import CATALOGUE, GPU_NAMES, memory_choice
from pipesat.solver.plan.spec import Cluster, spec_from_dict


def test_the_catalogue_holds_the_issues_gpus_with_consistent_figures() -> None:
    assert GPU_NAMES == ("A100-40GB", "A100-80GB", "H100-SXM", "H100-PCIe", "H200", "H800", "B200")
    for gpu in CATALOGUE.values():
        assert 0 < gpu.gemm_efficiency <= 1 and 0 < gpu.attention_efficiency <= gpu.gemm_efficiency
        assert gpu.network < gpu.nvlink and gpu.nvlink_latency > 0
        # A GPU's memory bandwidth over its peak: the FLOPs a byte a GEMM needs to be compute-bound.
        assert 100 < gpu.bf16_tflops * 1e3 / gpu.memory_bandwidth < 400
    assert CATALOGUE["H100-SXM"].memory == 80 * GIB and CATALOGUE["H100-SXM"].sms == 132
    assert CATALOGUE["H200"].memory_bandwidth > CATALOGUE["H100-SXM"].memory_bandwidth
    # The H800: an H100-SXM with NVLink cut to 400 GB/s both ways, 200 one way.
    h800, h100 = CATALOGUE["H800"], CATALOGUE["H100-SXM"]
    assert (h800.bf16_tflops, h800.memory, h800.nvlink, h800.network) == (h100.bf16_tflops, h100.memory, 200, 50)


def test_a_gpu_fills_the_hardware_keys_not_given_and_turns_on_the_shape_model() -> None:
    hardware = Hardware(gpu="H100-SXM")
    assert (hardware.tflops, hardware.gpu_memory, hardware.memory_bandwidth) == (989, 80 * GIB, 3350)
    assert (hardware.bandwidth, hardware.tp_bandwidth, hardware.tp_latency) == (50, 450, 2)
    assert (hardware.cp_bandwidth, hardware.cp_latency) == (450, 2)  # the context-parallel link: as the TP one
    assert hardware.dp_bandwidth == 50  # the data-parallel replicas across nodes: the network
    assert (hardware.ep_bandwidth, hardware.ep_latency) == (50, 10)  # expert parallelism: as the data-parallel link
    assert hardware.efficiency is None  # by shape
    given = Hardware(gpu="A100-80GB", tflops=280, efficiency=0.4, tp_bandwidth=200)
    assert (given.tflops, given.efficiency, given.tp_bandwidth, given.gpu_memory) == (280, 0.4, 200, 80 * GIB)


def test_without_a_gpu_the_hardware_is_todays_flat_model() -> None:
    hardware = Hardware(tflops=312)
    assert (hardware.efficiency, hardware.bandwidth, hardware.latency) == (0.5, 50, 10)
    assert (hardware.tp_bandwidth, hardware.cp_bandwidth, hardware.dp_bandwidth) == (0, 0, 0)  # not timed
    assert hardware.gpu_memory == 0  # no budgets
    assert hardware.tp_latency == hardware.latency


def test_a_missing_peak_or_an_unknown_gpu_is_one_line() -> None:
    with pytest.raises(InstanceError, match=r"^tflops is missing; give it, or gpu: one of A100-40GB, .*, B200$"):
        Hardware()
    with pytest.raises(InstanceError, match=r"^gpu must be one of A100-40GB, .*, got 'H100'$"):
        Hardware(gpu="H100")


def test_a_cluster_gpu_fills_its_memory_peak_and_links() -> None:
    cluster = Cluster(gpus=16, gpu="A100-80GB")
    assert (cluster.gpu_memory, cluster.tflops, cluster.memory_bandwidth) == (80 * GIB, 312, 2039)
    assert (cluster.bandwidth, cluster.node_bandwidth, cluster.node_latency) == (25, 300, 2)
    plain = Cluster(gpus=16, gpu_memory=40 * GIB, tflops=312, bandwidth=20)
    assert (plain.efficiency, plain.node_bandwidth, plain.node_latency, plain.memory_bandwidth) == (0.5, 20, 10, 1555)


def test_a_spec_names_the_cluster_key_neither_given_nor_filled() -> None:
    sections = {"model": {"layers": 4, "hidden": 64, "heads": 4, "seq_len": 32}, "training": {"global_batch": 4}}
    with pytest.raises(InputError, match=r"^spec\.yaml: cluster\.gpu_memory is missing; give it, or gpu: one of"):
        spec_from_dict({**sections, "cluster": {"gpus": 2, "tflops": 100}}, where="spec.yaml: ")
    spec = spec_from_dict({**sections, "cluster": {"gpus": 2, "gpu": "H100-SXM"}})
    assert spec.cluster.gpu_memory == 80 * GIB and spec.cluster.efficiency is None


def test_a_gpu_description_explains_its_shapes_and_makes_its_command_line() -> None:
    model = Transformer(8, 1024, 16, 2048, vocab=32000)
    hardware = Hardware(gpu="A100-80GB", cp_bandwidth=25)
    description = Description(model, Training(tensor_parallel=2, context_parallel=2), hardware, Pipeline(2, 4))
    line = command_line(description)
    assert "--context-parallel 2" in line and line.endswith("--gpu A100-80GB --cp-bandwidth 25")
    assert "--tflops" not in line and "--gpu-memory" not in line  # the gpu gives them
    text = "\n".join(explain(description, derive(description)))
    assert "timed by shape on A100-80GB" in text and "F = (L + S)/(t·cp)" in text
    assert "QKV projection 1024 x 1536 x 1024" in text  # 2048 tokens / cp 2, (h + 2g·d) / t 2
    assert "context parallelism: ring attention passes keys and values around 2 GPUs" in text
    assert "device: one A100-80GB, its work timed by shape" in text


def test_a_gpu_memory_that_is_not_the_catalogues_says_which_is_used() -> None:
    """`gpu_memory: 80GB` (10^9 bytes a GB) on an H100 is 74.5 GiB, not the catalogue's 80 GiB: said, not silent."""
    h100 = CATALOGUE["H100-SXM"].memory
    assert h100 == 80 * GIB
    said = memory_choice("H100-SXM", 80e9)
    assert said == "74.5058 GiB (80 GB: 10^9 bytes a GB, 2^30 a GiB) is used, not the H100-SXM's 80 GiB (85.9 GB)"
    assert memory_choice("H100-SXM", h100) is None and memory_choice(None, 80e9) is None


def test_each_gpu_has_its_pcie_x16_host_link() -> None:
    """PCIe 4.0 x16 (32 GB/s a direction) on A100, 5.0 x16 (64) on the Hopper GPUs and B200's hosts."""
    assert {name: gpu.host_link for name, gpu in CATALOGUE.items()} == {
        "A100-40GB": 32.0,
        "A100-80GB": 32.0,
        "H100-SXM": 64.0,
        "H100-PCIe": 64.0,
        "H200": 64.0,
        "H800": 64.0,
        "B200": 64.0,
    }
