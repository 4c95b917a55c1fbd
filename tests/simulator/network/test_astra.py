"""ASTRA-sim-compatible pricing: the published analytical outputs, reproduced exactly."""

from __future__ import annotations

from pathlib import Path

import pytest

from lumos.converters.astra_sim.config_files import network_from_dict, system_from_dict
from lumos.converters.chakra.attrs import get_attr
from lumos.converters.chakra.stream import read_et
from lumos.errors import SimulationError
from lumos.simulator.network.astra import AstraPricer
from tests.astra_cases import RING_4CHUNKS
from tests.conftest import fixture_path

MICRO = "astra-sim/examples/workload/microbenchmarks"


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


def _pricer(npus: int, topology: str = "Ring", **system: object) -> AstraPricer:
    return AstraPricer(
        system_from_dict({**RING_4CHUNKS, **system}),
        network_from_dict(_ring_network(npus, topology)),
    )


@pytest.mark.parametrize("kind", [0, 2, 6, 7])
@pytest.mark.parametrize("chunks", [1, 4])
def test_member_finish_with_equal_arrivals_is_the_closed_form(kind: int, chunks: int) -> None:
    """The message-by-message ring with everyone on time gives the closed form, shifted by
    the common arrival."""
    pricer = _pricer(8, **{"active-chunks-per-dimension": chunks})
    finish = pricer.member_finish(kind, 1 << 20, list(range(8)))
    assert finish is not None
    assert finish([500] * 8) == [500 + pricer.collective_ns(kind, 1 << 20, range(8))] * 8


def test_member_finish_late_rank_ends_members_one_after_another() -> None:
    """8-rank ring all-reduce (1 split), ranks 2 and 5 late by 7 and 3 µs: the members
    finish at the times the real binary printed (sys[0..7], ASTRA-sim 518bd513)."""
    pricer = _pricer(8, **{"preferred-dataset-splits": 1})
    finish = pricer.member_finish(0, 1 << 20, list(range(8)))
    assert finish is not None
    arrivals = [0, 0, 7000, 0, 0, 3000, 0, 0]
    assert finish(arrivals) == [50025, 43025, 43084, 46025, 43025, 43025, 44143, 47084]


def test_member_finish_only_for_one_ring() -> None:
    two_d = AstraPricer(
        system_from_dict(
            {**RING_4CHUNKS, **{k: ["ring", "ring"] for k in RING_4CHUNKS if "implementation" in k}}
        ),
        network_from_dict(
            {
                "topology": ["Switch", "Switch"],
                "npus_count": [4, 2],
                "bandwidth": [50, 25],
                "latency": [500, 900],
            }
        ),
    )
    assert two_d.member_finish(0, 1 << 20, list(range(8))) is None  # chunks cross 2 dims
    assert two_d.member_finish(0, 1 << 20, [0, 4]) is not None  # a sub-group ring


def test_small_collectives_are_cut_like_astra_sim() -> None:
    """determine_chunk_size: below one byte per NPU per split, chunks become NPU-sized
    (a 4 B barrier all-reduce still costs a full ring); all-gather is exempt."""
    pricer = _pricer(8)
    assert pricer.chunking(0, 4) == (8, 4)
    assert pricer.chunking(0, 0) == (8, 4)
    assert pricer.chunking(2, 4) == (1, 4)
    assert pricer.collective_ns(0, 4, range(8)) == pricer.collective_ns(0, 32, range(8)) > 0


@pytest.mark.parametrize("topology", ["Ring", "Switch", "FullyConnected"])
def test_congestion_aware_free_links_and_queued_chunks(topology: str) -> None:
    """One chunk: a message costs int(L + S/B) per link of its route. Four chunks in flight
    queue on the same links, so they take longer than one chunk but less than four."""
    from lumos.simulator.network.congestion_aware import CongestionAwarePricer

    net = network_from_dict(_ring_network(4, topology))
    one = CongestionAwarePricer(
        system_from_dict({**RING_4CHUNKS, "preferred-dataset-splits": 1}), net
    )
    hops = len(one.route(0, 1)) - 1
    assert hops == {"Ring": 1, "Switch": 2, "FullyConnected": 1}[topology]
    link = int(500 + (1 << 20) / (50 * 2**30 / 1e9))
    assert one.p2p_ns(1 << 20, 0, 1) == hops * link
    # all-gather of 1 MiB on 4: 3 steps, each message crossing `hops` links, 10 ns delays
    assert one.collective_ns(2, 1 << 20, range(4)) == 10 + 3 * (hops * link + 10)
    four = CongestionAwarePricer(
        system_from_dict({**RING_4CHUNKS, "active-chunks-per-dimension": 4}), net
    )
    serial = CongestionAwarePricer(system_from_dict(RING_4CHUNKS), net)
    assert serial.collective_ns(2, 4 << 20, range(4)) > four.collective_ns(2, 4 << 20, range(4))


def test_astra_mode_reads_pg_names_like_std_stoi(tmp_path: Path) -> None:
    """T2D-style pg_name "1.0": ASTRA-sim reads group 1 (std::stoi); astra mode's binary
    rules read it the same way instead of failing on int("1.0")."""
    from lumos.converters.chakra.attrs import make_attr
    from lumos.converters.chakra.stream import write_et
    from lumos.proto import pb
    from lumos.simulator.run import Mode, SimOptions, simulate

    for rank in range(4):
        node = pb.Node(id=1, name="ar", type=pb.COMM_COLL_NODE)
        pg = "1.0" if rank < 2 else "2.0"
        node.attr.extend(
            make_attr(k, v)
            for k, v in (
                ("comm_type", 0),
                ("comm_size", 1 << 20),
                ("pg_name", pg),
                ("is_cpu_op", False),
            )
        )
        write_et(tmp_path / f"t.{rank}.et", None, [node])
    pricer = _pricer(4)
    groups = {"1": [0, 1], "2": [2, 3]}
    result = simulate(tmp_path, SimOptions(mode=Mode.ASTRA, pricer=pricer, comm_groups=groups))
    want = pricer.collective_ns(0, 1 << 20, [0, 1])
    assert [r.iteration_time_ns for r in result.ranks] == [want] * 2 + [
        pricer.collective_ns(0, 1 << 20, [2, 3])
    ] * 2
