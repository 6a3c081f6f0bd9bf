"""The flag of each key that a message below the command line names, and the message as a command
shows it.

`models` and `solver` speak to a Python caller and a spec's author, so a message names keys, not
flags: a description or spec key by its dotted name (`training.tensor_parallel`), an instance key or
a parameter of the Python API in backticks (`` `num_devices` ``, `` `time_limit` ``). The command line
says the flag in a key's place (`--tensor-parallel`) where the command that failed takes that flag
(`pipesat plan` takes `--tensor-parallel` but no `--zero`, so its messages keep `training.zero`,
which its spec gives). The key a message starts with, after a file's name (`cluster.gpus 4 is more
than ...`, `plan.yaml: model.layers must be ...`), is the value it is about: it becomes the flag only
where the user gave that flag, not a file.
"""

from __future__ import annotations

import re
from collections.abc import Collection

from pipesat.solver.instances.description import Hardware, Pipeline, Training, Transformer
from pipesat.solver.instances.keys import keys, option_name


def _record_flags(section: str, record: type) -> dict[str, str]:
    """`section.name` -> the option `key_options` makes for each key of `record` (its short one if any)."""
    return {f"{section}.{name}": declared.short or option_name(name) for name, declared in keys(record).items()}


FLAGS: dict[str, str] = {
    # The description `instance from-model` takes, a section per record (`from_model.Description`).
    **_record_flags("model", Transformer),
    **_record_flags("training", Training),
    **_record_flags("hardware", Hardware),
    **_record_flags("pipeline", Pipeline),
    # The plan's spec keys that `plan` and `calibrate` take as options (`plan.OVERRIDES`).
    "cluster.gpus": "--gpus",
    "cluster.gpu": "--gpu",
    "cluster.gpu_memory": "--gpu-memory",
    "cluster.gpus_per_node": "--gpus-per-node",
    "cluster.tflops": "--tflops",
    "cluster.efficiency": "--efficiency",
    "cluster.bandwidth": "--bandwidth",
    "cluster.latency": "--latency",
    "cluster.node_bandwidth": "--node-bandwidth",
    "training.global_batch": "--global-batch",
    "training.microbatch_sizes": "--microbatch-sizes",
    "training.current": "--current",
    # An instance's keys (`Instance.from_dict`) and its file, as the instance options give them.
    "num_devices": "--num-stages/-s",
    "num_microbatches": "--num-batches/-b",
    "forward_times": "--forward-times/-f",
    "backward_times": "--backward-times/-bw",
    "weight_times": "--weight-times/-w",
    "p2p_time": "--p2p-time",
    "chunks": "--chunks",
    "placement": "--placement",
    "memory_limit": "--memory-limit",
    "host_link_bandwidth": "--host-link-bandwidth",
    "offload_fraction": "--offload-fraction",
    "config": "--config",
    # What `profile` measures (`solver.torch.profile.ProfileSpec`).
    "layers": "--layers",
    "hidden": "--hidden",
    "seq_len": "--seq-len",
    "microbatch_size": "--microbatch-size",
    "devices": "-p",
    "device": "--device",
    "dtype": "--dtype",
    # The Python API's parameters: the caps on work (`models.limits`), a solve's (`solve`), the
    # output files' (`solver.io.output_file.check_outputs`), the plan's executor (`make_executor`)
    # and caps (`PlanLimits`).
    "max_ops": "--max-ops",
    "max_model_ops": "--max-model-ops",
    "max_input_mb": "--max-input-mb",
    "time_limit": "--time-limit",
    "offload": "--offload",
    "force": "--force",
    "address": "--ray-address",
    "parallel": "--jobs",
    "timeout": "--ray-timeout",
    "max_gpus": "--max-gpus",
    "max_global_batch": "--max-global-batch",
    "max_layers": "--max-layers",
    "max_configurations": "--max-configurations",
}
"""A key, as a message below the command line names it, -> the flag that gives it (the first of
`--num-stages/-s` is the one a command is asked for)."""

_MENTION = re.compile(r"`(?P<quoted>[a-z][a-z0-9_.]*)`|(?<![\w.`])(?P<dotted>[a-z]+\.[a-z0-9_]+)(?![\w`])")
"""A key in backticks, or a dotted one as it stands."""
_FILE = re.compile(r"\S+: ")
"""The file a message may start with (`plan.yaml: `)."""


def with_flags(message: str, taken: Collection[str], given: Collection[str]) -> str:
    """`message` with each key it names written as its flag where that flag is in `taken` (the flags
    of the command that failed); the key it starts with, the value it is about, only where the flag
    is in `given` (those the user gave). Every other word as it is."""
    prefix = _FILE.match(message)
    subject = prefix.end() if prefix is not None else 0

    def flag(mention: re.Match[str]) -> str:
        shown = FLAGS.get(mention["quoted"] or mention["dotted"])
        if shown is None or shown.split("/")[0] not in (given if mention.start() == subject else taken):
            return mention[0]
        return shown

    return _MENTION.sub(flag, message)
