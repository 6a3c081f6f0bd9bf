"""The keys that describe a training run: each kind read from a spec and from the command line, the
ranges and their one-line errors, records checked on construction, and keys declared from others."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import pytest

from pipesat.models import InstanceError
from pipesat.solver.instances.description import Hardware
from pipesat.solver.instances.keys import Key, Keyed, key, keys, like
from pipesat.solver.instances.value_kinds import AMOUNT, NUMBER, SHARE, WHOLE, Wholes, Word, Words


@pytest.mark.parametrize(
    ("declared", "written", "held"),
    [
        (Key(WHOLE, "", at_least=1), 3, 3),
        (Key(NUMBER, "", above=0), 2, 2.0),
        (Key(AMOUNT, ""), "80GiB", 80 * 2**30),
        (Key(SHARE, ""), "10%", 0.1),
        (Key(SHARE, ""), "6GiB", 6 * 2**30),
        (Key(Word(("none", "full")), ""), "full", "full"),
        (Key(Wholes(distinct=True), "", at_least=1), [4, 1, 4], (1, 4)),
        (Key(Wholes(), ""), 2, (2,)),
        (Key(Words(("linear", "vshape"), "placements"), ""), ["vshape", "linear"], ("linear", "vshape")),
    ],
)
def test_a_spec_value_is_read_as_its_record_holds_it(declared: Key, written: object, held: object) -> None:
    assert declared.read(written, "k") == held


@pytest.mark.parametrize(
    ("declared", "text", "written"),
    [
        (Key(WHOLE, ""), "3", 3),
        (Key(NUMBER, ""), "0.5", 0.5),
        (Key(AMOUNT, ""), "40GiB", "40GiB"),
        (Key(Wholes(), ""), "2,3 3", [2, 3, 3]),
    ],
)
def test_command_line_text_is_read_as_a_spec_would_hold_it(declared: Key, text: str, written: object) -> None:
    assert declared.parse(text, "--k") == written


@pytest.mark.parametrize(
    ("declared", "value", "message"),
    [
        (Key(WHOLE, "", at_least=1), 0, "k must be at least 1, got 0"),
        (Key(WHOLE, ""), 2.5, "k must be a whole number, got 2.5"),
        (Key(WHOLE, ""), True, "k must be a whole number, got True"),
        (Key(NUMBER, "", above=0), 0, "k must be a positive number, got 0"),
        (Key(NUMBER, "", at_least=0), -1.5, "k must be a non-negative number, got -1.5"),
        (
            Key(NUMBER, "The fraction reached.", above=0, at_most=1),
            2,
            "k must be in (0, 1] (the fraction reached), got 2",
        ),
        (Key(NUMBER, ""), "fast", "k must be a number, got 'fast'"),
        (Key(AMOUNT, ""), "40", "k must be a positive amount with a unit, such as 80GiB, got '40'"),
        (Key(AMOUNT, ""), "0GiB", "k must be a positive amount with a unit, such as 80GiB, got '0GiB'"),
        (Key(AMOUNT, ""), "40 gigs", "k '40 gigs': 'gigs' is not a memory unit"),
        (Key(SHARE, ""), "100%", "k must be a percentage of the GPU below 100 (10%) or an amount (6GiB), got '100%'"),
        (Key(Word(("none", "full")), ""), "some", "k must be one of none, full, got 'some'"),
        (Key(Wholes(), "", at_least=1), [1, 0], "k must be whole numbers of at least 1, got [1, 0]"),
        (Key(Wholes(), ""), [], "k must be a whole number or a list of them, such as [1, 2], got []"),
    ],
)
def test_a_bad_value_is_one_line_naming_the_key(declared: Key, value: object, message: str) -> None:
    with pytest.raises(InstanceError) as error:
        declared.read(value, "k")
    assert str(error.value).startswith(message)


def test_bad_command_line_text_names_the_option() -> None:
    with pytest.raises(InstanceError, match=r"^--k must be whole numbers separated by commas, such as 1,2, got '1,x'$"):
        Key(Wholes(), "").parse("1,x", "--k")
    with pytest.raises(InstanceError, match=r"^--k must be at least 1, got 0$"):
        Key(WHOLE, "", at_least=1).parse("0", "--k")


@dataclass(frozen=True)
class Link(Keyed):
    bandwidth: float = key(NUMBER, "Across.", 50.0, unit="GB/s", above=0)
    inner: float = key(NUMBER, "Within.", unit="GB/s", above=0, default_from="bandwidth")
    tflops: float = like(Hardware, "tflops", default=100.0)


def test_a_record_checks_its_keys_when_made_and_fills_keys_from_others() -> None:
    assert Link() == Link(50.0, 50.0, 100.0)
    assert Link(bandwidth=20).inner == 20 and Link(inner=400).inner == 400
    with pytest.raises(InstanceError, match=r"^inner must be a positive number, got 0$"):
        Link(inner=0)
    with pytest.raises(InstanceError, match=r"^tflops must be a positive number, got -1$"):
        dataclasses.replace(Link(), tflops=-1)


def test_a_key_declared_like_another_keeps_its_kind_range_and_unit() -> None:
    tflops, hardware = keys(Link)["tflops"], keys(Hardware)["tflops"]
    assert (tflops.kind, tflops.above, tflops.unit, tflops.help) == (hardware.kind, 0, "TFLOP/s", hardware.help)
    assert tflops.default == 100.0 and hardware.default is None  # a gpu may give it


@pytest.mark.parametrize(
    ("declared", "value", "text"),
    [
        (Key(WHOLE, "", short="-p"), 4, "-p 4"),
        (Key(NUMBER, ""), 0.45, "--k 0.45"),
        (Key(AMOUNT, ""), 80 * 2**30, "--k 80GiB"),
        (Key(AMOUNT, ""), 1.5 * 2**20, "--k 1.5MiB"),
        (Key(SHARE, ""), 0.1, "--k 10%"),
        (Key(Wholes(), ""), (2, 3), "--k 2,3"),
    ],
)
def test_a_value_is_written_as_its_option_takes_it(declared: Key, value: object, text: str) -> None:
    assert declared.option_text("k", value) == text
    assert declared.read(declared.parse(text.split()[1], "--k"), "--k") == value
