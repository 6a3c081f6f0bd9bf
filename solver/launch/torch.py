"""The plain `torch.distributed.pipelining` launch: a short Python module with the parallel degrees
as a device mesh, the stages each pipeline rank holds and their layers, and a `build_schedule` that
loads the schedule CSV into torch's `_PipelineScheduleRuntime` (docs/runtimes/torch.md; the names are
those of docs/runtimes/torch-names.txt). Every schedule pipesat can export runs this way; without a
pipeline (p1) there is no schedule to load and the module holds the degrees alone.
"""

from __future__ import annotations

from pipesat.solver.launch.launch_input import LaunchInput
from pipesat.solver.launch.pipeline import csv_name, python_list, quoted, rank_stages, schedule_csv, stage_layers

MESH_DIMS = ("pp", "dp", "cp", "tp")
"""The device mesh's dimensions, outermost first: tensor parallelism within a node, the pipeline across."""


def write_torch(launch: LaunchInput) -> dict[str, str]:
    """The launch module and, with a pipeline, the schedule CSV it loads."""
    config, spec = launch.config, launch.spec
    shape = (config.pipeline, config.data_parallel, config.context_parallel, config.tensor_parallel)
    constants = [
        f"MESH_SHAPE = {shape}",
        f"MESH_DIMS = ({', '.join(quoted(list(MESH_DIMS)))})",
        f"MICROBATCHES = {config.microbatches}  # a data-parallel replica's, an iteration",
        f"MICROBATCH_SIZE = {config.microbatch_size}  # sequences of {spec.model.seq_len} tokens",
        f'RECOMPUTE = "{config.recompute_name}"  # activation recomputation',
        f"ZERO = {config.zero}  # ZeRO stage of the data-parallel replicas",
        f"EXPERT_PARALLEL = {config.expert_parallel}",
    ]
    imports = ["from torch.distributed.device_mesh import init_device_mesh"]
    files = {launch.launch_name: ""}  # the launch file first, its text once the rest is known
    build = ""
    if config.pipeline > 1:
        files[csv_name(launch.launch_name)] = schedule_csv(launch.schedule)
        imports = [
            "from pathlib import Path",
            "",
            *imports,
            "from torch.distributed.pipelining import PipelineStage",
            "from torch.distributed.pipelining.schedules import _PipelineScheduleRuntime",
        ]
        constants += [
            f'SCHEDULE_CSV = str(Path(__file__).with_name("{csv_name(launch.launch_name)}"))',
            f"NUM_STAGES = {launch.schedule.instance.num_stages}",
            "# the stages each pipeline rank holds",
            python_list([str(stages) for stages in rank_stages(launch.schedule)], prefix="RANK_STAGES = "),
            "# the transformer layers of each stage",
            python_list([str(layers) for layers in stage_layers(launch.schedule)], prefix="STAGE_LAYERS = "),
        ]
        build = _BUILD
    header = f'''"""torch.distributed.pipelining launch written by pipesat: {config.label}, schedule {launch.schedule_name}.

Run it under torchrun on {config.tensor_parallel * config.context_parallel * config.pipeline * config.data_parallel} GPUs.'''
    files[launch.launch_name] = (
        f'{header}\n"""\n\n{chr(10).join(imports)}\n\n{chr(10).join(constants)}\n\n\n{_MESH}{build}'
    )
    return files


_MESH = '''def build_mesh(device_type: str):
    """The device mesh of MESH_DIMS, one group per parallelism."""
    return init_device_mesh(device_type, MESH_SHAPE, mesh_dim_names=MESH_DIMS)
'''
_BUILD = '''

def build_schedule(mesh, stage_modules, device, loss_fn):
    """This pipeline rank's schedule: `stage_modules[s]` is the module of each stage s it holds
    (RANK_STAGES), holding that stage's STAGE_LAYERS layers; call its step() once an iteration."""
    pp = mesh["pp"]
    rank = pp.get_local_rank()
    stages = [PipelineStage(stage_modules[s], s, NUM_STAGES, device, group=pp.get_group()) for s in RANK_STAGES[rank]]
    schedule = _PipelineScheduleRuntime(stages, n_microbatches=MICROBATCHES, loss_fn=loss_fn)
    schedule._load_csv(SCHEDULE_CSV, format="compute_only")
    return schedule
'''
