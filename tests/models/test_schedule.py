"""Schedule and Op: labels, orders, and the dict form's checks (op durations and rules: test_ops)."""

from __future__ import annotations

import copy
import json

import pytest

from pipesat.models import Instance, Kind, Op, Schedule, ScheduleError, op_label
from pipesat.solver.evaluate.simulator import simulate
from pipesat.solver.heuristics import run_heuristic
from tests.strategies import assert_valid


def test_op_label() -> None:
    op = Op("F", 2, 5, 1, 0.0, 1.0)
    assert op.key == ("F", 2, 5)
    assert op.label() == op_label(op.key) == "F(stage 2, mb 5)"


def _orders(split: bool) -> list[list[tuple[str, int, int]]]:
    device0 = [("F", 0, 0), ("F", 0, 1)]
    device1 = [("F", 1, 0), ("B", 1, 0), ("F", 1, 1), ("B", 1, 1)]
    device0 += [("B", 0, 0), ("B", 0, 1)]
    if split:
        device1 += [("W", 1, 0), ("W", 1, 1)]
        device0 += [("W", 0, 0), ("W", 0, 1)]
    return [device0, device1]


@pytest.mark.parametrize("split", [False, True])
def test_split_backward_follows_w_ops_and_orders_round_trip(split_instance: Instance, split: bool) -> None:
    schedule = assert_valid(simulate(split_instance, _orders(split)))
    assert schedule.split_backward is split
    assert schedule.orders() == _orders(split)


def test_dict_round_trip(split_instance: Instance) -> None:
    schedule = assert_valid(simulate(split_instance, _orders(True), name="demo")).with_source(kind="test")
    data = schedule.to_dict({"makespan": 1.0})
    assert data["format"] == "pipesat-schedule/1"
    assert data["metrics"] == {"makespan": 1.0}
    again = Schedule.from_dict(json.loads(json.dumps(data)))
    assert again == schedule
    assert again.source == {"kind": "test"}
    assert {type(op.kind) for op in again.ops} == {Kind}  # read back as the enum, not the file's text


def _data(split_instance: Instance) -> dict:
    return assert_valid(simulate(split_instance, _orders(False))).to_dict()


@pytest.mark.parametrize(
    ("corrupt", "message"),
    [
        (lambda d: d.update(format="other/2"), "not a pipesat schedule: 'format' is 'other/2'"),
        (lambda d: d.pop("format"), "'format' is None"),
        (lambda d: d["instance"].update(num_devices=0), "the schedule's instance is invalid: num_devices must be at"),
        (lambda d: d.update(ops={}), "'ops' must be a list of ops"),
        (lambda d: d["ops"].__setitem__(1, [1, 2]), r"ops\[1\] must be an object with kind, stage"),
        (lambda d: d["ops"][2].pop("end"), r"ops\[2\] lacks end"),
        (lambda d: d["ops"][0].update(kind="X"), r"ops\[0\]: kind 'X' is not one of F, B, W"),
        (lambda d: d["ops"][0].update(stage=1.5), r"ops\[0\]: stage must be a whole number, got 1.5"),
        (lambda d: d["ops"][0].update(start=float("nan")), r"ops\[0\]: start must be a finite number, got nan"),
        (lambda d: d["ops"][0].update(end="3"), r"ops\[0\]: end must be a finite number, got '3'"),
    ],
)
def test_from_dict_rejects_malformed_data(split_instance: Instance, corrupt, message: str) -> None:
    data = copy.deepcopy(_data(split_instance))
    corrupt(data)
    with pytest.raises(ScheduleError, match=message):
        Schedule.from_dict(data)


def test_from_dict_rejects_non_mapping() -> None:
    with pytest.raises(ScheduleError, match="a schedule file must hold a JSON object"):
        Schedule.from_dict([])


def test_pairs_round_trip_through_the_file_form() -> None:
    instance = Instance.from_dict(
        {"num_devices": 2, "num_microbatches": 4, "chunks": 2, "placement": "vshape", "weight_times": 0.5}
        | {"forward_comm_times": 0.3, "backward_comm_times": 0.3}
    )
    schedule = run_heuristic("dualpipe-v", instance)
    assert schedule.has_pairs
    again = Schedule.from_dict(json.loads(json.dumps(schedule.to_dict())))
    assert again.orders() == schedule.orders() and again.has_pairs
    assert not Schedule(instance, again.ops[:1]).has_pairs


def test_a_schedule_and_a_row_that_holds_one_print_short() -> None:
    """`print(row)` of a comparison row was the whole schedule: tens of KB for a large one."""
    from pipesat.solver.studies.compare import compare

    instance = Instance.from_dict({"num_devices": 16, "num_microbatches": 64, "weight_times": 1})
    schedule = assert_valid(run_heuristic("zb-h1", instance))
    assert repr(schedule) == "<Schedule 'zb-h1': 3072 ops of <Instance: p=16 v=1 m=64 linear>>"
    rows = compare(instance, solve=False).rows
    assert all(len(repr(row)) < 400 for row in rows)
