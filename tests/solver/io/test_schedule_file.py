"""Schedule files: save -> load round trips, invalid schedules are refused, corrupted files say what is wrong."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from pipesat.models import InputError, Instance, ScheduleError
from pipesat.solver.evaluate.metrics import compute_metrics
from pipesat.solver.evaluate.simulator import simulate
from pipesat.solver.evaluate.validator import Rule, validate
from pipesat.solver.heuristics import run_heuristic
from pipesat.solver.io.schedule_file import load_schedule, save_schedule
from tests.strategies import PROPERTY_SETTINGS, assert_valid, instances_with_orders


def test_round_trip(tmp_path: Path, one_f_one_b_instance: Instance) -> None:
    schedule = assert_valid(run_heuristic("1f1b", one_f_one_b_instance.with_changes(memory_limit="1x")))
    path = save_schedule(schedule, tmp_path / "out" / "1f1b.json")
    loaded = load_schedule(path)
    assert loaded.ops == schedule.ops
    assert loaded.instance == schedule.instance
    assert (loaded.name, loaded.source) == ("1f1b", {"kind": "heuristic", "name": "1f1b"})
    data = json.loads(path.read_text())
    assert data["format"] == "pipesat-schedule/1"
    assert data["metrics"] == compute_metrics(schedule).to_dict()
    assert data["instance"]["placement"] == [0, 1, 2, 3]
    assert data["instance"]["memory_limit"] == 4
    assert set(data["ops"][0]) == {"kind", "stage", "microbatch", "device", "start", "end"}


# The same file path is rewritten by every example, so sharing tmp_path across examples is fine.
@settings(PROPERTY_SETTINGS, max_examples=20, suppress_health_check=list(HealthCheck))
@given(instances_with_orders())
def test_random_schedules_round_trip(tmp_path: Path, case) -> None:
    instance, orders = case
    schedule = assert_valid(simulate(instance, orders, name="random"))
    loaded = load_schedule(save_schedule(schedule, tmp_path / "random.json"))
    assert loaded.ops == schedule.ops and loaded.instance == instance
    assert loaded.split_backward == schedule.split_backward


def test_save_refuses_an_invalid_schedule(tmp_path: Path, one_f_one_b_instance: Instance) -> None:
    schedule = assert_valid(run_heuristic("1f1b", one_f_one_b_instance))
    broken = dataclasses.replace(schedule, ops=schedule.ops[1:])
    path = tmp_path / "broken.json"
    with pytest.raises(ScheduleError, match=r"invalid schedule 1f1b: .*is missing"):
        save_schedule(broken, path)
    assert not path.exists()


def test_save_reports_an_unwritable_path(tmp_path: Path, one_f_one_b_instance: Instance) -> None:
    (tmp_path / "file").write_text("")
    schedule = assert_valid(run_heuristic("1f1b", one_f_one_b_instance))
    with pytest.raises(InputError, match="cannot write"):
        save_schedule(schedule, tmp_path / "file" / "s.json")


@pytest.fixture
def saved(tmp_path: Path, one_f_one_b_instance: Instance) -> Path:
    return save_schedule(assert_valid(run_heuristic("1f1b", one_f_one_b_instance)), tmp_path / "s.json")


def _rewrite(path: Path, change) -> Path:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))
    return path


def test_load_bad_json_says_where(saved: Path) -> None:
    saved.write_text('{"format": "pipesat-schedule/1",\n "ops": [}\n')
    with pytest.raises(InputError, match=r"s\.json:2:10: not valid JSON"):
        load_schedule(saved)


def test_load_wrong_format(saved: Path) -> None:
    _rewrite(saved, lambda d: d.update(format="something-else"))
    with pytest.raises(InputError, match=r"s\.json: not a pipesat schedule: 'format' is 'something-else'"):
        load_schedule(saved)


def test_load_op_missing_a_field(saved: Path) -> None:
    _rewrite(saved, lambda d: [d["ops"][3].pop(key) for key in ("start", "device")])
    with pytest.raises(InputError, match=r"s\.json: ops\[3\] lacks device, start$"):
        load_schedule(saved)


def test_load_invalid_instance(saved: Path) -> None:
    _rewrite(saved, lambda d: d["instance"].update(forward_times=[1, 2]))
    with pytest.raises(InputError, match=r"s\.json: the schedule's instance is invalid: forward_times has 2 values"):
        load_schedule(saved)


def test_load_missing_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"nothing\.json: no such file"):
        load_schedule(tmp_path / "nothing.json")


def test_loaded_schedule_is_not_validated_on_load(saved: Path) -> None:
    # Loading reads any well-formed file; whether it is valid is the validator's to say (`pipesat check`).
    _rewrite(saved, lambda d: d["ops"][0].update(start=-5.0))
    loaded = load_schedule(saved)
    assert {v.rule for v in validate(loaded)} == {Rule.START, Rule.DURATION}
