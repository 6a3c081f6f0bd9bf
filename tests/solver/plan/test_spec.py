from __future__ import annotations

from pathlib import Path

import pytest

from pipesat.models import InputError
from pipesat.solver.instances.collectives import Fabric
from pipesat.solver.plan.spec import PLACEMENTS_SEARCHED, load_spec, spec_from_dict
from tests.conftest import ROOT
from tests.solver.plan.conftest import TINY, tiny


def test_the_issue_example_reads_with_its_defaults() -> None:
    spec = load_spec(ROOT / "instances/plan/gpt-1.3b-16gpu.yaml")
    assert (spec.model.layers, spec.model.hidden, spec.model.heads, spec.model.seq_len) == (24, 2048, 16, 2048)
    # The catalogue's A100-40GB fills what the spec leaves out.
    assert spec.cluster.gpus == 16 and spec.cluster.gpu == "A100-40GB" and spec.cluster.gpu_memory == 40 * 2**30
    assert (spec.cluster.tflops, spec.cluster.memory_bandwidth, spec.cluster.efficiency) == (312, 1555, None)
    assert (spec.cluster.node_bandwidth, spec.cluster.bandwidth, spec.cluster.gpus_per_node) == (300, 25, 8)
    assert spec.global_batch == 64 and spec.tensor_parallel is None and spec.placements == PLACEMENTS_SEARCHED
    assert spec.sequence_parallel and not spec.training.sequence_parallel  # the plan's own default, on
    assert spec.cluster.reserve == pytest.approx(0.1)
    assert spec.tokens_per_iteration == 64 * 2048


def test_the_searched_lists_default_to_the_plans_own_and_a_word_is_a_list_of_one() -> None:
    spec = tiny()
    assert spec.recompute == ("none", "selective", "full") and spec.zero == (1,) and spec.context_parallel == (1,)
    assert spec.chunks is None and spec.pipeline_parallel is None
    assert spec.training.recompute == "none" and spec.training.zero == 0  # searched: the record's defaults
    given = tiny(training={"recompute": "full", "zero": [3, 0], "chunks": [4, 2], "pipeline_parallel": 2})
    assert (given.recompute, given.zero, given.chunks, given.pipeline_parallel) == (("full",), (0, 3), (2, 4), (2,))


def test_every_example_spec_reads() -> None:
    for path in sorted(ROOT.joinpath("instances/plan").glob("*.yaml")):
        assert load_spec(path).cluster.gpus >= 1


def test_overrides_replace_keys_and_are_checked(tmp_path: Path) -> None:
    spec = tiny()
    assert spec.cluster.gpus == 4
    data = {name: dict(keys) for name, keys in TINY.items()}
    changed = spec_from_dict(
        data, {"cluster.gpus": 8, "cluster.gpu_memory": "80GiB", "training.tensor_parallel": [1, 2]}
    )
    assert changed.cluster.gpus == 8 and changed.cluster.gpu_memory == 80 * 2**30
    assert changed.tensor_parallel == (1, 2)
    with pytest.raises(InputError, match=r"cluster\.gpus must be a whole number"):
        spec_from_dict(data, {"cluster.gpus": "many"})


@pytest.mark.parametrize(
    ("sections", "message"),
    [
        ({"model": {"layer": 3}}, r"unknown key model\.layer; did you mean 'layers'\? model takes layers, hidden"),
        (
            {"model": {"kv_head": 2}},
            r"unknown key model\.kv_head; did you mean 'kv_heads'\? model takes layers, hidden",
        ),
        ({"model": {"zzz": 3}}, r"unknown key model\.zzz; model takes layers, hidden"),
        ({"cluster": {"gpu_memory": "40"}}, r"cluster\.gpu_memory must be a positive amount with a unit"),
        ({"cluster": {"gpu_memory": "40Gb"}}, r"'Gb' is not a memory unit"),
        ({"cluster": {"efficiency": 2}}, r"cluster\.efficiency must be in \(0, 1\]"),
        ({"cluster": {"gpus": 0}}, r"cluster\.gpus must be at least 1"),
        ({"training": {"global_batch": 2.5}}, r"training\.global_batch must be a whole number"),
        ({"training": {"tensor_parallel": [0]}}, r"training\.tensor_parallel must be whole numbers of at least 1"),
        ({"training": {"placements": ["zigzag"]}}, r"training\.placements must be a list of placements"),
        (
            {"training": {"recompute": "most"}},
            r"training\.recompute must be a list of recomputation settings out of none, selective, full",
        ),
        ({"training": {"zero": [1, 4]}}, r"training\.zero must be in \[0, 3\] \(the ZeRO stages to try"),
        ({"training": {"chunks": [1]}}, r"training\.chunks must be whole numbers of at least 2"),
        ({"training": {"context_parallel": 0}}, r"training\.context_parallel must be whole numbers of at least 1"),
        ({"training": {"pipeline_parallel": [2.5]}}, r"training\.pipeline_parallel must be a whole number"),
        ({"training": {"seq_len": 1024}}, r"model\.seq_len 512 and training\.seq_len 1024 differ"),
        ({"cluster": {"reserve": "120%"}}, r"cluster\.reserve"),
    ],
)
def test_bad_keys_and_values_are_one_line_naming_the_key(sections: dict, message: str) -> None:
    with pytest.raises(InputError, match=message) as error:
        tiny(**sections)
    assert "\n" not in str(error.value)


def test_missing_keys_and_sections_are_named(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"training\.global_batch is missing"):
        spec_from_dict({"model": TINY["model"], "cluster": TINY["cluster"]})
    with pytest.raises(InputError, match="unknown section 'hardware'"):
        spec_from_dict({**TINY, "hardware": {}})
    path = tmp_path / "spec.yaml"
    path.write_text("- a list\n")
    with pytest.raises(InputError, match="holds the sections model, cluster and training"):
        load_spec(path)
    with pytest.raises(InputError, match="no such file"):
        load_spec(tmp_path / "missing.yaml")


def test_the_spec_gives_nics_a_node_and_defaults_them_to_one_a_gpu() -> None:
    assert tiny(cluster={"gpus_per_node": 4}).cluster.nics_per_node == 4
    cluster = tiny(cluster={"gpus_per_node": 8, "nics_per_node": 4, "bandwidth": 12.5}).cluster
    assert cluster.fabric() == Fabric(cluster.node_bandwidth, cluster.node_latency, 12.5, cluster.latency, 8, 4)
