"""REFERENCE.md §4: the ZB paper's Table 5 bubble rates, reproduced with the simulator.

Each row is p devices, m microbatches, per-stage F, B, W (ms) and comm, modelled as `p2p_time`
between every pair of stages. The bubble rate is (max span - m(F+B+W)) / max span, which is
metrics' `span_bubble_rate` for uniform stages. 1F1B and 1F1B-I fuse W into B; 1F1B-I runs v
chunks per device with per-chunk times F/v, B/v, W/v. ZB-1p and ZB-2p are ZB-auto under memory
limits p·M_B and 2p·M_B.
"""

from __future__ import annotations

import pytest

from models import Instance
from tests.solver.heuristics.helpers import run_valid

# p, m, F, B, W, comm, 1F1B, 1F1B-I, v, ZB-H1, ZB-H2, ZB-1p, ZB-2p
ROWS = [
    (8, 24, 18.522, 18.086, 9.337, 0.601, 0.2431, 0.1055, 3, 0.1585, 0.1083, 0.1585, 0.0433),
    (8, 32, 18.513, 18.086, 9.331, 0.626, 0.1985, 0.0818, 3, 0.1242, 0.0837, 0.1242, 0.0039),
    (8, 64, 18.546, 18.097, 9.321, 0.762, 0.1240, 0.0443, 3, 0.0674, 0.0444, 0.0674, 0.0026),
    (8, 24, 29.718, 29.444, 19.927, 0.527, 0.2347, 0.0808, 4, 0.1323, 0.0698, 0.1323, 0.0029),
    (8, 32, 29.802, 29.428, 19.530, 0.577, 0.1898, 0.0628, 4, 0.1045, 0.0559, 0.1045, 0.0022),
    (8, 64, 29.935, 29.621, 19.388, 0.535, 0.1091, 0.0320, 4, 0.0554, 0.0294, 0.0554, 0.0010),
    (16, 48, 11.347, 11.248, 8.132, 0.377, 0.2552, 0.1104, 3, 0.1397, 0.0672, 0.1397, 0.0066),
    (16, 64, 11.307, 11.254, 8.101, 0.379, 0.2082, 0.0852, 3, 0.1088, 0.0516, 0.1088, 0.0054),
    (16, 128, 11.325, 11.308, 8.109, 0.378, 0.1251, 0.0445, 3, 0.0576, 0.0266, 0.0576, 0.0028),
    (32, 96, 10.419, 10.207, 7.715, 0.408, 0.2646, 0.1493, 2, 0.1421, 0.0641, 0.1421, 0.0038),
    (32, 128, 10.408, 10.204, 7.703, 0.408, 0.2168, 0.1164, 2, 0.1106, 0.0490, 0.1106, 0.0029),
    (32, 256, 10.402, 10.248, 7.698, 0.460, 0.1352, 0.0624, 2, 0.0594, 0.0257, 0.0594, 0.0018),
]
ROW_IDS = [f"p{row[0]}-m{row[1]}-F{row[2]}" for row in ROWS]
M_B = 2.0  # the ZB code's units: F +2, B -1, W -1


def row_instance(row: tuple, chunks: int = 1, memory_limit: float | None = None) -> Instance:
    p, m, f, b, w, comm = row[:6]
    return Instance.from_dict(
        {
            "num_devices": p,
            "num_microbatches": m,
            "chunks": chunks,
            "placement": "linear" if chunks == 1 else "interleaved",
            "forward_times": f / chunks,
            "backward_times": b / chunks,
            "weight_times": w / chunks,
            "p2p_time": comm,
            "activation_memory": M_B / chunks,
            "weight_memory": M_B / chunks / 2,
            "memory_limit": memory_limit,
        }
    )


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
