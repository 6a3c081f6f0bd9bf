"""The one table from a key below the command line to its flag (`commands.flags`), and the messages
a command shows with it."""

from __future__ import annotations

import dataclasses
import inspect

import click

from pipesat.cli import cli
from pipesat.commands.flags import FLAGS, with_flags
from pipesat.models import limits
from pipesat.solver.instances.description import Hardware, Pipeline, Training, Transformer
from pipesat.solver.instances.from_options import build_instance
from pipesat.solver.instances.keys import keys
from pipesat.solver.io.output_file import check_outputs
from pipesat.solver.plan.executors import make_executor
from pipesat.solver.plan.space import PlanLimits
from pipesat.solver.plan.spec import Cluster, PlanSpec
from pipesat.solver.solve import solve
from pipesat.solver.torch.profile_spec import ProfileSpec
from tests.cli_helpers import cli_error, run_cli, subcommands

SECTIONS = {
    "model": (Transformer,),
    "training": (Training, PlanSpec),
    "hardware": (Hardware,),
    "pipeline": (Pipeline,),
    "cluster": (Cluster,),
}
"""The records whose keys a dotted key names: the plan spec's sections and `from-model`'s description."""
PARAMETERS = {
    *inspect.signature(build_instance).parameters,
    *(field.name for field in dataclasses.fields(ProfileSpec)),
    *(field.name for field in dataclasses.fields(PlanLimits)),
    *inspect.signature(solve).parameters,
    *inspect.signature(check_outputs).parameters,
    *inspect.signature(make_executor).parameters,
}
"""The names a bare key may have: an instance option's, a profile's, a plan cap's, a parameter of the API."""


def _every_flag(command: click.Command) -> set[str]:
    """The flags of a command and of every command under it."""
    flags = {flag for param in command.params if isinstance(param, click.Option) for flag in param.opts}
    for sub in subcommands(command).values() if isinstance(command, click.Group) else ():
        flags |= _every_flag(sub)
    return flags


def test_every_key_of_the_table_is_a_key_below_the_command_line() -> None:
    for key in FLAGS:
        section, dot, name = key.rpartition(".")
        if dot:
            assert any(name in keys(record) for record in SECTIONS[section]), key
        else:
            assert name in PARAMETERS or callable(getattr(limits, name, None)), key


def test_every_flag_of_the_table_is_an_option_of_some_command() -> None:
    flags = _every_flag(cli)
    for key, shown in FLAGS.items():
        assert set(shown.split("/")) <= flags, f"{key}: {shown}"


def test_a_key_is_its_flag_where_the_command_takes_it() -> None:
    message = "ZeRO 1 shards over data parallelism; give training.data_parallel 2 or more, or `training.zero` 0"
    shown = "ZeRO 1 shards over data parallelism; give --data-parallel 2 or more, or `training.zero` 0"
    assert with_flags(message, {"--data-parallel"}, set()) == shown
    assert with_flags("give `num_devices` 4", {"--num-stages"}, set()) == "give --num-stages/-s 4"
    assert with_flags("an `unknown` key, `chunks: 2`", {"--chunks"}, set()) == "an `unknown` key, `chunks: 2`"


def test_the_key_a_message_is_about_is_its_flag_only_where_the_user_gave_it() -> None:
    message = "cluster.gpus 9 is more than 8; see spec.cluster.gpus, or raise `max_gpus`"
    kept = "cluster.gpus 9 is more than 8; see spec.cluster.gpus, or raise --max-gpus"
    assert with_flags(message, {"--gpus", "--max-gpus"}, set()) == kept
    assert with_flags(message, {"--gpus", "--max-gpus"}, {"--gpus"}) == kept.replace("cluster.gpus 9", "--gpus 9")
    in_a_file = "plan.yaml: cluster.gpus must be at least 1, got 0"
    assert with_flags(in_a_file, {"--gpus"}, set()) == in_a_file
    assert (
        with_flags("`num_devices` must be at least 1", set(), {"--num-stages"}) == "--num-stages/-s must be at least 1"
    )


def test_the_command_line_says_the_flag_where_the_api_says_the_key() -> None:
    with_flag = cli_error(run_cli("--max-ops", "5", "solve", "-s", "2", "-b", "2"))
    assert with_flag.endswith("check the sizes, or raise the limit with --max-ops")
    given = cli_error(run_cli("solve", "-s", "0", "-b", "2"))
    assert given == "error: --num-stages/-s must be at least 1, got 0"
