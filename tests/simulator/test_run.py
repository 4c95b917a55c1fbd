"""simulate(): replay/model/astra semantics on real fixtures and inline edge cases."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from lumos.errors import ConfigError, SimulationError
from lumos.simulator.graph import COLL, RECV, SEND
from lumos.simulator.network.api import FixedBandwidthPricer
from lumos.simulator.run import Mode, SimOptions, simulate
from tests.conftest import fixture_path
from tests.simulator.graph_cases import rank_graph

MICRO = "astra-sim/examples/workload/microbenchmarks"


class RingFormulaPricer:
    """ASTRA-sim's congestion-unaware ring formulas (reference/astra-sim.md), one dimension."""

    def __init__(self, gbps: float, latency: float, local_mem_bw: float, splits: int = 4) -> None:
        self.bw = gbps * 2**30 / 1e9
        self.lat, self.mem, self.splits, self.d = latency, local_mem_bw, splits, 10

    def _msg(self, size: float) -> int:
        return int(self.lat + size / self.bw)

    def _reduce(self, size: float) -> int:
        return 3 * int(size / (self.mem * 1e9) * 1e9)

    def collective_ns(self, comm_type: int, size_bytes: int, ranks: Sequence[int]) -> int:
        n, c, d = len(ranks), size_bytes / self.splits, self.d
        if comm_type == 0:
            chunk = d + 2 * (n - 1) * (self._msg(c / n) + d) + (n - 1) * self._reduce(c / n)
        else:
            chunk = d + (n - 1) * (self._msg(c) + d)
        return self.splits * chunk

    def p2p_ns(self, size_bytes: int, src: int, dst: int) -> int:
        return self._msg(size_bytes)


@pytest.mark.parametrize(
    ("case", "pricer", "expected"),
    [
        ("all_reduce/8npus_1MB", RingFormulaPricer(50, 500, 50), 117780),
        ("all_reduce/8npus_1MB", RingFormulaPricer(50, 500, 1600), 64440),
        ("all_gather/16npus_1MB", RingFormulaPricer(50, 500, 1600), 323560),
    ],
)
def test_astra_reference_outputs(case: str, pricer: RingFormulaPricer, expected: int) -> None:
    result = simulate(fixture_path(f"{MICRO}/{case}"), SimOptions(Mode.ASTRA, pricer))
    assert result.iteration_time_ns == expected
    assert {r.iteration_time_ns for r in result.ranks} == {expected}


def test_model_mode_needs_a_pricer() -> None:
    with pytest.raises(ConfigError, match="needs a network pricer"):
        simulate(fixture_path(f"{MICRO}/all_reduce/8npus_1MB"), SimOptions(Mode.MODEL))


def test_resnet_dp_replay_is_deterministic_and_compute_bound() -> None:
    path = fixture_path("astra-sim/inputs/workload/ASTRA-sim-2.0/resnet_dp.tar")
    a = simulate(path)
    b = simulate(path)
    assert a.iteration_time_ns == b.iteration_time_ns
    for ra, rb in zip(a.ranks, b.ranks, strict=True):
        assert np.array_equal(ra.tasks.start_ns, rb.tasks.start_ns)
    # no recorded all-reduce time and no pricer: the step is the compute chain on one GPU
    g = a.graphs[0]
    assert a.iteration_time_ns == int(g.dur_ns[g.type != COLL].sum())
    priced = simulate(path, SimOptions(Mode.MODEL, FixedBandwidthPricer(50, 500)))
    assert priced.iteration_time_ns > a.iteration_time_ns


def test_custom_ring_send_recv_pairs_and_all_ranks_finish_together() -> None:
    path = fixture_path(
        "astra-sim/examples/system/custom_collectives/custom_ring_allreduce_8npus_1MB"
    )
    pricer = FixedBandwidthPricer(50, 500)
    result = simulate(path, SimOptions(Mode.MODEL, pricer))
    t = result.ranks[0].tasks
    p2p = np.isin(t.type, (SEND, RECV))
    assert p2p.sum() == 28 and (t.match[p2p] >= 0).all()
    # 14 ring steps: each a 131072 B hop (3121 ns here) plus a 7 µs reduction on 7 of them
    hop = pricer.p2p_ns(131072, 0, 1)
    assert {r.iteration_time_ns for r in result.ranks} == {14 * hop + 7 * 7000}


def test_collective_waits_for_late_member_and_replays_shortest_duration() -> None:
    r0 = rank_graph(
        0,
        [
            {"name": "fwd", "dur_ns": 100, "stream": 7},
            {
                "name": "ar",
                "type": COLL,
                "deps": [0],
                "dur_ns": 900,
                "stream": 7,
                "comm_type": 0,
                "comm_size": 64,
                "group": 0,
            },
        ],
        groups=[(0, 1)],
    )
    r1 = rank_graph(
        1,
        [
            {"name": "fwd", "dur_ns": 400, "stream": 7},
            {
                "name": "ar",
                "type": COLL,
                "deps": [0],
                "dur_ns": 250,
                "stream": 7,
                "comm_type": 0,
                "comm_size": 64,
                "group": 0,
            },
        ],
        groups=[(0, 1)],
    )
    result = simulate([r0, r1])
    t0, t1 = result.ranks[0].tasks, result.ranks[1].tasks
    assert (t0.start_ns[1], t0.wait_ns[1], t0.end_ns[1]) == (100, 300, 650)
    assert (t1.start_ns[1], t1.wait_ns[1], t1.end_ns[1]) == (400, 0, 650)
    assert t0.match[1] == t1.match[1] >= 0
    assert result.iteration_time_ns == 650


def test_cpu_gap_and_launch_enqueues_kernel_on_stream() -> None:
    g = rank_graph(
        0,
        [
            {"name": "op", "tid": 1, "dur_ns": 50, "gap_ns": 30},
            {"name": "launch", "tid": 1, "deps": [0], "dur_ns": 10, "gap_ns": 5},
            {"name": "kernel", "stream": 7, "deps": [1], "dur_ns": 1000},
        ],
    )
    t = simulate([g]).ranks[0].tasks
    assert t.start_ns.tolist() == [30, 85, 95]
    assert t.end_ns.tolist() == [80, 95, 1095]


def test_stall_is_reported_not_hung() -> None:
    recv_then_send = [
        {"name": "recv", "type": RECV, "comm_peer": None, "comm_tag": 0, "comm_size": 8},
        {
            "name": "send",
            "type": SEND,
            "deps": [0],
            "comm_peer": None,
            "comm_tag": 0,
            "comm_size": 8,
        },
    ]
    graphs = []
    for rank in (0, 1):
        nodes = [dict(d, comm_peer=1 - rank) for d in recv_then_send]
        graphs.append(rank_graph(rank, nodes))
    with pytest.raises(
        SimulationError, match=r"(?s)stalled with 4 node\(s\).*rank 0 node 0 'recv'"
    ):
        simulate(graphs)


@pytest.mark.parametrize("mode", [Mode.REPLAY, Mode.MODEL, Mode.ASTRA])
def test_t2d_runs_in_every_mode(mode: Mode) -> None:
    result = simulate(
        fixture_path("astra-sim-artifacts/examples/T2D-analytical/trace"),
        SimOptions(mode, FixedBandwidthPricer(50, 500)),
    )
    assert len(result.ranks) == 16
    pricer = FixedBandwidthPricer(50, 500)
    expected = 2 * pricer.collective_ns(0, 1 << 20, range(4)) + 100_000
    assert result.iteration_time_ns == expected
