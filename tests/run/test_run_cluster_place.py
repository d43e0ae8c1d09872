"""Where `perfmodel run` puts each worker on a cluster of several nodes (no Ray needed): GPU types on the
nodes that carry them, cpu workers on nodes without GPUs, and a cluster that lacks a type refused."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from perfmodel.errors import InputError
from perfmodel.run.cluster import place


def node(node_id: str, **resources) -> dict:
    return {"NodeID": node_id, "Alive": True, "Resources": resources}


FLEET = [
    node("gpu-a", CPU=8, GPU=2, h100=2),
    node("gpu-b", CPU=8, GPU=4, **{"accelerator_type:A100": 1}),
    node("cpus", CPU=4),
]


def test_each_type_goes_to_the_nodes_that_carry_it():
    placed = place(["h100", "h100", "a100", "cpu", "cpu"], "cuda", FLEET)
    assert [p.node_id for p in placed] == ["gpu-a", "gpu-a", "gpu-b", "cpus", "cpus"]
    assert [p.by for p in placed] == ["resource", "resource", "label", "cpu", "cpu"]
    assert placed[0].reservation.resources == {"h100": 1} and placed[0].reservation.num_gpus == 1
    assert placed[3].reservation.num_gpus == 0 and placed[3].reservation.resources == {}


def test_cpu_workers_use_gpu_nodes_only_when_the_cpu_nodes_are_full():
    placed = place(["cpu"] * 6, "cpu", FLEET)
    assert [p.node_id for p in placed] == ["cpus"] * 4 + ["gpu-a"] * 2


def test_a_dead_node_counts_for_nothing():
    fleet = [{**FLEET[0], "Alive": False}, *FLEET[1:]]
    with pytest.raises(InputError, match=r"^the plan needs 1 h100 GPU\(s\) but the Ray cluster has 0 "):
        place(["h100", "cpu"], "cuda", fleet)


def test_a_cluster_without_a_planned_type_is_refused_in_one_sentence():
    with pytest.raises(InputError) as refused:
        place(["h100", "h100", "h100", "l4"], "cuda", FLEET)
    text = str(refused.value)
    assert text.startswith("the plan needs 3 h100 GPU(s) but the Ray cluster has 2") and "\n" not in text
    assert text.count(". ") == 0 and text.endswith(".")


def test_a_dry_run_on_cpus_still_places_by_type():
    dry = [node("n1", CPU=2, h100=1), node("n2", CPU=2, a100=1), node("n3", CPU=2)]
    placed = place(["h100", "a100", "cpu"], "cpu", dry)
    assert [p.node_id for p in placed] == ["n1", "n2", "n3"]
    assert [p.reservation.num_gpus for p in placed] == [0, 0, 0]
    with pytest.raises(InputError, match="needs 2 h100"):  # one node carries one h100
        place(["h100", "h100"], "cpu", dry)


@given(
    st.lists(
        st.tuples(st.integers(0, 4), st.integers(0, 3), st.sampled_from(["h100", "a100", None])), min_size=1, max_size=5
    ),
    st.lists(st.sampled_from(["h100", "a100", "cpu"]), min_size=1, max_size=8),
)
def test_a_placement_never_overbooks_a_node(nodes, hardware):
    fleet = [node(f"n{i}", CPU=c, GPU=g, **({t: g} if t else {})) for i, (c, g, t) in enumerate(nodes)]
    try:
        placed = place(hardware, "cuda", fleet)
    except InputError:
        return
    for n in fleet:
        here = [(h, p) for h, p in zip(hardware, placed) if p.node_id == n["NodeID"]]
        r = n["Resources"]
        assert len(here) <= r["CPU"] and sum(p.reservation.num_gpus for _, p in here) <= r["GPU"]
        for h, _ in here:
            assert h == "cpu" or r.get(h, 0) >= 1  # a GPU worker only where its type is


def test_a_dry_run_refuses_a_type_that_a_typed_cluster_lacks():
    with pytest.raises(InputError, match="needs 1 l4 GPU"):
        place(["l4"], "cpu", [node("n1", CPU=2, h100=1), node("n2", CPU=2)])
    assert place(["l4"], "cpu", [node("n1", CPU=2, **{"node:127.0.0.1": 1, "memory": 9})])[0].by == "any"
