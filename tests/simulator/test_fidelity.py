"""Replay fidelity, one cause per test (issue 9): the per-rank metric, members leaving a
collective at their own times, the GPU backlog at step start, and the breakdown's words.
Each pattern is a hand-made ET written as the converter writes it; the real capture that
shows it follows where one exists."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from lumos.converters.pytorch.convert import convert
from lumos.simulator.report.breakdown import rank_breakdown
from lumos.simulator.report.compare import compare
from lumos.simulator.report.critical_path import critical_path
from lumos.simulator.report.measured import read_measured
from lumos.simulator.run import SimOptions, simulate
from tests.conftest import DATA, fixture_path
from tests.simulator.fidelity_ets import US, Rank, write_ranks

HTA = "HolisticTraceAnalysis/tests/data"
CLOCK = 1_700_000_000_000_000_000  # a Kineto-like absolute step start (ns)


def _stalled_all_reduce(folder: Path) -> Path:
    """Two gloo ranks; rank 1 arrives last (25 µs) and stalls inside its all-reduce::

        rank 0  mm [0,10)   all_reduce [10,30)  relu [30,40)   step 40
        rank 1  mm [0,25)   all_reduce [25,60)  relu [60,70)   step 70

    The data is exchanged 5 µs after the last arrival (rank 0 leaves at 30); rank 1's
    other 30 µs are its own stall. The old rule (every member leaves at last arrival +
    the shortest recorded duration, 20 µs) ends both at 45: rank 0 +15 µs, rank 1 -15 µs.
    """
    ranks = []
    for rank, (arrive, leave, step) in enumerate(((10, 30, 40), (25, 60, 70))):
        r = Rank(rank, step, CLOCK)
        mm = r.cpu("aten::mm", 0, arrive)
        ar = r.all_reduce(arrive, leave - arrive, [mm], [0, 1])
        r.cpu("aten::relu", leave, 10, [ar])
        ranks.append(r)
    return write_ranks(folder, ranks)


def _collective_ends(result) -> list[int]:  # type: ignore[no-untyped-def]
    return [int(r.tasks.end_ns[r.tasks.match >= 0][0]) for r in result.ranks]


def test_rank_keeps_its_own_exit_from_a_collective(tmp_path: Path) -> None:
    prefix = _stalled_all_reduce(tmp_path)
    result = simulate(prefix)
    assert result.aligned
    assert _collective_ends(result) == [30 * US, 60 * US]
    comparison = compare(result, read_measured(prefix))
    assert [r.error_pct for r in comparison.ranks] == [0.0, 0.0]
    # both wait for the last arrival: rank 0 blocked 15 µs, rank 1 not at all
    assert [int(r.tasks.wait_ns[r.tasks.match >= 0][0]) for r in result.ranks] == [15 * US, 0]


def test_collective_exits_fall_back_without_a_shared_clock(tmp_path: Path) -> None:
    """Without aligned ranks the recorded times are on unrelated clocks: every member
    leaves at the simulated last arrival + the shortest recorded duration."""
    prefix = _stalled_all_reduce(tmp_path)
    result = simulate(prefix, SimOptions(align_ranks=False))
    assert not result.aligned
    assert _collective_ends(result) == [45 * US, 45 * US]


def test_ddp_capture_rank_leaves_all_reduce_at_its_recorded_exit(tmp_path: Path) -> None:
    """Our gloo DDP capture: rank 0 stalls 6.2 ms inside its second gradient all-reduce
    (node 1765, recorded 6.70 ms, rank 1's matching node 1482 4.64 ms). Rank 1 leaves at
    its own recorded exit instead of waiting out rank 0's stall (it used to leave 4.17 ms
    later); every member of every all-reduce leaves when it did on the trace clock."""
    convert([DATA / "captures" / "ddp"], tmp_path, prefix="t")
    result = simulate(tmp_path / "t")
    assert result.aligned
    for rank, g in zip(result.ranks, result.graphs, strict=True):
        rows = np.flatnonzero(rank.tasks.match >= 0)
        recorded_end = g.step_start_ns + g.start_ns[rows] + g.dur_ns[rows]
        simulated_end = rank.tasks.end_ns[rows]
        base = recorded_end[0] - simulated_end[0]
        # each member's exit on the shared clock, within 1 µs of the recorded one
        assert np.abs(recorded_end - simulated_end - base).max() <= 1_000, rank.rank
    rank1 = result.ranks[1]
    row = int(np.flatnonzero(result.graphs[1].ids == 1482)[0])
    assert rank1.tasks.end_ns[row] - rank1.tasks.start_ns[row] == result.graphs[1].dur_ns[row]


def test_overall_error_is_the_slowest_rank_not_the_span(tmp_path: Path) -> None:
    """Rank 1 enters the step 3 µs late and ends with rank 0: the old overall figure,
    last end minus first start over aligned ranks, read 73 µs against a 70 µs step."""
    ranks = []
    for rank, late in ((0, 0), (1, 3)):
        r = Rank(rank, 70 - late, CLOCK + late * US)
        r.cpu("aten::mm", 0, 20 - late)
        ranks.append(r)
    for r in ranks:
        mm = r.nodes[0].id
        r.cpu("aten::relu", 20 - (r.rank * 3), 50, [mm])
    prefix = write_ranks(tmp_path, ranks)
    comparison = compare(simulate(prefix), read_measured(prefix))
    assert comparison.measured_ns == 70 * US and comparison.simulated_ns == 70 * US
    assert comparison.error_pct == 0.0
    assert [r.measured_ns for r in comparison.ranks] == [70 * US, 67 * US]
    assert comparison.worst_rank is not None and comparison.max_abs_rank_error_pct == 0.0


def test_trace_without_profiler_step_says_nothing_was_measured(tmp_path: Path) -> None:
    """No ProfilerStep: the rank is compared with the span of its own recorded nodes,
    which replay reproduces by construction; the comparison says so."""
    r = Rank(0, None)
    mm = r.cpu("aten::mm", 0, 10)
    r.cpu("aten::relu", 12, 10, [mm], gap=2)
    prefix = write_ranks(tmp_path, [r])
    comparison = compare(simulate(prefix), read_measured(prefix))
    assert comparison.ranks[0].step_source == "recorded span"
    assert not comparison.measured
    assert comparison.to_dict()["measured"] is False


def _gpu_backlog(folder: Path, sync: bool) -> Path:
    """One GPU rank whose stream is still busy with the previous step::

        thread 1   launch k1 [0,5)  launch k2 [5,10)  aten::add [10,90)          step 100
        stream 7   (previous step's work)  k1 [50,110)  k2 [110,176)

    k1 starts 45 µs after its launch returned: the stream was busy until 50. The CPU
    window is 100 µs, the GPU-inclusive step 176 µs. With `sync`, the thread instead
    waits in cudaStreamSynchronize [10,177) (written as the converter does: its
    duration is what ran after k2 ended, 1 µs; the wait is the edge), then aten::item
    [177,180); the step ends at 185.
    """
    r = Rank(0, 185 if sync else 100)
    l1 = r.cpu("cudaLaunchKernel", 0, 5)
    k1 = r.gpu("k1", 50, 60, [l1])
    l2 = r.cpu("cudaLaunchKernel", 5, 5, [l1])
    k2 = r.gpu("k2", 110, 66, [l2])
    if sync:
        s = r.cpu("cudaStreamSynchronize", 10, 1, [l2, k2], sync_kind="stream", sync_stream=7)
        r.cpu("aten::item", 177, 3, [s])
    else:
        r.cpu("aten::add", 10, 80, [l2])
    assert k1 == 2
    return write_ranks(folder, [r])


def test_gpu_backlog_at_step_start(tmp_path: Path) -> None:
    prefix = _gpu_backlog(tmp_path, sync=False)
    result = simulate(prefix)
    rank = result.ranks[0]
    stream = next(p for p, info in enumerate(rank.processors) if info.name == "stream 7")
    assert rank.gpu_free_ns == {stream: 50 * US}
    k1, k2 = (int(np.flatnonzero(result.graphs[0].ids == i)[0]) for i in (2, 4))
    assert rank.tasks.start_ns[k1] == 50 * US and rank.tasks.end_ns[k2] == 176 * US
    comparison = compare(result, read_measured(prefix))
    row = comparison.ranks[0]
    # like with like: CPU window vs ProfilerStep, GPU-inclusive vs the last recorded end
    assert (row.measured_ns, row.simulated_ns) == (100 * US, 100 * US)
    assert (row.measured_gpu_ns, row.simulated_gpu_ns) == (176 * US, 176 * US)
    assert result.iteration_time_ns == 100 * US and result.gpu_inclusive_ns == 176 * US
    assert result.to_json()["ranks"][0]["gpu_inclusive_ns"] == 176 * US
    # a GPU-bound step comes out GPU-bound: the GPU is busy the whole GPU-inclusive step
    parts = rank_breakdown(rank)
    assert parts.iteration_ns == 176 * US
    assert parts.backlog_ns == 50 * US and parts.exposed_compute_ns == 126 * US
    assert parts.idle_ns == 0
    path = critical_path(result)
    assert path.total_ns == 176 * US
    cats = {c.category: c.total_ns for c in path.by_category()}
    assert cats == {"gpu backlog": 50 * US, "gpu compute": 126 * US}


def test_gpu_backlog_holds_a_sync_that_waits_for_it(tmp_path: Path) -> None:
    """The CPU waits for the lagging GPU: without the backlog the sync returned at
    131 µs and the step read 140 µs against 185 (-24%)."""
    prefix = _gpu_backlog(tmp_path, sync=True)
    comparison = compare(simulate(prefix), read_measured(prefix))
    assert comparison.ranks[0].error_pct == 0.0
    assert comparison.ranks[0].simulated_gpu_ns == 185 * US


def test_breakdown_splits_exposed_comm_into_transfer_and_peer_wait(tmp_path: Path) -> None:
    """gloo ranks (CPU basis): the time a rank's thread sits in an all-reduce waiting for
    its peer is wait-for-peers, not idle and not transfer."""
    prefix = _stalled_all_reduce(tmp_path)
    result = simulate(prefix)
    rank0 = rank_breakdown(result.ranks[0])
    # rank 0: mm [0,10) relu [30,40) compute; all-reduce [10,25) waiting, [25,30) transfer
    assert rank0.exposed_compute_ns == 20 * US
    assert rank0.peer_wait_ns == 15 * US and rank0.exposed_transfer_ns == 5 * US
    assert rank0.idle_ns == 0
    assert sum(rank0.parts().values()) == rank0.iteration_ns == 40 * US


@pytest.mark.slow
def test_gpu_work_outliving_the_loop_is_compared_like_with_like(tmp_path: Path) -> None:
    """HTA rank 0 of a 16-rank A100 job: its ProfilerStep (the CPU loop) is 216.216 ms,
    but the GPU runs until 374.462 ms (stream 7 waits on NCCL streams for peers that are
    not in the fixture). The old step end (the last node) read +0.26%; the CPU window is
    compared with the ProfilerStep (−0.18% since the converter infers the cross-stream
    waits), the GPU-inclusive step with the last recorded end.
    Stream 7's first kernel starts 161.9 ms into the step, after its launch: a backlog."""
    convert([fixture_path(f"{HTA}/negative_queue_length_values_check")], tmp_path, prefix="t")
    prefix = tmp_path / "t"
    result = simulate(prefix, SimOptions(allow_partial=True))  # rank 0 of 16
    row = compare(result, read_measured(prefix)).ranks[0]
    assert row.measured_ns == 216_216_000 and row.measured_gpu_ns == 374_462_000
    assert row.error_pct is not None and abs(row.error_pct) < 0.5
    # (its GPU-inclusive error, 32% today, is compute that replay still runs early:
    # see docs/accuracy.md)
    assert row.simulated_gpu_ns >= row.simulated_ns
    rank = result.ranks[0]
    stream7 = next(p for p, info in enumerate(rank.processors) if info.name == "stream 7")
    assert rank.gpu_free_ns[stream7] == 161_947_000
