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

`host_link` is the GPU's link to host memory, one direction (GB/s), over which activations are
offloaded (docs/offload.md): the nominal rate of a PCIe x16 link, PCIe 4.0's 32 on A100 and PCIe
5.0's 64 on the Hopper GPUs. B200's own host interface is PCIe 6.0 x16 (128 a direction), but the
hosts of its usual node, DGX B200's Intel Xeon Platinum 8570s, run PCIe 5.0, so its link runs at 64.
Measured copies reach less: NVIDIA's nvbandwidth measured 25.1 GB/s host to device on an
A100-SXM4-40GB (github.com/NVIDIA/nvbandwidth issue 42), 35.2 host to device and 52.8 device to host
(SM copies) on an H100 node (issue 24), about 57 host to device (copy engines) on an H100 VM (issue
6); a spec's `cluster.host_link_bandwidth` gives a measured one. GH200 (its NVLink-C2C link, 450 a
direction, measured 346 host to device in issue 23) has no row: its node's network (a DGX GH200
joins its GPUs by NVLink switches, its CPUs by InfiniBand) and which memory (96 GB HBM3 at 4 TB/s,
or 144 GB HBM3e at 4.9, by version) have only third-party pages here, and no GH200 run fits its
GEMM and attention fractions. `instance from-model` gives an instance the link only when asked
(`Hardware.host_link`).

`gemm_efficiency` and `attention_efficiency` are the one setting per GPU type the shape-dependent
model takes (`solver.instances.roofline`): the fraction of the peak that a large, well-shaped bf16
GEMM and a flash-attention kernel reach on it. They are fitted once per GPU type against the
published runs of `benchmarks/data/published_runs.yaml` (benchmarks/bench_cost_model.py prints the
fit), never per run.
"""

from __future__ import annotations

from dataclasses import dataclass

from pipesat.models.units import GIB, memory_text

GB = 1e9


@dataclass(frozen=True)
class GPU:
    """One GPU type: peak bf16 TFLOP/s, memory (bytes), memory bandwidth (GB/s), streaming
    multiprocessors, the link within a node and the network, one GPU's share (GB/s), the link within
    a node's latency a ring step (µs), the fractions of peak its GEMMs and flash attention reach, and
    its host link, one direction (GB/s)."""

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
    host_link: float


# One row a GPU, in the order of `GPU`'s fields: name, bf16 TFLOP/s, memory, memory GB/s, SMs, NVLink
# GB/s, network GB/s, NVLink latency µs, GEMM and attention fractions of peak, host link GB/s. The fractions are
# fitted by benchmarks/bench_cost_model.py's fit: the A100s' on 29 A100 runs, the Hopper GPUs' on 5
# H100 runs; B200's are not fitted (no published B200 run is in the benchmark): Hopper's.
_TABLE = (
    ("A100-40GB", 312.0, 40 * GIB, 1555.0, 108, 300.0, 25.0, 2.0, 0.70, 0.30, 32.0),
    ("A100-80GB", 312.0, 80 * GIB, 2039.0, 108, 300.0, 25.0, 2.0, 0.70, 0.30, 32.0),
    ("H100-SXM", 989.0, 80 * GIB, 3350.0, 132, 450.0, 50.0, 2.0, 0.60, 0.40, 64.0),
    # Its NVLink: PCIe Gen5 x16 between the GPUs of a node (an NVLink bridge joins pairs only).
    ("H100-PCIe", 756.0, 80 * GIB, 2000.0, 114, 64.0, 50.0, 4.0, 0.60, 0.40, 64.0),
    ("H200", 989.0, 141 * GB, 4800.0, 132, 450.0, 50.0, 2.0, 0.60, 0.40, 64.0),
    # H800: the H100-SXM's compute and memory with its NVLink cut to 400 GB/s both directions
    # (NVIDIA's H800 product brief; 200 one direction, the catalogue's convention); nodes of 8
    # with 8 x 400 Gb/s InfiniBand, one NIC a GPU (DeepSeek-V3 Technical Report, Section 3.1).
    ("H800", 989.0, 80 * GIB, 3350.0, 132, 200.0, 50.0, 2.0, 0.60, 0.40, 64.0),
    ("B200", 2250.0, 180 * GB, 8000.0, 148, 900.0, 50.0, 2.0, 0.60, 0.40, 64.0),
)

CATALOGUE: dict[str, GPU] = {row[0]: GPU(*row) for row in _TABLE}
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
