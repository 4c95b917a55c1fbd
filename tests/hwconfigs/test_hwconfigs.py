"""Hardware configs: every shipped YAML loads, numbers match the datasheets, bad keys are refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from lumos.errors import ConfigError
from lumos.hwconfigs import (
    load_fabric,
    load_gpu,
    load_node,
    load_system,
    shipped_names,
)
from lumos.hwconfigs.schema import FabricTopology, Transport

LOADERS = {"gpus": load_gpu, "nodes": load_node, "fabrics": load_fabric, "systems": load_system}


REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(("kind", "name"), [(k, n) for k in LOADERS for n in shipped_names(k)])
def test_every_shipped_config_loads(kind: str, name: str) -> None:
    spec = LOADERS[kind](name)
    assert spec.name == name


def test_shipped_system_short_names() -> None:
    assert {"h100", "a100", "h100-roce", "h100-oversub"} <= set(shipped_names())


def test_h100_system_numbers() -> None:
    system = load_system("h100")
    assert system.gpu.peak_bf16_tflops == pytest.approx(989.4)
    assert system.gpu.peak_fp8_tflops == pytest.approx(1978.9)
    assert system.gpu.hbm_bandwidth_gbps == 3350
    assert system.gpus_per_node == 8
    assert system.node.nvlink_generation == 4
    assert system.node.nvlink.bandwidth_gbps == 450
    assert system.node.nvls is not None
    assert system.fabric.transport is Transport.INFINIBAND
    assert system.fabric.topology is FabricTopology.RAIL_OPTIMIZED_FAT_TREE
    assert system.fabric.nic_bandwidth_gbps == 50.0  # 400 Gb/s
    assert system.node_of(15) == 1


def test_a100_and_variants() -> None:
    a100 = load_system("a100")
    assert a100.gpu.peak_bf16_tflops == 312
    assert a100.gpu.peak_fp8_tflops is None
    assert a100.node.nvls is None
    assert a100.node.nvlink.bandwidth_gbps == 300
    assert a100.fabric.nic_bandwidth_gbps == 25.0
    assert load_system("h100-roce").fabric.transport is Transport.ROCE
    assert load_system("h100-oversub").fabric.oversubscription == 2.0


def test_h800_and_a800_are_their_dies_with_nvlink_cut_to_400_gbs() -> None:
    """H800 SXM5 / A800 SXM4: the H100 / A100 die (same peaks, HBM, kernel physics) with
    NVLink at 400 GB/s total, 200 a direction (NVIDIA's product briefs); the H800 on NDR 400,
    the A800 on HDR 200 Gb/s NICs."""
    for name, twin, fabric_gbs in (("h800", "h100", 50.0), ("a800", "a100", 25.0)):
        cut, full = load_system(name), load_system(twin)
        assert cut.gpu == full.gpu
        assert cut.node.nvlink.bandwidth_gbps == 200 < full.node.nvlink.bandwidth_gbps
        assert cut.node.nvlink.efficiency == full.node.nvlink.efficiency
        assert (cut.node.nvls is None) == (full.node.nvls is None)
        assert cut.fabric.nic_bandwidth_gbps == fabric_gbs
    # FlagPerf's H800 cluster (scripts/data): the H800 node on 200 Gb/s NICs
    ib200 = load_system(REPO / "scripts" / "data" / "h800_ib200.yaml")
    assert ib200.node == load_system("h800").node and ib200.fabric.nic_bandwidth_gbps == 25.0


def test_num_nodes_override() -> None:
    assert load_system("h100", num_nodes=2).world_size == 16


def test_efficiency_interpolates_in_log_size() -> None:
    link = load_node("hgx_h100").nvlink
    lo, hi = link.efficiency[1], link.efficiency[2]
    mid = (lo.size_bytes * hi.size_bytes) ** 0.5
    assert link.efficiency_at(mid) == pytest.approx((lo.efficiency + hi.efficiency) / 2)
    assert link.efficiency_at(1) == link.efficiency[0].efficiency
    assert link.efficiency_at(1 << 40) == link.efficiency[-1].efficiency


def test_unknown_key_suggests_the_right_one(tmp_path: Path) -> None:
    bad = tmp_path / "gpu.yaml"
    bad.write_text(
        "name: x\npeak_bf16_tflop: 1\npeak_fp16_tflops: 1\npeak_tf32_tflops: 1\n"
        "peak_fp32_tflops: 1\npeak_fp64_tflops: 1\nhbm_bandwidth_gbps: 1\nhbm_capacity_gb: 1\n"
    )
    with pytest.raises(
        ConfigError, match=r"gpu\.yaml.*peak_bf16_tflop.*did you mean 'peak_bf16_tflops'"
    ):
        load_gpu(bad)


def test_user_system_with_inline_and_relative_refs(tmp_path: Path) -> None:
    (tmp_path / "fab.yaml").write_text(
        "name: fab\ntransport: roce\ntopology: fat_tree\nnic_line_rate_gbit_per_s: 200\n"
        "nic_latency_ns: 5000\noversubscription: 3\n"
    )
    (tmp_path / "sys.yaml").write_text(
        "name: mine\nnode: hgx_a100\nfabric: fab.yaml\nnum_nodes: 4\n"
        "collectives: {all_reduce: ring}\n"
    )
    system = load_system(tmp_path / "sys.yaml")
    assert system.fabric.nic_bandwidth_gbps == 25.0
    assert system.fabric.oversubscription == 3.0
    assert system.collectives.all_reduce == "ring"
    assert system.world_size == 32


def test_bad_values_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "sys.yaml"
    path.write_text(
        "name: s\nnode: hgx_h100\nfabric: ndr_rail_fat_tree\ncollectives: {all_reduce: rnig}\n"
    )
    with pytest.raises(ConfigError, match="did you mean 'ring'"):
        load_system(path)
    path.write_text("name: s\nnode: hgx_h1000\nfabric: ndr_rail_fat_tree\n")
    with pytest.raises(ConfigError, match="did you mean 'hgx_h100'"):
        load_system(path)
    path.write_text("name: s\nnode: hgx_h100\n")
    with pytest.raises(ConfigError, match="missing key 'fabric'"):
        load_system(path)
    with pytest.raises(ConfigError, match="did you mean 'h100'"):
        load_system("h10")
