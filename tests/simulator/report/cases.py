"""Hand-made simulated runs with known answers, for the report tests.

Each case is small enough to work out on paper; the numbers in the tests come from the
timelines drawn in the docstrings.
"""

from __future__ import annotations

import numpy as np

from lumos.simulator.graph import RankGraph
from lumos.simulator.result import ProcessorInfo, ProcKind, RankResult, SimResult, TaskTable

THREAD = ProcessorInfo("thread 1", ProcKind.CPU, 1)
STREAM7 = ProcessorInfo("stream 7", ProcKind.GPU, 7)
STREAM20 = ProcessorInfo("stream 20", ProcKind.GPU, 20)
PROCS = [THREAD, STREAM7, STREAM20]


def rank_result(
    rank: int,
    rows: list[tuple[str, int, int, int, int, bool, int, list[int]]],
    processors: list[ProcessorInfo] = PROCS,
) -> tuple[RankResult, RankGraph]:
    """Rows: (name, start, end, wait, proc, is_comm, match, deps)."""
    names = list(dict.fromkeys(r[0] for r in rows))
    n = len(rows)
    tasks = TaskTable(
        node_id=np.arange(100, 100 + n, dtype=np.int64),
        start_ns=np.array([r[1] for r in rows], np.int64),
        end_ns=np.array([r[2] for r in rows], np.int64),
        wait_ns=np.array([r[3] for r in rows], np.int64),
        proc=np.array([r[4] for r in rows], np.int32),
        type=np.array([7 if r[5] else 4 for r in rows], np.int8),
        is_comm=np.array([r[5] for r in rows], bool),
        name_idx=np.array([names.index(r[0]) for r in rows], np.int32),
        match=np.array([r[6] for r in rows], np.int64),
        names=names,
    )
    ptr = np.cumsum([0] + [len(r[7]) for r in rows]).astype(np.int64)
    idx = np.array([d for r in rows for d in r[7]], np.int32)
    graph = RankGraph.from_arrays(rank, n, dep_ptr=ptr, dep_idx=idx)
    end = int(tasks.end_ns.max()) if n else 0
    return RankResult(rank, end, processors, tasks), graph


def simulated(*ranks: tuple[RankResult, RankGraph], mode: str = "replay") -> SimResult:
    results = [r for r, _ in ranks]
    return SimResult(
        ranks=results,
        iteration_time_ns=max(r.iteration_time_ns for r in results),
        mode=mode,
        graphs=[g for _, g in ranks],
    )


def overlap_rank() -> tuple[RankResult, RankGraph]:
    """One GPU rank, step 100 ns::

        thread 1   launch_a [0,10)  launch_ar [10,20)
        stream 7             gemm [10,60)      relu [60,80)
        stream 20                 allreduce [40,100), waiting [40,50), active [50,100)

    compute = [10,80) = 70, comm = [50,100) = 50, overlap = [50,80) = 30
    → exposed compute 40, overlapped 30, exposed comm 20, idle 10.
    """
    return rank_result(
        0,
        [
            ("launch_a", 0, 10, 0, 0, False, -1, []),
            ("gemm", 10, 60, 0, 1, False, -1, [0]),
            ("launch_ar", 10, 20, 0, 0, False, -1, [0]),
            ("allreduce", 40, 100, 10, 2, True, 1, [2]),
            ("relu", 60, 80, 0, 1, False, -1, [1]),
        ],
    )


def late_peer_rank() -> tuple[RankResult, RankGraph]:
    """Rank 1: a long host op [0,50), then the same all-reduce (match 1) at [50,100)."""
    return rank_result(
        1,
        [
            ("long_cpu", 0, 50, 0, 0, False, -1, []),
            ("allreduce", 50, 100, 0, 2, True, 1, [0]),
        ],
    )


def sync_rank() -> tuple[RankResult, RankGraph]:
    """A host sync waits for a kernel, step 95 ns::

    thread 1   launch [0,10)  sync [10,95): waits [10,90), active [90,95)
    stream 7                  kernel [10,90)
    """
    return rank_result(
        0,
        [
            ("launch", 0, 10, 0, 0, False, -1, []),
            ("kernel", 10, 90, 0, 1, False, -1, [0]),
            ("cudaDeviceSynchronize", 10, 95, 80, 0, False, -1, [0]),
        ],
    )


def gap_rank() -> tuple[RankResult, RankGraph]:
    """Host ops with untraced time between them: a [5,15), b [20,30) after a; step 30."""
    return rank_result(
        0,
        [
            ("a", 5, 15, 0, 0, False, -1, []),
            ("b", 20, 30, 0, 0, False, -1, [0]),
        ],
    )
