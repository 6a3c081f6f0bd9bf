"""The ZB paper's Table 5 bubble rates (docs/reference.md, Table 5), reproduced with the simulator.

Each row is p devices, m microbatches, per-stage F, B, W (ms) and comm, modelled as `p2p_time`
between every pair of stages. The bubble rate is (max span - m(F+B+W)) / max span, which is
metrics' `span_bubble_rate` for uniform stages. 1F1B and 1F1B-I fuse W into B; 1F1B-I runs v
chunks per device with per-chunk times F/v, B/v, W/v. ZB-1p and ZB-2p are ZB-auto under memory
limits p·M_B and 2p·M_B.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pipesat.models import Instance
from tests.conftest import make_instance
from tests.solver.heuristics.helpers import run_valid


def _read_rows() -> list[tuple]:
    """The table as published, one tuple a row: p, m, F, B, W, comm, 1F1B, 1F1B-I, v, ZB-H1, ZB-H2, ZB-1p, ZB-2p."""
    lines = (Path(__file__).parent / "table5.csv").read_text().splitlines()[1:]
    return [tuple(int(cell) if cell.isdigit() else float(cell) for cell in line.split(",")) for line in lines]


ROWS = _read_rows()
ROW_IDS = [f"p{row[0]}-m{row[1]}-F{row[2]}" for row in ROWS]
M_B = 2.0  # the ZB code's units: F +2, B -1, W -1


def row_instance(row: tuple, chunks: int = 1, memory_limit: float | None = None) -> Instance:
    p, m, f, b, w, comm = row[:6]
    layout = {"chunks": chunks, "placement": "linear" if chunks == 1 else "interleaved"}
    # Numbers are a device's share: with chunks, each of its v stages gets a v-th (F/v, B/v, W/v, M_B/v).
    times = {"forward_times": f, "backward_times": b, "weight_times": w, "p2p_time": comm}
    memory = {"activation_memory": M_B, "weight_memory": M_B / 2, "memory_limit": memory_limit}
    return make_instance(p, m, **layout, **times, **memory)


def paper_bubble_rate(name: str, instance: Instance) -> float:
    _, metrics = run_valid(name, instance)
    ideal = instance.num_microbatches * (
        instance.forward_times[0] + instance.backward_times[0] + instance.weight_times[0]
    )
    assert metrics.span_bubble_rate == pytest.approx((metrics.max_span - ideal * instance.chunks) / metrics.max_span)
    return metrics.span_bubble_rate


@pytest.mark.parametrize("row", ROWS, ids=ROW_IDS)
def test_one_f_one_b_and_zb_h1_h2(row: tuple) -> None:
    instance = row_instance(row)
    one_f_one_b, zb_h1, zb_h2 = row[6], row[9], row[10]
    assert paper_bubble_rate("1f1b", instance) == pytest.approx(one_f_one_b, abs=5e-4)
    assert paper_bubble_rate("zb-h1", instance) == pytest.approx(zb_h1, abs=5e-4)
    assert paper_bubble_rate("zb-h2", instance) == pytest.approx(zb_h2, abs=5e-4)


@pytest.mark.parametrize("row", ROWS, ids=ROW_IDS)
def test_zb_auto_at_one_and_two_p_activations(row: tuple) -> None:
    p, zb_1p, zb_2p = row[0], row[11], row[12]
    assert paper_bubble_rate("zb-auto", row_instance(row, memory_limit=p * M_B)) == pytest.approx(zb_1p, abs=2e-3)
    assert paper_bubble_rate("zb-auto", row_instance(row, memory_limit=2 * p * M_B)) == pytest.approx(zb_2p, abs=2e-3)


@pytest.mark.parametrize("row", ROWS, ids=ROW_IDS)
def test_interleaved_pays_every_transfer_the_paper_skipped(row: tuple) -> None:
    """1F1B-I is within 0.004 above the paper, never below it: the paper's own simulator is optimistic.

    The paper's 1F1B-I figures come from a simulator (interleave.py in the ZB repository) that makes
    only the first microbatch of each group of p wait for the gradient crossing from device 0 back
    to device p-1 between chunks; one to three backwards per row start up to 14 ms before their
    input exists. Our simulator waits for every input (and the validator checks it), which costs
    0.0008 to 0.0035 of bubble rate; at zero comm the closed form holds exactly (test_interleaved).
    """
    published, chunks = row[7], row[8]
    rate = paper_bubble_rate("interleaved", row_instance(row, chunks=chunks))
    assert published - 5e-4 <= rate <= published + 4e-3
