"""Per-rank breakdown: interval arithmetic and the four parts on hand-made runs."""

from __future__ import annotations

import numpy as np

from lumos.simulator.report.breakdown import (
    breakdown,
    breakdown_of,
    intersection_ns,
    merge_intervals,
    rank_breakdown,
)
from tests.simulator.report.cases import late_peer_rank, overlap_rank, simulated, sync_rank


def arr(*values: int) -> np.ndarray:
    return np.array(values, dtype=np.int64)


def test_merge_intervals_joins_overlapping_and_touching_runs_and_drops_empty_ones() -> None:
    starts, ends = merge_intervals(arr(30, 0, 5, 12, 40, 50), arr(35, 10, 12, 20, 40, 60))
    assert starts.tolist() == [0, 30, 50]
    assert ends.tolist() == [20, 35, 60]


def test_intersection_of_two_run_sets() -> None:
    a = merge_intervals(arr(0, 50), arr(20, 80))
    b = merge_intervals(arr(10, 60, 90), arr(55, 70, 95))
    # [10,20) + [50,55) + [60,70)
    assert intersection_ns(a, b) == 25
    assert intersection_ns(a, merge_intervals(arr(), arr())) == 0


def test_breakdown_of_clips_to_the_window() -> None:
    b = breakdown_of(3, (0, 50), (arr(-10, 40), arr(20, 90)), (arr(10), arr(45)))
    assert b.parts() == {
        "exposed_compute": 15,
        "overlapped": 15,
        "exposed_transfer": 20,
        "peer_wait": 0,
        "backlog": 0,
        "idle": 0,
    }
    assert b.rank == 3 and b.iteration_ns == 50


def test_overlap_rank_breakdown_matches_the_drawn_timeline() -> None:
    result, _ = overlap_rank()
    b = rank_breakdown(result)
    assert (b.exposed_compute_ns, b.overlapped_ns, b.exposed_comm_ns, b.idle_ns) == (40, 30, 20, 10)
    assert sum(b.parts().values()) == b.iteration_ns == 100
    assert b.basis == "gpu"
    assert b.compute_ns == 70 and b.comm_ns == 50


def test_a_sync_waiting_for_the_gpu_is_not_compute() -> None:
    sync, _ = sync_rank()
    b = rank_breakdown(sync)
    # only the kernel [10,90) counts; the host sync is not GPU compute
    assert b.parts() == {
        "exposed_compute": 80,
        "overlapped": 0,
        "exposed_transfer": 0,
        "peer_wait": 0,
        "backlog": 0,
        "idle": 15,
    }


def test_cpu_only_rank_counts_its_threads_as_compute() -> None:
    rank, _ = late_peer_rank()  # long_cpu on a thread, all-reduce on a stream
    b = rank_breakdown(rank)
    assert b.basis == "cpu"
    assert b.parts() == {
        "exposed_compute": 50,
        "overlapped": 0,
        "exposed_transfer": 50,
        "peer_wait": 0,
        "backlog": 0,
        "idle": 0,
    }


def test_breakdown_of_every_rank() -> None:
    parts = breakdown(simulated(overlap_rank(), late_peer_rank()))
    assert [b.rank for b in parts] == [0, 1]
    assert all(sum(b.parts().values()) == b.iteration_ns for b in parts)
