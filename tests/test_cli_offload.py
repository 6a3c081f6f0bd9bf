"""`pipesat solve --offload` as a newcomer runs it: a limit no order meets, met by offloading, the
schedule file with its transfers, the picture with the link lane, `check` and the exports."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli_helpers import cli_error, cli_ok, run_cli

QUARTER = ("-s", "2", "-b", "2", "--chunks", "4", "--placement", "interleaved", "--memory-limit", "0.25x")


def test_solve_offloads_where_the_order_alone_fits_nothing(tmp_path: Path) -> None:
    saved, picture = tmp_path / "offload.json", tmp_path / "offload.png"
    assert "no schedule fits the memory limit 0.5" in cli_error(run_cli("solve", *QUARTER), 1)
    out = cli_ok(
        run_cli("solve", *QUARTER, "--host-link-bandwidth", "2", "--offload", "--save", saved, "-o", picture, "--ascii")
    )
    assert "status:         optimal" in out and "peak memory:    0.5" in out
    assert "host link: O offload, R reload" in out
    assert "offloads:       " in out and "of 16 (stage, microbatch)s; host links busy" in out
    data = json.loads(saved.read_text())
    assert data["transfers"] and data["instance"]["host_link_bandwidth"] == 2
    assert picture.stat().st_size > 0
    checked = cli_ok(run_cli("check", saved))
    assert f"{len(data['transfers'])} host-link transfers" in checked
    assert "cannot carry offloads" in cli_error(run_cli("export", saved, tmp_path / "x.csv", "--to", "torch-csv"), 1)
    cli_ok(run_cli("export", saved, tmp_path / "trace.json", "--to", "chrome-trace"))


def test_pareto_with_a_host_link_has_the_offload_series(tmp_path: Path) -> None:
    v = ("-s", "2", "-b", "4", "--chunks", "2", "--placement", "vshape", "-w", "1", "--host-link-bandwidth", "1")
    args = ("pareto", *v, "--limits", "0.5,1", "--time-limit", "1", "--workers", "1")
    picture = tmp_path / "pareto.png"
    out = cli_ok(run_cli(*args, "-o", picture))
    assert "without offload:" in out and "with offload over the host link:" in out
    assert "PipeOffload full (V)" in out and picture.stat().st_size > 0
    document = json.loads(cli_ok(run_cli(*args, "--format", "json", "--no-visualization")))
    assert [row["memory_limit"] for row in document["offloaded"]] == [0.5, 1]
    assert document["points"][0]["status"] == "infeasible"
    assert document["offloaded"][0]["offloads"] > 0 and document["offloaded"][0]["peak_memory"] <= 0.5
