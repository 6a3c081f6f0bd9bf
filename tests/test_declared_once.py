"""Each key of a training run's description is declared once, in its record (`solver.instances.keys`),
and the plan spec, the command-line options and the docs' key tables are that declaration: every key
shows up in each, with the record's default, range and help."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

import click
import pytest
from click.testing import CliRunner

from pipesat.cli import cli
from pipesat.commands.instances import instance
from pipesat.commands.keys import KeyType, key_options
from pipesat.commands.options import dataclass_from_options, options
from pipesat.commands.plan import OVERRIDES, plan_command
from pipesat.solver.instances.description import Hardware, Pipeline, Training, Transformer
from pipesat.solver.instances.keys import Key, Keyed, key, keys, option_name
from pipesat.solver.instances.value_kinds import WHOLE, Number, Whole, Wholes
from pipesat.solver.plan.spec import ALIASES, KEYS, SEARCHED, SECTIONS, Cluster, spec_from_dict
from tests.conftest import ROOT

FROM_MODEL = instance.commands["from-model"]
DESCRIPTION = (Transformer, Training, Hardware, Pipeline)
SMALLEST = [
    "--layers",
    "4",
    "--hidden",
    "64",
    "--heads",
    "4",
    "--seq-len",
    "32",
    "-p",
    "2",
    "-m",
    "4",
    "--tflops",
    "100",
]


def test_from_model_takes_every_key_of_the_description_with_its_help() -> None:
    params = {param.name: param for param in FROM_MODEL.params}
    for record in DESCRIPTION:
        for name, declared in keys(record).items():
            option = params[name]
            assert isinstance(option, click.Option)
            assert option_name(name) in option.opts and option.required == declared.required
            assert option.help == declared.help


def test_from_model_options_left_out_give_the_records_defaults() -> None:
    # The root's context settings: click keeps the help option a first context makes, and
    # test_cli_flags checks that every command's is the root's (-h, --help).
    given = FROM_MODEL.make_context("from-model", list(SMALLEST), **cli.context_settings).params
    made = [dataclass_from_options(record, given) for record in DESCRIPTION]
    assert made == [Transformer(4, 64, 4, 32), Training(), Hardware(100.0), Pipeline(2, 4)]


def test_the_spec_takes_every_key_the_plan_does_not_search_and_gives_the_records_defaults() -> None:
    for section, records in SECTIONS.items():
        for record in records:
            for name, declared in keys(record).items():
                assert KEYS[section].get(name) is declared or name in SEARCHED[record]
    spec = spec_from_dict(
        {
            "model": {"layers": 4, "hidden": 64, "heads": 4, "seq_len": 32},
            "cluster": {"gpus": 2, "gpu_memory": "1GiB", "tflops": 100},
            "training": {"global_batch": 4},
        }
    )
    assert (spec.model, spec.training) == (Transformer(4, 64, 4, 32), Training())
    assert spec.cluster == Cluster(2, 2**30, 100) and spec.cluster.node_bandwidth == Hardware(1).bandwidth


def test_plan_options_override_spec_keys_as_the_spec_checks_them() -> None:
    params = {param.name: param for param in plan_command.params}
    for dotted in OVERRIDES:
        section, name = dotted.split(".")
        option = params[name]
        assert isinstance(option.type, KeyType) and option.type.declared is KEYS[section][name]
        assert option.help == f"{KEYS[section][name].help} Overrides {dotted}."


@dataclass(frozen=True)
class Warmup(Keyed):
    steps: int = key(WHOLE, "Warm-up steps.", 3, at_least=0)


def test_a_key_added_to_a_record_is_an_option_with_its_default_range_and_help() -> None:
    @click.command()
    @options(*key_options(Warmup))
    def command(**given: int) -> None:
        click.echo(repr(dataclass_from_options(Warmup, given)))

    runner = CliRunner()
    assert runner.invoke(command, []).output == "Warmup(steps=3)\n"
    assert runner.invoke(command, ["--steps", "5"]).output == "Warmup(steps=5)\n"
    assert "must be at least 0, got -1" in str(runner.invoke(command, ["--steps", "-1"]).exception)
    assert "Warm-up steps.  [default: 3]" in runner.invoke(command, ["--help"]).output


def key_table(rows: Iterable[tuple[str, Key]], name: str = "key") -> list[str]:
    """The docs' table of keys: `name`, meaning, what it takes, its range, unit and default (left empty
    where it means none, as the help says, and as `--help` shows it)."""
    lines = [f"| {name} | meaning | value | range | unit | default |", "|---|---|---|---|---|---|"]
    for name, declared in rows:
        lines.append(
            f"| `{name}` | {declared.help} | {declared.kind.what} | {_range(declared)} | {declared.unit} "
            f"| {_default(declared)} |"
        )
    return lines


def _range(declared: Key) -> str:
    low, high = declared.above if declared.above is not None else declared.at_least, declared.at_most
    if high is not None:
        return f"{'(' if declared.above is not None else '['}{low:g}, {high:g}]"
    if low is None or not isinstance(declared.kind, Whole | Number | Wholes):
        return ""
    return f"{'>' if declared.above is not None else '≥'} {low:g}"


def _default(declared: Key) -> str:
    if declared.required:
        return "required"
    if declared.default_from:
        return f"as `{declared.default_from}`"
    shown = declared.default or isinstance(declared.default, bool)
    return f"`{declared.kind.text(declared.default)}`" if shown else ""


def _spec_rows() -> Iterable[tuple[str, Key]]:
    for section, names in KEYS.items():
        for name, declared in names.items():
            dotted = f"{section}.{name}"
            if dotted in ALIASES:
                declared = Key(declared.kind, f"Stands for `{ALIASES[dotted]}` (both given, they must agree).", None)
            yield dotted, declared


def _option_rows() -> Iterable[tuple[str, Key]]:
    for record in DESCRIPTION:
        for name, declared in keys(record).items():
            flag = option_name(name)
            if declared.short:
                flag = f"{declared.short}, {flag}"
            elif declared.default is True:
                flag = f"{flag}, --no-{flag[2:]}"
            yield flag, declared


@pytest.mark.parametrize(
    ("doc", "table"),
    [("docs/plan.md", key_table(_spec_rows())), ("docs/cost-model.md", key_table(_option_rows(), "option"))],
    ids=["plan spec keys", "from-model options"],
)
def test_the_docs_tables_of_keys_are_the_declarations(doc: str, table: list[str]) -> None:
    text = ROOT.joinpath(doc).read_text()
    found = re.search(r"<!-- keys: .*? -->\n((?:\|.*\n)+)", text)
    assert found is not None, f"{doc} has no <!-- keys: ... --> table"
    expected = "\n".join(table) + "\n"
    assert found.group(1) == expected, f"{doc}'s table of keys is not the declarations'; write it as:\n{expected}"
