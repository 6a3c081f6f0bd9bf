"""The GPUs a spec can name (`gpu: H100-SXM`): what each does at peak, and the links of its usual node.

Peaks are the vendors' dense (no sparsity) tensor-core figures; memory is what the device reports;
`nvlink` is one GPU's share of the links within a node, one direction (NVLink 3's 600 GB/s both ways
on A100: 300; NVLink 4's 900 on H100: 450), and `network` one GPU's share of the network between
nodes, its usual node's: DGX A100's 8 x 200 Gb/s HDR compute NICs for 8 GPUs (25 GB/s a GPU), DGX
H100's 8 x 400 Gb/s NDR (50), and the same one NIC a GPU for H200 and B200 (a spec's
`nics_per_node` defaults to one a GPU; `collectives.group_link` turns a group's GPUs a node into its
share of the node's NICs); `nvlink_latency` is a ring step's latency within a node (NCCL's own
tuning table: 1.9 µs LL128 and 3.4 µs Simple a ring step on NVLink, 2.5 and 5.7 on PCIe; the
megabyte messages of tensor parallelism sit between). docs/reference.md names the sources.

`gemm_efficiency` and `attention_efficiency` are the one setting per GPU type the shape-dependent
model takes (`solver.instances.roofline`): the fraction of the peak that a large, well-shaped bf16
GEMM and a flash-attention kernel reach on it. They are fitted once per GPU type against the
published runs of `benchmarks/data/published_runs.yaml` (benchmarks/bench_cost_model.py prints the
fit), never per run.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from pipesat.models.units import GIB, memory_text

GB = 1e9


@dataclass(frozen=True)
class GPU:
    """One GPU type: peak bf16 TFLOP/s, memory (bytes), memory bandwidth (GB/s), streaming
    multiprocessors, the link within a node and the network, one GPU's share (GB/s), the link within
    a node's latency a ring step (µs), and the fractions of peak its GEMMs and flash attention reach."""

    name: str
    bf16_tflops: float
    memory: float
    memory_bandwidth: float
    sms: int
    nvlink: float
    network: float
    nvlink_latency: float
    gemm_efficiency: float
    attention_efficiency: float


_A100 = GPU(
    "A100-40GB",
    bf16_tflops=312.0,
    memory=40 * GIB,
    memory_bandwidth=1555.0,
    sms=108,
    nvlink=300.0,
    network=25.0,
    nvlink_latency=2.0,
    gemm_efficiency=0.70,  # fitted by benchmarks/bench_cost_model.py's fit (29 A100 runs)
    attention_efficiency=0.30,
)
_H100 = GPU(
    "H100-SXM",
    bf16_tflops=989.0,
    memory=80 * GIB,
    memory_bandwidth=3350.0,
    sms=132,
    nvlink=450.0,
    network=50.0,
    nvlink_latency=2.0,
    gemm_efficiency=0.60,  # fitted by benchmarks/bench_cost_model.py's fit (5 H100 runs)
    attention_efficiency=0.40,
)

CATALOGUE: dict[str, GPU] = {
    gpu.name: gpu
    for gpu in (
        _A100,
        replace(_A100, name="A100-80GB", memory=80 * GIB, memory_bandwidth=2039.0),
        _H100,
        replace(
            _H100,
            name="H100-PCIe",
            bf16_tflops=756.0,
            memory_bandwidth=2000.0,
            sms=114,
            nvlink=64.0,  # PCIe Gen5 x16 between the GPUs of a node (an NVLink bridge joins pairs only)
            nvlink_latency=4.0,
        ),
        replace(_H100, name="H200", memory=141 * GB, memory_bandwidth=4800.0),
        # H800: the H100-SXM's compute and memory with its NVLink cut to 400 GB/s both directions
        # (NVIDIA's H800 product brief; 200 one direction, the catalogue's convention); nodes of 8
        # with 8 x 400 Gb/s InfiniBand, one NIC a GPU (DeepSeek-V3 Technical Report, Section 3.1).
        replace(_H100, name="H800", nvlink=200.0),
        # B200's fractions are not fitted (no published B200 run is in the benchmark): Hopper's.
        replace(
            _H100,
            name="B200",
            bf16_tflops=2250.0,
            memory=180 * GB,
            memory_bandwidth=8000.0,
            sms=148,
            nvlink=900.0,
        ),
    )
}
GPU_NAMES = tuple(CATALOGUE)


def memory_choice(gpu: str | None, gpu_memory: float) -> str | None:
    """What a given GPU memory (bytes) replaces, when it is not the named GPU's own: `74.5 GiB (80 GB:
    10^9 bytes a GB) is used, not the H100-SXM's 80 GiB`, said because `80GB` and `80GiB` read alike;
    None without a GPU, or when the amount is the catalogue's."""
    if gpu is None or gpu not in CATALOGUE or gpu_memory <= 0 or gpu_memory == CATALOGUE[gpu].memory:
        return None
    own = CATALOGUE[gpu].memory
    return (
        f"{memory_text(gpu_memory, 'B')} ({gpu_memory / GB:.4g} GB: 10^9 bytes a GB, 2^30 a GiB) is used, "
        f"not the {gpu}'s {memory_text(own, 'B')} ({own / GB:.4g} GB)"
    )
