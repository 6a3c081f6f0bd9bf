"""CP-SAT's own parameters for experts (`solve(cpsat_params=...)`, KEY=VALUE on the command line).

Each KEY is a field of CP-SAT's `SatParameters` and each VALUE its value as protobuf's text format
writes it: a number, `true`/`false`, an enum value's name (`search_branching=FIXED_SEARCH`), a string
without quotes (`extra_subsolvers=max_lp`), and for a repeated field several values separated by
commas. They are parsed by protobuf itself, so every field CP-SAT has is served, and checked by CP-SAT
(it refuses values out of range on an empty model, in milliseconds) before any work, each bad one
with one line that names it. The search applies them after pipesat's own settings, so they win.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from google.protobuf import text_encoding, text_format  # type: ignore[attr-defined]  # types-protobuf lacks text_encoding
from google.protobuf.descriptor import FieldDescriptor
from ortools.sat import sat_parameters_pb2
from ortools.sat.python import cp_model

from pipesat.models import OptionError
from pipesat.models.errors import closest

SatParameters = sat_parameters_pb2.SatParameters
FIELDS = SatParameters.DESCRIPTOR.fields_by_name
LABEL = "CP-SAT parameter"


def cpsat_parameters(pairs: Mapping[str, str], label: str = LABEL) -> str:
    """The SatParameters that `pairs` (field name: value) set, in text format, checked by CP-SAT.

    Raises OptionError, its line starting with `label` (what the user wrote them as), naming the pair
    for an unknown field or a value that does not parse, and the parameter for one CP-SAT refuses.
    """
    if not pairs:
        return ""
    params = SatParameters()
    for key, value in pairs.items():
        field = FIELDS.get(key)
        if field is None:
            close = closest(key, FIELDS)
            hint = f"; did you mean {close}?" if close else " (see CP-SAT's sat_parameters.proto)"
            raise OptionError(f"{label} {key}={value}: CP-SAT has no parameter {key!r}{hint}")
        try:
            text_format.Merge(_text(field, value), params)
        except text_format.ParseError as error:
            raise OptionError(f"{label} {key}={value}: {_problem(field, error)}") from None
    text = text_format.MessageToString(params)
    _check(text, label)
    return text


def parse_pairs(items: Iterable[str], label: str = LABEL) -> dict[str, str]:
    """`KEY=VALUE` items as a mapping; a repeated field given several times gets its values joined by
    commas. Raises OptionError for an item without `=` and for a single-valued field given twice."""
    pairs: dict[str, str] = {}
    for item in items:
        key, equals, value = item.partition("=")
        key = key.strip()
        if not equals or not key:
            raise OptionError(f"{label} {item!r}: give KEY=VALUE, such as linearization_level=2")
        if key in pairs:
            field = FIELDS.get(key)
            if field is None or not field.is_repeated:
                raise OptionError(f"{label} {key} is given twice; give it once")
            value = f"{pairs[key]},{value}"
        pairs[key] = value
    return pairs


def _text(field: FieldDescriptor, value: str) -> str:
    """`key: value` lines for protobuf's parser: one per item of a repeated field, strings quoted."""
    if field.type == FieldDescriptor.TYPE_MESSAGE:
        return f"{field.name} {value}"  # a message in text format, `{ name: "fast" }`
    items = value.split(",") if field.is_repeated else [value]
    if field.type == FieldDescriptor.TYPE_STRING:
        items = ['"' + text_encoding.CEscape(item.strip(), as_utf8=True) + '"' for item in items]
    return "\n".join(f"{field.name}: {item.strip()}" for item in items)


def _problem(field: FieldDescriptor, error: text_format.ParseError) -> str:
    """What protobuf's parser found wrong, without its position; for an enum field, its values."""
    if field.enum_type is not None:
        return f"not a value of {field.name}; use one of {', '.join(value.name for value in field.enum_type.values)}"
    message = str(error).split(" : ", 1)[-1]
    return message.split("': ", 1)[-1]  # protobuf repeats the line parsed before a number's error


def _check(text: str, label: str) -> None:
    """Raise OptionError with CP-SAT's words when it refuses the parameters (it checks them first)."""
    solver = cp_model.CpSolver()
    solver.parameters.parse_text_format(text)
    solver.parameters.log_search_progress = False
    # CP-SAT catches SIGINT by default and leaves it at the default (ending the process) afterwards;
    # here, in pipesat's own process, Ctrl-C must stay Python's.
    solver.parameters.catch_sigint_signal = False
    if solver.solve(cp_model.CpModel()) == cp_model.MODEL_INVALID:
        raise OptionError(f"{label}: CP-SAT refuses it: {solver.solution_info()}")
