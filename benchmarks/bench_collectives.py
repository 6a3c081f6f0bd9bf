"""Hold the collective model against published nccl-tests bus bandwidths on DGX A100 and H100 systems.

Every row of benchmarks/data/nccl_tests_busbw.yaml is one published busbw (`all_reduce_perf`,
`all_gather_perf`) of a group of GPUs, every GPU of each node in it, at a message size. The model
(`solver.instances.collectives`: the group's place in the cluster, `group_link`, `collective_ms`)
times that collective on the system's links as its source states them (NVLink, NICs a node, a
NIC's line rate), at the catalogue's NVLink latency and the plan's default network latency; the
predicted busbw is nccl-tests' own: algbw = size / time, times 2(n-1)/n for an all-reduce and
(n-1)/n for an all-gather (nccl-tests' doc/PERFORMANCE.md). Nothing is fitted per row: the model's
efficiencies are one setting for every GPU type.

    python benchmarks/bench_collectives.py [--format text|markdown]

It prints each row (system, collective, GPUs and nodes, size, published and predicted busbw, the
error, the source's kind and NCCL's algorithm), the median |error| over all rows and over the ring
rows (NCCL's NVLink SHARP and a 2-node tree, which the model does not time, reach more than a
ring can), and the sources.
"""

from __future__ import annotations

import argparse
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from results_header import results_header

from pipesat.models.units import GIB, MIB
from pipesat.solver.instances.collectives import Collective, Fabric, collective_ms, group_link, group_nodes
from pipesat.solver.instances.description import Hardware
from pipesat.solver.instances.gpus import CATALOGUE
from pipesat.solver.report.tables import Column, format_rows

DATA = Path(__file__).resolve().parent / "data" / "nccl_tests_busbw.yaml"
NETWORK_LATENCY = Hardware(gpu="H100-SXM").latency
"""The network's latency a step (µs): the plan's default, as a spec that does not give one."""


@dataclass(frozen=True)
class System:
    name: str
    gpu: str
    gpus_per_node: int
    nvlink: float
    nics_per_node: int
    nic: float

    def fabric(self) -> Fabric:
        share = self.nics_per_node * self.nic / self.gpus_per_node
        latency = CATALOGUE[self.gpu].nvlink_latency
        return Fabric(self.nvlink, latency, share, NETWORK_LATENCY, self.gpus_per_node, self.nics_per_node)


@dataclass(frozen=True)
class Row:
    system: System
    collective: Collective
    gpus: int
    size: int
    busbw: float
    kind: str
    algorithm: str
    source: str

    @property
    def nodes(self) -> int:
        return group_nodes(self.gpus, 1, self.system.gpus_per_node).nodes

    def predicted(self) -> float:
        """nccl-tests' busbw of the model's time for this collective (module notes)."""
        n = self.gpus
        where = group_nodes(n, 1, self.system.gpus_per_node)
        seconds = collective_ms(self.collective, self.size, n, group_link(self.system.fabric(), where)) / 1e3
        factor = 2 * (n - 1) / n if self.collective is Collective.ALL_REDUCE else (n - 1) / n
        return self.size / seconds / 1e9 * factor

    @property
    def error(self) -> float:
        return self.predicted() / self.busbw - 1


def load_rows(path: Path = DATA) -> list[Row]:
    data: dict[str, Any] = yaml.safe_load(path.read_text())
    systems = {
        name: System(name, **{key: value for key, value in fields.items() if key != "text"})
        for name, fields in data["systems"].items()
    }
    return [
        Row(
            systems[row["system"]],
            Collective(row["collective"]),
            row["gpus"],
            row["size"],
            float(row["busbw"]),
            row["kind"],
            row.get("algorithm", "ring"),
            row["source"],
        )
        for row in data["rows"]
    ]


def size_text(size: int) -> str:
    return f"{size / GIB:g} GiB" if size >= GIB else f"{size / MIB:.0f} MiB"


COLUMNS = [
    Column("system", "system", align_right=False),
    Column("collective", "collective", align_right=False),
    Column("gpus", "GPUs"),
    Column("nodes", "nodes"),
    Column("size", "size", text=size_text),
    Column("published", "published GB/s", text=lambda v: f"{v:g}"),
    Column("predicted", "predicted GB/s", text=lambda v: f"{v:.1f}"),
    Column("error", "error", text=lambda v: f"{v * 100:+.1f}%"),
    Column("kind", "kind", align_right=False),
    Column("algorithm", "NCCL ran", align_right=False),
]


def cells(row: Row) -> dict[str, Any]:
    return {
        "system": row.system.name,
        "collective": row.collective.value,
        "gpus": row.gpus,
        "nodes": row.nodes,
        "size": row.size,
        "published": row.busbw,
        "predicted": row.predicted(),
        "error": row.error,
        "kind": row.kind,
        "algorithm": row.algorithm,
    }


def median_error(rows: list[Row]) -> float:
    return statistics.median(abs(row.error) for row in rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--format", choices=("text", "markdown"), default="text")
    args = parser.parse_args()
    print(results_header())
    rows = load_rows()
    print(format_rows(COLUMNS, [cells(row) for row in rows], args.format))
    ring = [row for row in rows if row.algorithm == "ring"]
    print(f"\nmedian |error|: {median_error(rows):.1%} over {len(rows)} rows")
    print(f"median |error| of the ring rows: {median_error(ring):.1%} over {len(ring)} rows")
    print("\nsources:")
    for number, row in enumerate(rows, 1):
        print(f"  {number}. {row.source}")


if __name__ == "__main__":
    main()
