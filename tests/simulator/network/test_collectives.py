"""Collective algorithm modules: α-β formulas on hand-checkable links, and who supports what."""

from __future__ import annotations

from dataclasses import replace

import pytest

from lumos.hwconfigs import load_system
from lumos.hwconfigs.schema import EfficiencyPoint, LinkSpec
from lumos.simulator.network.collectives import (
    ALGORITHMS,
    Kind,
    direct,
    hierarchical,
    nvls,
    ring,
    tree,
)
from lumos.simulator.network.nccl import GroupShape, Topology

FLAT = (EfficiencyPoint(1, 1.0),)


def _topology(nvls_link: bool = True) -> Topology:
    """H100 system with efficiency 1 and round numbers, so formulas can be checked by hand."""
    system = load_system("h100")
    node = replace(
        system.node,
        nvlink=LinkSpec(400.0, 1000.0, FLAT),
        nvls=LinkSpec(400.0, 2000.0, FLAT) if nvls_link else None,
        collective_launch_ns=0.0,
    )
    fabric = replace(system.fabric, nic=LinkSpec(50.0, 5000.0, FLAT))
    return Topology(replace(system, node=node, fabric=fabric))


def test_registry_names() -> None:
    assert set(ALGORITHMS) == {"ring", "tree", "nvls", "direct", "hierarchical"}


def test_ring_formulas_in_node() -> None:
    topo = _topology()
    shape = topo.shape(range(8))
    s = 8 << 20
    assert ring.time_ns(Kind.ALL_REDUCE, s, shape, topo) == pytest.approx(14 * (1000 + s / 8 / 400))
    assert ring.time_ns(Kind.REDUCE_SCATTER, s, shape, topo) == pytest.approx(
        7 * (1000 + s / 8 / 400)
    )
    assert ring.time_ns(Kind.ALL_GATHER, s // 8, shape, topo) == pytest.approx(
        7 * (1000 + s / 8 / 400)
    )


def test_ring_across_nodes_uses_rails() -> None:
    topo = _topology()
    s = 16 << 20
    full = topo.shape(range(16))  # 8 GPUs per node -> 8 rails of 50 = 400
    assert ring.time_ns(Kind.ALL_REDUCE, s, full, topo) == pytest.approx(30 * (5000 + s / 16 / 400))
    rail = topo.shape([0, 8])  # one GPU per node -> one NIC
    assert ring.time_ns(Kind.ALL_REDUCE, s, rail, topo) == pytest.approx(2 * (5000 + s / 2 / 50))


def test_nvls_formula_and_support() -> None:
    topo = _topology()
    shape = topo.shape(range(8))
    assert nvls.time_ns(Kind.ALL_REDUCE, 1 << 30, shape, topo) == pytest.approx(
        4000 + (1 << 30) / 400
    )
    assert not nvls.supports(Kind.ALL_REDUCE, topo.shape(range(16)), topo)
    assert not nvls.supports(Kind.ALL_GATHER, shape, topo)
    assert not nvls.supports(Kind.ALL_REDUCE, shape, _topology(nvls_link=False))


def test_tree_only_across_nodes_with_log_latency() -> None:
    topo = _topology()
    assert not tree.supports(Kind.ALL_REDUCE, topo.shape(range(8)), topo)
    small = [tree.time_ns(Kind.ALL_REDUCE, 8, topo.shape(range(8 * k)), topo) for k in (2, 4, 16)]
    assert small[1] - small[0] == pytest.approx(2 * 5000)  # one more tree level
    assert small[2] - small[1] == pytest.approx(2 * 2 * 5000)


def test_direct_all_to_all() -> None:
    topo = _topology()
    s = 16 << 20
    in_node = direct.time_ns(Kind.ALL_TO_ALL, s, topo.shape(range(8)), topo)
    assert in_node == pytest.approx(1000 + 7 * (s / 8) / 400)
    two = direct.time_ns(Kind.ALL_TO_ALL, s, topo.shape(range(16)), topo)
    assert two == pytest.approx(5000 + 8 * (s / 16) / 50)


def test_hierarchical_phases() -> None:
    topo = _topology(nvls_link=False)
    shape = topo.shape(range(16))
    assert hierarchical.supports(Kind.ALL_REDUCE, shape, topo)
    assert not hierarchical.supports(Kind.ALL_REDUCE, topo.shape([0, 8]), topo)
    s = 1 << 30
    rs = 7 * (1000 + s / 8 / 400)
    ar = 2 * (5000 + s / 8 / 2 / 50)
    ag = rs
    expected = max(rs, ar, ag) + (rs + ar + ag - max(rs, ar, ag)) / 8
    assert hierarchical.time_ns(Kind.ALL_REDUCE, s, shape, topo) == pytest.approx(expected)


def test_grouping_and_oversubscription() -> None:
    topo = Topology(load_system("h100-oversub"))
    assert topo.shape(range(32)) == GroupShape(size=32, nodes=4, per_node=8, leaves=1)
    wide = topo.shape(range(0, 64, 8))
    assert wide.leaves == 2
    assert topo.nic_link(wide).bandwidth_gbps == 25.0
