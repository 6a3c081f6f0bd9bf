"""CP-SAT's own parameters for experts: parsed by protobuf, checked by CP-SAT, one line for each bad one."""

from __future__ import annotations

import signal
import time

import pytest
from google.protobuf import text_format

from pipesat.models import OptionError
from pipesat.solver.cpsat.parameters import SatParameters, cpsat_parameters, parse_pairs


def _parsed(pairs: dict[str, str]) -> SatParameters:
    return text_format.Parse(cpsat_parameters(pairs), SatParameters())


def test_scalar_enum_bool_string_repeated_and_message_fields_parse() -> None:
    params = _parsed(
        {
            "linearization_level": "2",
            "max_time_in_seconds": "1.5",
            "search_branching": "FIXED_SEARCH",
            "log_search_progress": "true",
            "name": "mine",
            "extra_subsolvers": "max_lp, core",
            "subsolver_params": '{ name: "fast" linearization_level: 0 }',
        }
    )
    assert params.linearization_level == 2 and params.max_time_in_seconds == 1.5
    assert params.search_branching == SatParameters.FIXED_SEARCH and params.log_search_progress
    assert params.name == "mine" and list(params.extra_subsolvers) == ["max_lp", "core"]
    assert params.subsolver_params[0].name == "fast"


def test_no_parameters_is_no_text() -> None:
    assert cpsat_parameters({}) == ""


def test_a_repeated_field_given_twice_collects_its_values() -> None:
    pairs = parse_pairs(["extra_subsolvers=max_lp", "extra_subsolvers=core", "linearization_level=2"])
    assert pairs == {"extra_subsolvers": "max_lp,core", "linearization_level": "2"}


@pytest.mark.parametrize(
    ("items", "message"),
    [
        (
            ["linearization_levl=2"],
            "--cpsat-param linearization_levl=2: CP-SAT has no parameter "
            "'linearization_levl'; did you mean linearization_level?",
        ),
        (["no_such_thing=1"], "CP-SAT has no parameter 'no_such_thing' (see CP-SAT's sat_parameters.proto)"),
        (["linearization_level=two"], "--cpsat-param linearization_level=two: Couldn't parse integer: two"),
        (["search_branching=FASTEST"], "not a value of search_branching; use one of AUTOMATIC_SEARCH, FIXED_SEARCH"),
        (["log_search_progress=maybe"], 'log_search_progress=maybe: Expected "true" or "false"'),
        (["num_workers=-3"], "--cpsat-param: CP-SAT refuses it: parameter 'num_workers' should be in [0,10000]"),
        (["linearization_level"], "--cpsat-param 'linearization_level': give KEY=VALUE"),
        (["num_workers=1", "num_workers=2"], "--cpsat-param num_workers is given twice; give it once"),
    ],
)
def test_a_bad_parameter_is_one_line_naming_it(items: list[str], message: str) -> None:
    with pytest.raises(OptionError) as error:
        cpsat_parameters(parse_pairs(items, label="--cpsat-param"), label="--cpsat-param")
    assert message in str(error.value) and "\n" not in str(error.value)


def test_checking_parameters_leaves_ctrl_c_to_python() -> None:
    cpsat_parameters({"linearization_level": "2"})  # CP-SAT runs here, in this process
    with pytest.raises(KeyboardInterrupt):
        signal.raise_signal(signal.SIGINT)  # CP-SAT's own handler would have left SIGINT ending the process
        time.sleep(1)
