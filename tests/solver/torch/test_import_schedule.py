"""Import of torch schedules: cell parsing, CSV round trips, and torch's built-in schedules."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from pipesat.models import InputError, Instance, InstanceError, Kind, ScheduleError
from pipesat.solver.evaluate.metrics import compute_metrics
from pipesat.solver.heuristics import NotApplicable, UnknownSchedule, run_heuristic
from pipesat.solver.heuristics.zb_v import handwritten_orders
from pipesat.solver.torch.export import export_torch_csv
from pipesat.solver.torch.import_schedule import (
    INSTALL_HINT,
    TORCH_SCHEDULES,
    TorchOverlap,
    import_torch_csv,
    import_torch_schedule,
    parse_cell,
    read_torch_csv,
    rows_to_orders,
    torch_rows,
)
from tests.strategies import assert_valid

LINEAR = {"num_devices": 4, "num_microbatches": 8, "p2p_time": 0.25}
LINEAR_SPLIT = {**LINEAR, "weight_times": 1}
INTERLEAVED_SPLIT = {**LINEAR_SPLIT, "chunks": 2}
VSHAPE_SPLIT = {**INTERLEAVED_SPLIT, "placement": "vshape"}

# Where each built-in fits; 1F1B's order is wrong in torch 2.13 and must be reported, not hidden.
BUILTIN_SHAPES = {
    "GPipe": LINEAR,
    "1F1B": LINEAR,
    "Interleaved1F1B": {**LINEAR, "chunks": 2},
    "LoopedBFS": {**LINEAR, "chunks": 2},
    "InterleavedZeroBubble": INTERLEAVED_SPLIT,
    "ZBVZeroBubble": VSHAPE_SPLIT,
    "DualPipeV": {**VSHAPE_SPLIT, "num_microbatches": 8, "num_devices": 2},
}


def _write(path: Path, rows: list[list[str]]) -> Path:
    with path.open("w", newline="") as file:
        csv.writer(file).writerows(rows)
    return path


def test_cells_parse_compute_overlap_and_skip_communication() -> None:
    assert parse_cell("2F5") == [("F", 2, 5)]
    assert parse_cell(" 0I12 ") == [("I", 0, 12)]
    assert parse_cell("(0F3;3B1)OVERLAP_F_B") == [TorchOverlap(("F", 0, 3), ("B", 3, 1))]
    assert parse_cell("(0F3;3I1)OVERLAP_F_B") == [TorchOverlap(("F", 0, 3), ("I", 3, 1))]
    # Not a forward with another microbatch's backward: run one after the other, as torch's runtime does.
    assert parse_cell("(0F3;3B3)OVERLAP_F_B") == [("F", 0, 3), ("B", 3, 3)]
    assert parse_cell("(0F3;1F3)OVERLAP_F_B") == [("F", 0, 3), ("F", 1, 3)]
    for cell in ("", "1SEND_F0", "2RECV_B3", "0UNSHARD", "1REDUCE_GRAD"):
        assert parse_cell(cell) == []
    with pytest.raises(ScheduleError, match="cell '2X5' is not a torch action"):
        parse_cell("2X5")


def test_rows_give_placement_and_map_i_to_b_and_full_b_to_b_then_w() -> None:
    rows = [["0F0", "3F0", "3I0", "3W0", "0B0"], ["1F0", "2F0", "2I0", "2W0", "1I0", "1W0"]]
    torch_orders = rows_to_orders(rows)
    assert torch_orders.placement == (0, 1, 1, 0)
    assert torch_orders.num_microbatches == 1
    # In a schedule with I/W, a whole backward B is pipesat's B directly followed by its W.
    assert torch_orders.orders[0] == [("F", 0, 0), ("F", 3, 0), ("B", 3, 0), ("W", 3, 0), ("B", 0, 0), ("W", 0, 0)]
    assert torch_orders.orders[1][4:] == [("B", 1, 0), ("W", 1, 0)]


def test_fused_rows_keep_b_whole() -> None:
    torch_orders = rows_to_orders([["0F0", "0B0"], ["1F0", "1B0"]])
    assert torch_orders.orders == [[("F", 0, 0), ("B", 0, 0)], [("F", 1, 0), ("B", 1, 0)]]
    assert {type(key.kind) for order in torch_orders.orders for key in order} == {Kind}


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        ([["0F0", "1F0"], ["1B0"]], "stage 1 has actions on rank 0 and on rank 1"),
        ([["0F0", "2F0"], ["2B0", "0B0"]], "stage 2 has actions on rank 0 and on rank 1"),
        ([["0F0", "0B0"], ["2F0", "2B0"]], r"stage\(s\) 1 have no actions"),
        ([[""], [""]], "no compute actions"),
    ],
)
def test_malformed_rows_are_refused(rows: list[list[str]], message: str) -> None:
    with pytest.raises(ScheduleError, match=message):
        rows_to_orders(rows)


@pytest.mark.parametrize(
    ("name", "shape"),
    [("1f1b", LINEAR), ("zb-h1", LINEAR_SPLIT), ("interleaved", INTERLEAVED_SPLIT), ("zb-v", VSHAPE_SPLIT)],
)
def test_exported_csv_imports_to_the_same_schedule(tmp_path: Path, name: str, shape: dict) -> None:
    instance = Instance.from_dict(shape)
    schedule = assert_valid(run_heuristic(name, instance))
    path = export_torch_csv(schedule, tmp_path / f"{name}.csv")
    imported = assert_valid(import_torch_csv(path, instance))
    assert sorted(imported.ops) == sorted(schedule.ops)
    assert imported.source == {"kind": "torch-csv", "file": str(path)}


def test_csv_import_names_the_options_that_match(tmp_path: Path) -> None:
    path = export_torch_csv(run_heuristic("zb-v", Instance.from_dict(VSHAPE_SPLIT)), tmp_path / "v.csv")
    assert read_torch_csv(path).placement == (0, 1, 2, 3, 3, 2, 1, 0)
    with pytest.raises(InstanceError, match="give `chunks` 2 `placement` vshape"):
        import_torch_csv(path, Instance.from_dict(INTERLEAVED_SPLIT))
    with pytest.raises(InstanceError, match="give `num_devices` 4 `num_microbatches` 8"):
        import_torch_csv(path, Instance.from_dict({**VSHAPE_SPLIT, "num_microbatches": 6}))


def test_deadlocking_csv_is_refused(tmp_path: Path) -> None:
    path = _write(tmp_path / "dead.csv", [["0F0", "0B0", "0F1", "0B1"], ["1F1", "1F0", "1B0", "1B1"]])
    with pytest.raises(ScheduleError, match="the orders deadlock"):
        import_torch_csv(path, Instance.from_dict({"num_devices": 2, "num_microbatches": 2}))


def test_missing_csv_says_so(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such file"):
        read_torch_csv(tmp_path / "absent.csv")


def _needs_torch() -> None:
    pytest.importorskip("torch", reason=INSTALL_HINT)


@pytest.mark.parametrize("name", [n for n in TORCH_SCHEDULES if n != "1F1B"])
def test_builtin_schedule_validates_on_its_shape(name: str) -> None:
    _needs_torch()
    instance = Instance.from_dict(BUILTIN_SHAPES[name])
    schedule = assert_valid(import_torch_schedule(name, instance))
    assert schedule.source["kind"] == "torch" and schedule.source["name"] == name
    assert schedule.split_backward == (name in ("InterleavedZeroBubble", "ZBVZeroBubble", "DualPipeV"))


@pytest.mark.parametrize(
    ("torch_name", "pipesat_name", "shape"),
    [
        ("GPipe", "gpipe", LINEAR),
        ("Interleaved1F1B", "interleaved", {**LINEAR, "chunks": 2}),
    ],
)
def test_torch_builtin_has_the_same_order_as_pipesats(torch_name: str, pipesat_name: str, shape: dict) -> None:
    _needs_torch()
    instance = Instance.from_dict(shape)
    imported = assert_valid(import_torch_schedule(torch_name, instance))
    assert imported.orders() == run_heuristic(pipesat_name, instance).orders()


@pytest.mark.parametrize("shape", [VSHAPE_SPLIT, {**VSHAPE_SPLIT, "num_devices": 3, "num_microbatches": 6}])
def test_torch_zbv_is_the_handwritten_zb_v_order_and_pipesats_zb_v_is_no_slower(shape: dict) -> None:
    _needs_torch()
    instance = Instance.from_dict(shape)
    imported = assert_valid(import_torch_schedule("ZBVZeroBubble", instance))
    assert imported.orders() == handwritten_orders(instance)
    ours = compute_metrics(assert_valid(run_heuristic("zb-v", instance))).max_span
    assert ours <= compute_metrics(imported).max_span


def test_torch_1f1b_is_reported_wrong_on_the_last_rank() -> None:
    _needs_torch()
    with pytest.raises(ScheduleError, match=r"known to be wrong on the last rank.*missing: F\(stage 3, mb 0\)"):
        import_torch_schedule("1F1B", Instance.from_dict(LINEAR))


@pytest.mark.parametrize(
    ("name", "shape", "reason"),
    [
        ("ZBVZeroBubble", {**LINEAR_SPLIT, "chunks": 2}, "needs chunks 2 with vshape placement"),
        ("ZBVZeroBubble", {**VSHAPE_SPLIT, "weight_times": None}, r"needs a split backward \(weight_times\)"),
        ("GPipe", VSHAPE_SPLIT, r"needs one stage per device \(chunks 1, linear placement\)"),
        ("Interleaved1F1B", LINEAR, r"needs several stages per device \(chunks >= 2\)"),
        (
            "DualPipeV",
            {**VSHAPE_SPLIT, "num_microbatches": 6},
            "DualPipeV requires at least as many microbatches as stages",
        ),
    ],
)
def test_builtin_that_does_not_fit_says_why(name: str, shape: dict, reason: str) -> None:
    _needs_torch()
    with pytest.raises(NotApplicable, match=reason):
        import_torch_schedule(name, Instance.from_dict(shape))


def test_an_unknown_torch_schedule_lists_the_names() -> None:
    with pytest.raises(UnknownSchedule, match="unknown torch schedule 'nope'; choose one of GPipe, 1F1B"):
        import_torch_schedule("nope", Instance.from_dict(LINEAR))


def test_torch_rows_cover_every_builtin_with_a_schedule_or_a_reason() -> None:
    _needs_torch()
    rows = torch_rows(Instance.from_dict(LINEAR))
    assert [row.name for row in rows] == [f"torch:{name}" for name in TORCH_SCHEDULES]
    by_name = {row.name: row for row in rows}
    assert_valid(by_name["torch:GPipe"].schedule)
    assert by_name["torch:1F1B"].schedule is None and "known to be wrong" in by_name["torch:1F1B"].reason
    for name in ("Interleaved1F1B", "ZBVZeroBubble"):
        assert by_name[f"torch:{name}"].reason.startswith("needs several stages per device")


def test_torch_memory_limit_is_checked() -> None:
    _needs_torch()
    instance = Instance.from_dict({**LINEAR, "memory_limit": "1x"})
    # GPipe holds all 8 microbatches, over the 1F1B peak of 4.
    with pytest.raises(ScheduleError, match="over the limit 4"):
        import_torch_schedule("GPipe", instance)
