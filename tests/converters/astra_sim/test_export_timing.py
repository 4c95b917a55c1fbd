"""Through the export path: our ASTRA-sim-compatible simulator, run on each exported
bundle's own system/network files, gives ASTRA-sim's published reference outputs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lumos.converters.chakra.attrs import attrs_dict
from lumos.converters.chakra.stream import read_et
from lumos.proto import pb
from lumos.simulator.network.astra import AstraPricer
from lumos.simulator.run import Mode, SimOptions, simulate
from tests.conftest import fixture_path
from tests.converters.astra_sim.test_export import (
    MICRO,
    RING,
    T2D,
    T2D_GROUPS,
    export,
    node,
    write_trace,
)


def _ring_files(tmp_path: Path, npus: int, local_mem_bw: int) -> tuple[Path, Path]:
    """ASTRA-sim's Ring_4chunks system and a one-dimensional 50 GB/s, 500 ns ring."""
    network = tmp_path / "ring.yml"
    network.write_text(
        f"topology: [ Ring ]\nnpus_count: [ {npus} ]\nbandwidth: [ 50 ]\nlatency: [ 500 ]\n"
    )
    system = tmp_path / "ring_4chunks.json"
    ring = ["ring"]
    system.write_text(
        json.dumps(
            {
                "scheduling-policy": "LIFO",
                "endpoint-delay": 10,
                "active-chunks-per-dimension": 1,
                "preferred-dataset-splits": 4,
                "all-reduce-implementation": ring,
                "all-gather-implementation": ring,
                "reduce-scatter-implementation": ring,
                "all-to-all-implementation": ring,
                "collective-optimization": "localBWAware",
                "local-mem-bw": local_mem_bw,
            }
        )
    )
    return network, system


def simulate_bundle(bundle: Path) -> list[int]:
    """Per-rank times of our astra mode on the bundle, with the bundle's own configs."""
    pricer = AstraPricer.from_files(bundle / "system.json", bundle / "network.yml")
    groups = json.loads((bundle / "comm_group.json").read_text())
    result = simulate(
        bundle / "workload", SimOptions(mode=Mode.ASTRA, pricer=pricer, comm_groups=groups)
    )
    return [r.iteration_time_ns for r in result.ranks]


@pytest.mark.parametrize(
    ("kind", "npus", "local_mem_bw", "expected_ns"),
    [
        ("all_reduce", 8, 50, 117780),
        ("all_reduce", 8, 1600, 64440),
        ("all_gather", 16, 50, 323560),
    ],
)
def test_published_reference_outputs_through_the_export(
    kind: str, npus: int, local_mem_bw: int, expected_ns: int, tmp_path: Path
) -> None:
    network, system = _ring_files(tmp_path, npus, local_mem_bw)
    bundle = tmp_path / "b"
    export(
        fixture_path(MICRO.format(kind=kind, n=npus)),
        bundle,
        hw=None,
        network_file=network,
        system_file=system,
    )
    assert simulate_bundle(bundle) == [expected_ns] * npus


def test_ring_and_t2d_bundles_run_in_astra_mode(tmp_path: Path) -> None:
    """The send/recv and comm-group bundles finish on every rank (no stall)."""
    export(fixture_path(RING), tmp_path / "ring")
    ring = simulate_bundle(tmp_path / "ring")
    assert len(ring) == 8 and min(ring) > 7 * 7000  # 7 compute steps of 7 µs per rank
    export(fixture_path(T2D), tmp_path / "t2d", comm_groups_file=fixture_path(T2D_GROUPS))
    t2d = simulate_bundle(tmp_path / "t2d")
    assert len(t2d) == 16 and min(t2d) > 100_000  # 100 µs of compute between collectives


def _timed(nid: int, start: int, dur: int, deps: tuple[int, ...], **kw: object) -> pb.Node:
    """A node with recorded times: a CPU op (tid), a kernel (stream) or a collective."""
    ntype = pb.COMM_COLL_NODE if "comm_type" in kw else pb.COMP_NODE
    kw.setdefault("is_cpu_op", "tid" in kw)
    return node(nid, f"n{nid}", ntype, deps, start_ns=start, dur_ns=dur, **kw)


def test_idle_time_before_kernels_of_two_streams_is_delayed_once(tmp_path: Path) -> None:
    """Two kernels ready at 0, launched at 5000 and 9000: the GPU waited 8000 ns, not 13000
    (each stream's delay counted 0-5000 again; ASTRA-sim queues both on one compute slot)."""
    rank = [
        _timed(0, 0, 9000, (), tid=1),
        _timed(1, 5000, 1000, (), stream=7),
        _timed(2, 9000, 1000, (), stream=9),
    ]
    summary = export(write_trace(tmp_path / "in", [rank, list(rank)]), tmp_path / "b")
    _, nodes = read_et(tmp_path / "b" / "workload" / "t.0.et")
    gaps = {n.name: attrs_dict(n)["dur_ns"] for n in nodes if n.name.startswith("cpu_gap")}
    assert gaps == {"cpu_gap_before:n1": 5000, "cpu_gap_before:n2": 3000}
    assert summary.delay_ns == 2 * 8000
    assert simulate_bundle(tmp_path / "b") == [10000, 10000]  # n2 ends when it did
