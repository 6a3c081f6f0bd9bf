"""Export to torch's compute_only CSV: cells, refusal of bad schedules, and loading in torch's runtime."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from pipesat.models import InputError, Instance, Op, Schedule, ScheduleError
from pipesat.solver.heuristics import NotApplicable, all_heuristics, run_heuristic
from pipesat.solver.torch.export import export_torch_csv, orders_to_rows, schedule_to_rows, torch_cell
from pipesat.solver.torch.import_schedule import import_torch_csv
from tests.conftest import moe_instance
from tests.offloaded import offloaded
from tests.solver.torch.torch_fakes import load_in_torch
from tests.strategies import assert_valid

# Linear, interleaved and V placement, each with a fused and a split backward.
SHAPES = {
    "linear-fused": {"num_devices": 3, "num_microbatches": 4},
    "linear-split": {"num_devices": 3, "num_microbatches": 4, "weight_times": 1},
    "interleaved-fused": {"num_devices": 2, "num_microbatches": 4, "chunks": 2},
    "interleaved-split": {"num_devices": 2, "num_microbatches": 4, "chunks": 2, "weight_times": 1},
    "vshape-fused": {"num_devices": 2, "num_microbatches": 4, "chunks": 2, "placement": "vshape"},
    "vshape-split": {"num_devices": 2, "num_microbatches": 4, "chunks": 2, "placement": "vshape", "weight_times": 1},
}

# Device 0 runs microbatch 0 down and back before microbatch 1; device 1 wants microbatch 1 first.
DEADLOCK = [
    [("F", 0, 0), ("B", 0, 0), ("F", 0, 1), ("B", 0, 1)],
    [("F", 1, 1), ("F", 1, 0), ("B", 1, 0), ("B", 1, 1)],
]


def _shape(name: str) -> Instance:
    return Instance.from_dict({**SHAPES[name], "p2p_time": 0.25})


def _read(path: Path) -> list[list[str]]:
    with path.open(newline="") as file:
        return list(csv.reader(file))


def test_cells_name_a_fused_backward_b_and_a_split_one_i() -> None:
    assert torch_cell(("F", 2, 5), split_backward=False) == "2F5"
    assert torch_cell(("B", 2, 5), split_backward=False) == "2B5"
    assert torch_cell(("B", 2, 5), split_backward=True) == "2I5"
    assert torch_cell(("W", 0, 11), split_backward=True) == "0W11"


def test_rows_follow_each_devices_order(one_f_one_b_instance: Instance) -> None:
    schedule = assert_valid(run_heuristic("1f1b", one_f_one_b_instance))
    rows = schedule_to_rows(schedule)
    assert len(rows) == 4
    # Device 3 (the last) alternates F and B from the start; device 0 warms up with 4 forwards.
    assert rows[3][:4] == ["3F0", "3B0", "3F1", "3B1"]
    assert rows[0][:5] == ["0F0", "0F1", "0F2", "0F3", "0B0"]
    assert sum(len(row) for row in rows) == len(schedule.ops)


def test_split_schedule_exports_i_and_w() -> None:
    schedule = assert_valid(run_heuristic("zb-h1", _shape("linear-split")))
    cells = {cell for row in schedule_to_rows(schedule) for cell in row}
    assert {"2I0", "2W0", "0I3", "0W3"} <= cells
    assert not any("B" in cell for cell in cells)


def test_deadlocking_order_is_refused_with_the_stuck_ops() -> None:
    instance = Instance.from_dict({"num_devices": 2, "num_microbatches": 2})
    with pytest.raises(ScheduleError, match=r"deadlock: device 0 is stuck at B\(stage 0, mb 0\)"):
        orders_to_rows(instance, DEADLOCK)


def test_invalid_schedule_is_refused_and_nothing_written(tmp_path: Path, one_f_one_b_instance: Instance) -> None:
    schedule = run_heuristic("1f1b", one_f_one_b_instance)
    # Swap the times of two forwards on device 0: the order still runs, but the forward of
    # microbatch 0 on device 1 now starts before its input exists.
    ops = list(schedule.ops)
    first = next(i for i, op in enumerate(ops) if op.key == ("F", 0, 0))
    second = next(i for i, op in enumerate(ops) if op.key == ("F", 0, 3))
    ops[first], ops[second] = (
        Op("F", 0, 0, 0, ops[second].start, ops[second].end),
        Op("F", 0, 3, 0, ops[first].start, ops[first].end),
    )
    broken = Schedule(schedule.instance, tuple(ops), "broken")
    out = tmp_path / "broken.csv"
    with pytest.raises(
        ScheduleError,
        match=r"invalid schedule broken: device 1: F\(stage 1, mb 0\) starts at 1 before F\(stage 0, mb 0\) ends at 4",
    ):
        export_torch_csv(broken, out)
    assert not out.exists()


def test_orders_over_the_memory_limit_are_refused() -> None:
    instance = Instance.from_dict({"num_devices": 2, "num_microbatches": 4, "memory_limit": 2})
    gpipe = [[("F", d, j) for j in range(4)] + [("B", d, j) for j in range(4)] for d in range(2)]
    with pytest.raises(ScheduleError, match="over the limit 2"):
        orders_to_rows(instance, gpipe)


def test_torch_refuses_the_deadlock_pipesat_refuses(tmp_path: Path) -> None:
    # Written past pipesat's check: torch's runtime finds the same deadlock when adding sends/receives.
    path = tmp_path / "deadlock.csv"
    with path.open("w", newline="") as file:
        csv.writer(file).writerows([[torch_cell(key, False) for key in order] for order in DEADLOCK])
    with pytest.raises(AssertionError, match="Malformed compute schedule"):
        load_in_torch(path, num_devices=2, num_stages=2, num_microbatches=2)


def _heuristic_schedules() -> list[tuple[str, str, Schedule]]:
    schedules = []
    for shape in SHAPES:
        for heuristic in all_heuristics():
            if heuristic.offloads:
                continue
            try:
                schedules.append((shape, heuristic.name, run_heuristic(heuristic.name, _shape(shape))))
            except NotApplicable:
                continue
    return schedules


def test_every_handwritten_schedule_loads_in_torch(tmp_path: Path) -> None:
    schedules = _heuristic_schedules()
    exported = set()
    for shape, name, schedule in schedules:
        assert_valid(schedule)
        path = export_torch_csv(schedule, tmp_path / f"{shape}-{name}.csv")
        instance = schedule.instance
        runtime = load_in_torch(path, instance.num_devices, instance.num_stages, instance.num_microbatches)
        assert runtime.stage_index_to_group_rank == dict(enumerate(instance.placement)), (shape, name)
        loaded = [[str(action) for action in runtime.pipeline_order[rank]] for rank in range(instance.num_devices)]
        assert loaded == _read(path), (shape, name)
        exported.add(name)
    # A heuristic that fits none of the six shapes would go untested: every handwritten one must fit one
    # (but DualPipe, whose two copies torch cannot express, and the offload schedules, whose host-link
    # transfers torch's CSV cannot carry: both refused below).
    assert exported == {heuristic.name for heuristic in all_heuristics() if not heuristic.offloads} - {"dualpipe"}


def test_a_bidirectional_schedule_is_refused_in_one_line_and_nothing_is_written(tmp_path: Path) -> None:
    schedule = run_heuristic("dualpipe", moe_instance(4, 8, placement="bidirectional"))
    path = tmp_path / "dualpipe.csv"
    with pytest.raises(InputError, match="a bidirectional \\(DualPipe\\) schedule has no form there"):
        export_torch_csv(schedule, path)
    assert not path.exists()


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_solver_result_loads_in_torch(tmp_path: Path, shape: str) -> None:
    from pipesat.solver.solve import solve

    instance = Instance.from_dict({**SHAPES[shape], "num_microbatches": 3})
    schedule = assert_valid(solve(instance, time_limit=5, workers=1, seed=0).schedule)
    path = export_torch_csv(schedule, tmp_path / f"{shape}.csv")
    runtime = load_in_torch(path, instance.num_devices, instance.num_stages, instance.num_microbatches)
    assert runtime.stage_index_to_group_rank == dict(enumerate(instance.placement))
    assert schedule.split_backward == instance.split_backward
    kinds = {action.computation_type.value for rank in runtime.pipeline_order.values() for action in rank}
    assert kinds == ({"F", "I", "W"} if instance.split_backward else {"F", "B"})


def test_pairs_export_as_overlap_f_b_and_import_back(tmp_path: Path) -> None:
    instance = Instance.from_dict(
        {"num_devices": 2, "num_microbatches": 4, "chunks": 2, "placement": "vshape", "weight_times": 0.5}
        | {"forward_comm_times": 0.3, "backward_comm_times": 0.3}
    )
    schedule = assert_valid(run_heuristic("dualpipe-v", instance))
    path = export_torch_csv(schedule, tmp_path / "dualpipev.csv")
    cells = [cell for row in _read(path) for cell in row]
    assert "(0F3;3B1)OVERLAP_F_B" in cells  # the whole backward (its W inside) is torch's B
    imported = import_torch_csv(path, instance)
    assert imported.orders() == schedule.orders()
    assert [op[:6] for op in sorted(imported.ops)] == [op[:6] for op in sorted(schedule.ops)]


def test_a_schedule_that_offloads_is_refused_in_one_line(tmp_path: Path) -> None:
    schedule = offloaded()
    assert_valid(schedule)
    with pytest.raises(ScheduleError, match="torch's compute_only CSV cannot carry offloads: this schedule has 8"):
        export_torch_csv(schedule, tmp_path / "offload.csv")
    assert not (tmp_path / "offload.csv").exists()
