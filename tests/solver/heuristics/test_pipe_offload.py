"""PipeOffload's offload schedules and the device-0 baseline (solver/heuristics/pipe_offload.py):
valid, leaner than their base order, and as fast as it when the link hides every transfer."""

from __future__ import annotations

import pytest

from pipesat.models import Instance, Kind, OpKey
from pipesat.models.instance_file import load_instance
from pipesat.solver.evaluate.metrics import compute_metrics
from pipesat.solver.heuristics import NotApplicable, run_heuristic
from pipesat.solver.studies.compare import compare
from tests.conftest import ROOT
from tests.strategies import assert_valid

V = {"num_devices": 4, "num_microbatches": 8, "chunks": 2, "placement": "vshape", "weight_times": 1}
LINEAR = {"num_devices": 4, "num_microbatches": 8}
FAMILIES = {
    "pipeoffload-full-v": (V, "v-half"),
    "pipeoffload-selective-v": (V, "v-half"),
    "offload-device0-v": (V, "v-half"),
    "pipeoffload-full-1f1b": (LINEAR, "1f1b"),
    "pipeoffload-selective-1f1b": (LINEAR, "1f1b"),
    "offload-device0-1f1b": (LINEAR, "1f1b"),
}
FAST = 64.0  # a stage's activation in 1/64 of a forward: every transfer hides


@pytest.mark.parametrize("name", FAMILIES)
@pytest.mark.parametrize("bandwidth", [FAST, 1.0, 0.25])
def test_each_schedule_is_valid_with_its_transfers(name: str, bandwidth: float) -> None:
    shape, _ = FAMILIES[name]
    assert_valid(run_heuristic(name, Instance.from_dict({**shape, "host_link_bandwidth": bandwidth})))


@pytest.mark.parametrize("name", FAMILIES)
def test_with_a_fast_link_the_makespan_is_the_base_orders_and_the_peak_no_higher(name: str) -> None:
    shape, base = FAMILIES[name]
    instance = Instance.from_dict({**shape, "host_link_bandwidth": FAST})
    offloaded = compute_metrics(assert_valid(run_heuristic(name, instance)))
    resident = compute_metrics(assert_valid(run_heuristic(base, instance)))
    assert offloaded.max_peak_memory <= resident.max_peak_memory
    if not name.startswith("offload-device0"):  # the baseline's reloads start at its B
        assert offloaded.makespan == pytest.approx(resident.makespan)


@pytest.mark.parametrize("name", ["pipeoffload-full-v", "pipeoffload-full-1f1b"])
def test_full_offload_lowers_the_peak(name: str) -> None:
    shape, base = FAMILIES[name]
    instance = Instance.from_dict({**shape, "host_link_bandwidth": FAST})
    offloaded = compute_metrics(run_heuristic(name, instance)).max_peak_memory
    assert offloaded < compute_metrics(run_heuristic(base, instance)).max_peak_memory


@pytest.mark.parametrize("name", ["pipeoffload-full-1f1b", "pipeoffload-selective-1f1b"])
def test_a_1f1b_reload_is_timed_back_from_its_b_and_holds_no_memory_through_the_warm_up(name: str) -> None:
    # Timed from the op two steps before it alone, the reload of microbatch 0 came in the warm-up,
    # long before its B, and the peaks were 3 (full) and 4 (selective), 1F1B's.
    instance = Instance.from_dict({**LINEAR, "host_link_bandwidth": FAST})
    schedule = assert_valid(run_heuristic(name, instance))
    starts = {op.key: op.start for op in schedule.ops}
    for reload in (op for op in schedule.transfers if op.kind == Kind.R):
        assert starts[OpKey(Kind.B, reload.stage, reload.microbatch)] - reload.end <= 2 + 1e-9  # within one B
    assert (
        compute_metrics(schedule).max_peak_memory <= {"pipeoffload-full-1f1b": 2, "pipeoffload-selective-1f1b": 3}[name]
    )


def test_without_a_link_they_are_not_applicable() -> None:
    with pytest.raises(NotApplicable, match="needs a host link"):
        run_heuristic("pipeoffload-full-v", Instance.from_dict(V))


def test_compare_lists_them_where_the_instance_has_a_link() -> None:
    rows = compare(Instance.from_dict({**V, "host_link_bandwidth": FAST}), solve=False).rows
    measured = {row.name: row for row in rows if row.value is not None}
    assert {"pipeoffload-full-v", "pipeoffload-selective-v", "offload-device0-v"} <= set(measured)
    assert measured["pipeoffload-full-v"].peak_memory < measured["v-half"].peak_memory


def test_under_a_limit_what_hides_is_topped_up_until_the_peak_fits() -> None:
    # PipeOffload's instance (GPT, p4 V, m8) on an A100's PCIe link at half of 1F1B's peak: what hides
    # alone peaks above the limit; offloading more of the selection, longest-lived first, fits it.
    path = ROOT / "instances/offload/pipeoffload-gpt-p4-v-m8.yaml"
    linked = load_instance(path).with_changes(host_link_bandwidth=31.5e9 / 2**20 / 1e3)
    unlimited = run_heuristic("pipeoffload-full-v", linked)
    limited = linked.with_limit("0.5x")
    assert limited.memory_limit is not None
    assert compute_metrics(unlimited).max_peak_memory > limited.memory_limit[0]
    schedule = assert_valid(run_heuristic("pipeoffload-full-v", limited))
    assert len(schedule.transfers) > len(unlimited.transfers)
    assert compute_metrics(schedule).max_peak_memory <= limited.memory_limit[0] * (1 + 1e-9)
