"""Replay semantics on hand-made graphs: rank alignment on measured step starts, gloo
waits that overlap the recorded gap, and GPU streams of ETs in mlc-chakra's convention."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from lumos.simulator.align import align_ranks
from lumos.simulator.graph import COMP, RECV, SEND, RankGraph
from lumos.simulator.processors import assign_processors
from lumos.simulator.run import SimOptions, simulate
from tests.simulator.graph_cases import rank_graph

US = 1000


def _step(rank: int, start: int | None, step: int | None = 100 * US) -> RankGraph:
    g = rank_graph(rank, [{"tid": 1, "dur_ns": 10 * US}])
    g.step_start_ns, g.measured_step_ns = start, step
    return g


def test_ranks_start_at_their_step_start_offsets() -> None:
    graphs = [_step(0, 5_000 * US), _step(1, 5_030 * US), _step(2, 5_010 * US)]
    alignment = align_ranks(graphs)
    assert alignment.aligned
    assert alignment.offsets == {0: 0, 1: 30 * US, 2: 10 * US}
    result = simulate(graphs)
    assert [r.start_ns for r in result.ranks] == [0, 30 * US, 10 * US]
    assert [r.iteration_time_ns for r in result.ranks] == [10 * US] * 3
    # the slowest rank's step, not last end - first start (40 µs: the entry skew)
    assert result.iteration_time_ns == 10 * US
    assert [r.end_ns for r in result.ranks] == [10 * US, 40 * US, 20 * US]


def test_no_alignment_without_a_shared_clock_or_starts() -> None:
    far = [_step(0, 0), _step(1, 100 * US)]
    assert not align_ranks(far).aligned and "share a clock" in align_ranks(far).reason
    missing = [_step(0, 0), _step(1, None)]
    assert "no step_start_ns on rank(s) [1]" in align_ranks(missing).reason
    assert align_ranks([_step(0, 7)]).reason == "single rank"
    assert not align_ranks([_step(0, 0), _step(1, 5)], enabled=False).aligned
    result = simulate(far)
    assert not result.aligned and [r.start_ns for r in result.ranks] == [0, 0]


def test_ranks_starting_at_different_times_are_not_folded_together() -> None:
    graphs = [_step(0, 0), _step(1, 20 * US)]
    assert simulate(graphs, SimOptions(fold=True)).ranks[1].folded_from is None
    same = [_step(0, 0), _step(1, 0)]
    assert simulate(same, SimOptions(fold=True)).ranks[1].folded_from == 0


def _p2p(recv_gap: int) -> list[RankGraph]:
    sender = rank_graph(
        0,
        [
            {"tid": 1, "dur_ns": 10 * US},
            {"tid": 1, "type": SEND, "deps": [0], "comm_peer": 1, "comm_size": 64, "dur_ns": US},
        ],
    )
    receiver = rank_graph(
        1,
        [
            {"tid": 2, "type": RECV, "comm_peer": 0, "comm_size": 64, "dur_ns": US},
            {"tid": 2, "deps": [0], "dur_ns": US, "gap_ns": recv_gap},
        ],
    )
    return [sender, receiver]


def test_wait_for_a_peer_overlaps_the_recorded_gap_after_a_gloo_recv() -> None:
    """The receive is posted at 0 and its data lands at 11 µs (send at 10 µs + 1 µs);
    the op after it was recorded 50 µs after the receive returned — that gap already
    holds the wait, so it starts at 0 + 1 + 50 µs, not at 11 + 50 µs."""
    tasks = simulate(_p2p(50 * US)).ranks[1].tasks
    assert tasks.end_ns[0] == 11 * US and tasks.wait_ns[0] == 10 * US
    assert tasks.start_ns[1] == 51 * US
    short = simulate(_p2p(5 * US)).ranks[1].tasks
    assert short.start_ns[1] == 11 * US  # the data arrives after the gap: wait for it


def test_mlc_convention_gpu_ops_run_on_the_stream_named_by_their_tid(chakra_et: Path) -> None:
    result = simulate(chakra_et, SimOptions(repair=True))
    names = [p.name for p in result.ranks[0].processors]
    assert names == ["thread 1", "thread 2", "stream 7", "stream 14"]
    g = result.graphs[0]
    tasks = result.ranks[0].tasks
    kernel = int(np.flatnonzero(g.ids == 435)[0])  # ncclKernel_Broadcast, tid 14
    assert names[int(tasks.proc[kernel])] == "stream 14"


def test_tid_stays_a_thread_when_no_cpu_ops_mark_the_convention() -> None:
    g = RankGraph.from_arrays(
        0,
        2,
        tid=np.asarray([3, 4], np.int64),
        type=np.asarray([COMP, COMP], np.int8),
        is_cpu_op=np.asarray([False, False]),
    )
    assert [p.name for p in assign_processors(g).processors] == ["thread 3", "thread 4"]
