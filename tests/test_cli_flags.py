"""One meaning per flag across the whole command line, one progress line, one error printer.

A walk over every click command and subcommand checks each flag, long and short, against FLAGS, the
declared meaning of each flag that more than one command takes (and of the output and format flags
wherever they appear): the kind of value (a file, a folder, a number, a choice from one vocabulary,
an on/off flag), words its help must say, and the same aliases everywhere. So a new command that
reuses `--save` for a folder, `-o` for anything but a picture, or `--format` with a word of its own
fails here; a flag new to two commands must be declared here first."""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import click
import pytest

from pipesat.cli import cli
from pipesat.commands.frame import echo_error
from pipesat.commands.options import FILE, FORMAT_WORDS
from pipesat.commands.progress import ProgressLine, live_progress
from pipesat.commands.values import TimeWindow
from pipesat.solver.instances.gpus import GPU_NAMES
from tests.cli_helpers import cli_error, cli_ok, run_cli, subcommands
from tests.conftest import ROOT


@dataclass(frozen=True)
class Meaning:
    """What a flag means: the kinds of value it takes, a pattern its help matches, and for a choice the
    vocabulary its words come from (a command may offer fewer of them)."""

    kinds: tuple[str, ...]
    help: str
    choices: frozenset[str] | None = None


def meaning(kinds: str | tuple[str, ...], help_pattern: str, choices: Iterable[str] | None = None) -> Meaning:
    kinds = (kinds,) if isinstance(kinds, str) else kinds
    return Meaning(kinds, help_pattern, None if choices is None else frozenset(choices))


PICTURE = meaning("file", r"^Picture file \(\.png, \.svg, \.pdf\)")
DEVICES = meaning("int", r"^Number of devices")
MICROBATCHES = meaning("int", r"^Number of microbatches")
PROGRESS = meaning("flag", r"progress line")

FLAGS: dict[str, Meaning] = {
    # The files a command writes: --save* a data file (or a folder of them), -o a picture.
    "--save": meaning("file", r"^Write the schedule file \(JSON\)"),
    "--save-dir": meaning("folder", r"^Folder to write every schedule file into"),
    "--save-best": meaning("file", r"^Write the best configuration's schedule file"),
    "--save-instance": meaning("file", r"^Write the instance file"),
    "-o": PICTURE,
    "--output": PICTURE,
    "--no-visualization": meaning("flag", r"^Do not draw the picture"),
    "--force": meaning("flag", r"^Replace output files you named"),
    # What a command prints.
    "--format": meaning("choice", r"^What to print: text, for people; json, ", FORMAT_WORDS),
    "--ascii": meaning("flag", r"as text"),
    "--window": meaning("window", r"^Draw only this time range"),
    "--progress": PROGRESS,
    "--no-progress": PROGRESS,
    "-h": meaning("flag", r"^Show this message"),
    "--help": meaning("flag", r"^Show this message"),
    # The search: --workers is always the CP-SAT workers of one solve, --jobs solves at a time.
    "--workers": meaning("int", r"^CP-SAT search workers"),
    "--jobs": meaning("int", r"^Solves at a time"),
    "--max-layers": meaning("int", r"^Refuse a (plan|model) of more layers"),
    "--seed": meaning("int", r"^CP-SAT random seed"),
    "--time-limit": meaning("number", r"^Seconds CP-SAT may search"),
    "--time-budget": meaning("number", r"^Seconds for the whole (plan|study)"),
    "--deterministic": meaning("flag", r"^The same schedule for the same seed"),
    "--objective": meaning("choice", r"^makespan .* or span", ["makespan", "span"]),
    "-v": meaning("flag", r"^Log to standard error"),
    "--log": meaning("flag", r"^Log to standard error"),
    "--cpsat-param": meaning("text, repeatable", r"^For experts: set a field of CP-SAT's SatParameters"),
    "--tuning": meaning("file", r"^For experts: pipesat's own search and bound settings"),
    # The instance, as the earlier tool's options named it.
    "-c": meaning("file", r"^Instance file"),
    "--config": meaning("file", r"^Instance file"),
    "-s": DEVICES,
    "--num-stages": DEVICES,
    "--num-devices": DEVICES,
    "-b": MICROBATCHES,
    "--num-batches": MICROBATCHES,
    "--num-microbatches": MICROBATCHES,
    "-f": meaning("text", r"^Forward time"),
    "--forward-times": meaning("text", r"^Forward time"),
    "-bw": meaning("text", r"^Backward time"),
    "--backward-times": meaning("text", r"^Backward time"),
    "-w": meaning("text", r"^Weight-gradient time"),
    "--weight-times": meaning("text", r"^Weight-gradient time"),
    "--p2p-time": meaning("number", r"^Point-to-point"),
    "--chunks": meaning("int", r"^Stages (\(chunks\) )?per device"),
    "--placement": meaning("text", r"^linear, interleaved"),
    "--memory-limit": meaning("text", r"memory each device may hold"),
    # An instance's (instance units, or 25GB/s) or a model's hardware (from-model: GB/s).
    "--host-link-bandwidth": meaning(("text", "number"), r"^Host link of each device"),
    "--host-link": meaning("flag", r"^Give each device a host link"),
    "--offload-fraction": meaning("number", r"^Part of a stage's activations"),
    "--offload": meaning("flag", r"^Let CP-SAT offload activations"),
    "--explain": meaning("flag", r"^Print how every number"),
    # The model, its training and the hardware (instance from-model, profile, plan), read off one
    # declaration of keys (`solver.instances.keys`): loose words, as those helps are the keys' own.
    "--layers": meaning("int", r"(?i)layers"),
    "--hidden": meaning("int", r"(?i)hidden size"),
    "--heads": meaning("int", r"(?i)attention .*heads"),
    "--kv-heads": meaning("int", r"(?i)key/value heads"),
    "--ffn-hidden": meaning("int", r"(?i)MLP width"),
    "--seq-len": meaning("int", r"(?i)sequence length"),
    "--microbatch-size": meaning("int", r"(?i)sequences per microbatch"),
    "-p": meaning("int", r"(?i)pipeline devices"),
    "--devices": meaning("int", r"(?i)pipeline devices"),
    "-m": meaning("int", r"(?i)microbatches .*per iteration"),
    "--microbatches": meaning("int", r"(?i)microbatches .*per iteration"),
    "--name": meaning("text", r"(?i)instance('s)? name"),
    "--vocab": meaning("int", r"(?i)vocabulary"),
    "--tflops": meaning("number", r"(?i)peak throughput of one GPU"),
    "--efficiency": meaning("number", r"(?i)fraction of peak"),
    "--bandwidth": meaning("number", r"(?i)link"),
    "--latency": meaning("number", r"(?i)latency"),
    "--gpu-memory": meaning(("text", "amount"), r"(?i)one GPU's memory|memory of one GPU"),
    "--gpu": meaning("choice", r"(?i)a GPU of the catalogue", GPU_NAMES),
    # One tensor-parallel degree t (GPUs per pipeline device); plan takes the degrees to try.
    "--tensor-parallel": meaning(("int", "ints", "text"), r"(?i)tensor-parallel|GPUs t per pipeline device"),
    "--microbatch-sizes": meaning("ints", r"(?i)microbatch sizes b to try"),
    # One expert-parallel degree EP (instance from-model); plan takes the degrees to try.
    "--expert-parallel": meaning(("int", "ints", "text"), r"(?i)expert-parallel degrees|GPUs EP"),
    # Measuring (profile, calibrate) and using a measurement (plan, instance from-model).
    "--repeats": meaning("int", r"^Samples per round"),
    "--device": meaning("choice", r"^Where to measure", ["cpu", "cuda"]),
    "--dtype": meaning("choice", r"^What the model runs in", ["bf16", "fp16", "fp32"]),
    "--save-calibration": meaning("file", r"^Write the calibration file"),
    "--calibration": meaning("file", r"^Calibration file"),
}


def commands(
    command: click.Command, path: str = "pipesat", parent: click.Context | None = None
) -> Iterator[tuple[str, click.Command, click.Context]]:
    """Every command and group under `command`, with its command line and a context as it runs in (the
    help option's names come from the root's context settings)."""
    ctx = click.Context(command, parent=parent, info_name=path.rsplit(" ", 1)[-1], **command.context_settings)
    yield path, command, ctx
    if isinstance(command, click.Group):
        for name, sub in sorted(subcommands(command).items()):
            yield from commands(sub, f"{path} {name}", ctx)


def options_of(command: click.Command, ctx: click.Context) -> list[click.Option]:
    return [param for param in command.get_params(ctx) if isinstance(param, click.Option)]


def kind_of(option: click.Option) -> str:
    """The kind of value an option takes, in the words of FLAGS."""
    kind = option.type
    if option.is_flag:
        return "flag"
    if option.multiple:
        return f"{kind_of(click.Option(option.opts, type=kind))}, repeatable"
    if isinstance(kind, click.Path):
        return "file" if not kind.dir_okay else "folder" if not kind.file_okay else "path"
    if isinstance(kind, click.Choice):
        return "choice"
    if isinstance(kind, click.types.IntParamType):
        return "int"
    if isinstance(kind, click.types.FloatParamType):
        return "number"
    if isinstance(kind, TimeWindow):
        return "window"
    if isinstance(kind, click.types.StringParamType):
        return "text"
    declared = getattr(kind, "declared", None)  # an option read off a key (`commands.keys.KeyType`): its key's kind
    if declared is not None:
        for base in type(declared.kind).__mro__:
            if base.__name__ in KEY_KINDS:
                return KEY_KINDS[base.__name__]
    return type(kind).__name__


# The kinds of `solver.instances.keys`, in the words of FLAGS.
KEY_KINDS = {
    "Whole": "int",
    "Number": "number",
    "Text": "text",
    "Amount": "amount",
    "Wholes": "ints",
    "Flag": "flag",
    "Word": "choice",
}


def flag_problems(root: click.Command) -> list[str]:
    """Every way the commands under `root` give one flag two meanings, one line each."""
    uses: dict[str, list[tuple[str, click.Option]]] = defaultdict(list)
    for path, command, ctx in commands(root):
        for option in options_of(command, ctx):
            for flag in option.opts + option.secondary_opts:
                uses[flag].append((path, option))
    problems = []
    for flag, where in sorted(uses.items()):
        names = {tuple(sorted(option.opts + option.secondary_opts)) for _, option in where}
        if len(names) > 1:
            problems.append(f"{flag} comes with different names: {sorted(names)}")
        declared = FLAGS.get(flag)
        if declared is None:
            if len(where) > 1:
                users = ", ".join(path for path, _ in where)
                problems.append(f"{flag} is taken by {users}: declare its one meaning in FLAGS")
            continue
        for path, option in where:
            kind = kind_of(option)
            if kind not in declared.kinds:
                problems.append(f"{path} {flag} takes a {kind}; {flag} is a {' or '.join(declared.kinds)}")
            if not re.search(declared.help, option.help or ""):
                problems.append(f"{path} {flag}: its help {option.help!r} does not say {declared.help!r}")
            if declared.choices is not None and isinstance(option.type, click.Choice):
                words = set(option.type.choices) - declared.choices
                if words:
                    problems.append(f"{path} {flag} offers {sorted(words)}, outside {sorted(declared.choices)}")
    return problems


def test_every_flag_has_one_meaning_across_all_commands() -> None:
    assert flag_problems(cli) == []


def test_every_declared_flag_is_taken_by_some_command() -> None:
    taken = {
        flag
        for _, command, ctx in commands(cli)
        for option in options_of(command, ctx)
        for flag in option.opts + option.secondary_opts
    }
    assert set(FLAGS) - taken == set()


def test_a_flag_reused_with_another_meaning_is_found() -> None:
    group = click.Group("pipesat")
    group.add_command(
        click.Command(
            "fine",
            params=[
                click.Option(["--save"], type=FILE, help="Write the schedule file (JSON)."),
                click.Option(["-o", "--output"], type=FILE, help="Picture file (.png, .svg, .pdf)."),
            ],
        )
    )
    group.add_command(
        click.Command(
            "new",
            params=[
                click.Option(["--save"], type=click.Path(file_okay=False), help="Folder to write schedules into."),
                click.Option(["-o"], type=FILE, help="Instance file to write."),
                click.Option(["--format"], type=click.Choice(["table", "json"]), help="What to print: rows."),
                click.Option(["--shared"], type=int),
            ],
        )
    )
    group.add_command(click.Command("other", params=[click.Option(["--shared"], type=int)]))
    problems = "\n".join(flag_problems(group))
    assert "pipesat new --save takes a folder; --save is a file" in problems
    assert "pipesat new -o: its help 'Instance file to write.' does not say" in problems
    assert "-o comes with different names" in problems
    assert "pipesat new --format offers ['table'], outside" in problems
    assert "--shared is taken by pipesat new, pipesat other: declare its one meaning in FLAGS" in problems


def test_format_is_one_vocabulary_and_table_still_means_text() -> None:
    args = ["-s", 2, "-b", 2, "--no-solve"]
    assert cli_ok(run_cli("compare", *args, "--format", "table")) == cli_ok(run_cli("compare", *args))
    assert cli_ok(run_cli("compare", *args, "--format", "text")) == cli_ok(run_cli("compare", *args))
    line = cli_error(run_cli("schedule", "1f1b", "-s", 2, "-b", 2, "--format", "csv"))
    assert "'csv' is not one of 'text', 'json'" in line


def test_plan_runs_jobs_solves_at_once_of_workers_each() -> None:
    assert "--cpsat-workers" in cli_error(run_cli("plan", "spec.yaml", "--cpsat-workers", 1))
    assert "--jobs" in cli_error(run_cli("plan", "spec.yaml", "--jobs", 0))
    assert "--workers" in cli_error(run_cli("plan", "spec.yaml", "--workers", 0))


def test_the_instance_file_is_written_with_save_instance(tmp_path: Path) -> None:
    model = ["--layers", 4, "--hidden", 64, "--heads", 4, "--seq-len", 32, "-p", 2, "-m", 4, "--tflops", 100]
    path = tmp_path / "made.yaml"
    assert f"wrote {path}" in cli_ok(run_cli("instance", "from-model", *model, "--save-instance", path))
    assert "No such option" in cli_error(run_cli("instance", "from-model", *model, "-o", path))


def test_the_progress_line_fits_the_terminal_and_is_rewritten_in_place(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("COLUMNS", "30")
    line = ProgressLine(enabled=True)
    line.show("plan [####------] solving 2/5, best 548.4 ms, 12 s, about 40 s left")
    line(12.5, 41.0, 40.0)
    line.show("short")
    line.clear()
    written = capsys.readouterr().err
    shown = written.split("\r")[1:]
    assert all(len(text) <= 29 for text in shown)  # one column left free: a full line wraps on some terminals
    assert shown[0] == "plan [####------] solving 2/5"
    assert shown[2] == "short".ljust(29)  # the longer line before it is blanked out
    assert written.endswith("\r" + " " * 5 + "\r")  # cleared at the end
    ProgressLine(enabled=False).show("nothing")
    assert capsys.readouterr().err == ""


def test_the_progress_line_is_off_unless_stderr_is_a_terminal_or_asked() -> None:
    with live_progress(None) as line:  # pytest's stderr is not a terminal
        assert not line.enabled
    with live_progress(True) as line:
        assert line.enabled


def test_one_error_printer(capsys: pytest.CaptureFixture[str]) -> None:
    echo_error("no schedule fits\n  raise --memory-limit")
    assert capsys.readouterr().err == "error: no schedule fits raise --memory-limit\n"
    for path in [ROOT / "cli.py", *sorted(ROOT.joinpath("commands").glob("*.py"))]:
        source = path.read_text()
        prints = source.count('"error: ') + source.count("'error: ")
        # interrupt.py writes its one line with os.write, before click and frame.py are imported
        assert prints == (1 if path.name in ("frame.py", "interrupt.py") else 0), path.name
