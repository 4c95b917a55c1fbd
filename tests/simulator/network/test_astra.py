"""ASTRA-sim-compatible pricing: the published analytical outputs, reproduced exactly."""

from __future__ import annotations

import pytest

from lumos.converters.astra_sim.config_files import network_from_dict, system_from_dict
from lumos.converters.chakra.attrs import get_attr
from lumos.converters.chakra.stream import read_et
from lumos.errors import SimulationError
from lumos.simulator.network.astra import AstraPricer
from tests.conftest import fixture_path

MICRO = "astra-sim/examples/workload/microbenchmarks"
RING_4CHUNKS = {
    "scheduling-policy": "LIFO",
    "endpoint-delay": 10,
    "active-chunks-per-dimension": 1,
    "preferred-dataset-splits": 4,
    "all-reduce-implementation": ["ring"],
    "all-gather-implementation": ["ring"],
    "reduce-scatter-implementation": ["ring"],
    "all-to-all-implementation": ["ring"],
    "collective-optimization": "localBWAware",
    "local-mem-bw": 1600,
    "boost-mode": 0,
}


def _ring_network(npus: int, topology: str = "Ring") -> dict:
    return {"topology": [topology], "npus_count": [npus], "bandwidth": [50], "latency": [500]}


def _micro(collective: str, npus: int) -> tuple[int, int]:
    """(comm_type, comm_size) of rank 0's collective in an ASTRA-sim microbenchmark ET."""
    _, nodes = read_et(fixture_path(f"{MICRO}/{collective}/{npus}npus_1MB/{collective}.0.et"))
    (node,) = nodes
    return int(get_attr(node, "comm_type")), int(get_attr(node, "comm_size"))


@pytest.mark.parametrize(
    ("collective", "npus", "local_mem_bw", "expected_ns"),
    [
        ("all_reduce", 8, 50, 117780),
        ("all_reduce", 8, 1600, 64440),
        ("all_gather", 16, 1600, 323560),
    ],
)
def test_published_outputs_exact(
    collective: str, npus: int, local_mem_bw: int, expected_ns: int
) -> None:
    comm_type, comm_size = _micro(collective, npus)
    assert comm_size == 1 << 20
    pricer = AstraPricer.from_configs(
        system_from_dict({**RING_4CHUNKS, "local-mem-bw": local_mem_bw}),
        network_from_dict(_ring_network(npus)),
    )
    assert pricer.collective_ns(comm_type, comm_size, list(range(npus))) == expected_ns


def test_hgx_h100_example_prices() -> None:
    pricer = AstraPricer.from_files(
        fixture_path("astra-sim/examples/system/native_collectives/HGX-H100-validated.json"),
        fixture_path("astra-sim/examples/network/analytical/HGX-H100-validated.yml"),
    )
    ranks = list(range(8))
    # Switch: 2 hops of 936.25 ns; 400 GiB/s; 4 splits, 2 chunks in flight -> 2 waves.
    b = 400 * (1 << 30) / 1e9
    m = (1 << 20) // 4 // 8
    step = int(2 * 936.25 + m / b) + 10
    reduce = 3 * int(m / 3350e9 * 1e9)
    per_chunk = 10 + 14 * step + 7 * reduce
    assert pricer.collective_ns(0, 1 << 20, ranks) == 2 * per_chunk
    times = [pricer.collective_ns(t, 1 << 26, ranks) for t in (0, 2, 6, 7)]
    assert all(t > 0 for t in times)
    assert pricer.collective_ns(0, 1 << 26, ranks) > pricer.collective_ns(7, 1 << 26, ranks)
    assert pricer.p2p_ns(1 << 20, 0, 5) == int(2 * 936.25 + (1 << 20) / b)


def test_active_chunks_and_splits() -> None:
    network = network_from_dict(_ring_network(8))
    one = AstraPricer(system_from_dict(RING_4CHUNKS), network)
    two = AstraPricer(system_from_dict({**RING_4CHUNKS, "active-chunks-per-dimension": 2}), network)
    four = AstraPricer(
        system_from_dict({**RING_4CHUNKS, "active-chunks-per-dimension": 4}), network
    )
    assert one.collective_ns(0, 1 << 20, range(8)) == 64440
    assert two.collective_ns(0, 1 << 20, range(8)) == 64440 // 2
    assert four.collective_ns(0, 1 << 20, range(8)) == 64440 // 4


def test_two_dimensional_local_bw_aware_pipelines_chunks() -> None:
    system = system_from_dict(
        {
            **RING_4CHUNKS,
            **{k: ["ring", "ring"] for k in RING_4CHUNKS if k.endswith("implementation")},
        }
    )
    network = network_from_dict(
        {
            "topology": ["Switch", "Ring"],
            "npus_count": [8, 2],
            "bandwidth": [400, 50],
            "latency": [936.25, 1000],
        }
    )
    pricer = AstraPricer(system, network)
    ranks = list(range(16))
    total = pricer.collective_ns(0, 1 << 24, ranks)
    # Each chunk: RS over 8 (Switch), AR over 2 (Ring) on 1/8 of the chunk, AG over 8.
    chunk = (1 << 24) // 4
    phases = pricer._world_phases(0, chunk)
    assert [p.queue for p in phases] == [0, 1, 0]
    serial = 4 * sum(p.duration_ns for p in phases)
    assert max(p.duration_ns for p in phases) * 4 < total < serial  # chunks overlap across dims
    # A sub-group of the 8 GPUs of node 0 runs as a 1-D ring on dimension 0.
    node = pricer.collective_ns(0, 1 << 20, list(range(8)))
    flat = AstraPricer(
        system_from_dict(RING_4CHUNKS),
        network_from_dict(
            {"topology": ["Switch"], "npus_count": [8], "bandwidth": [400], "latency": [936.25]}
        ),
    )
    assert node == flat.collective_ns(0, 1 << 20, list(range(8)))
    # A group across nodes pays the slow dimension on every step.
    assert pricer.collective_ns(0, 1 << 20, [0, 8]) > pricer.collective_ns(0, 1 << 20, [0, 1])


def test_unsupported_types_and_bad_ranks_raise() -> None:
    pricer = AstraPricer(system_from_dict(RING_4CHUNKS), network_from_dict(_ring_network(8)))
    with pytest.raises(SimulationError, match="broadcast"):
        pricer.collective_ns(5, 1024, range(8))
    with pytest.raises(SimulationError, match="rank 9"):
        pricer.collective_ns(0, 1024, [0, 9])
    assert pricer.collective_ns(0, 1024, [3]) == 0
