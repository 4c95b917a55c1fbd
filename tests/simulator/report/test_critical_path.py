"""Critical path on hand-made runs whose answer is drawn in tests/simulator/report/cases.py."""

from __future__ import annotations

from lumos.simulator.report.critical_path import StepKind, critical_path
from tests.simulator.report.cases import (
    gap_rank,
    late_peer_rank,
    overlap_rank,
    simulated,
    sync_rank,
)


def names(path) -> list[tuple[int, str, int]]:  # type: ignore[no-untyped-def]
    return [(s.rank, s.name, s.dur_ns) for s in path.steps]


def test_path_crosses_to_the_late_peer_of_a_collective() -> None:
    path = critical_path(simulated(overlap_rank(), late_peer_rank()))
    assert path.total_ns == 100
    assert names(path) == [(1, "long_cpu", 50), (0, "allreduce", 50)]
    assert path.ranks == [1, 0]
    assert sum(s.dur_ns for s in path.steps) == path.total_ns


def test_single_rank_collective_wait_without_a_late_peer_is_a_wait_step() -> None:
    path = critical_path(simulated(overlap_rank()))
    assert names(path) == [
        (0, "launch_a", 10),
        (0, "launch_ar", 10),
        (0, "(gap)", 20),
        (0, "allreduce", 10),
        (0, "allreduce", 50),
    ]
    assert [s.kind for s in path.steps][2:4] == [StepKind.GAP, StepKind.WAIT]
    assert path.total_ns == 100 == sum(s.dur_ns for s in path.steps)


def test_sync_wait_leads_to_the_gpu_task_it_waited_for() -> None:
    path = critical_path(simulated(sync_rank()))
    assert names(path) == [(0, "launch", 10), (0, "kernel", 80), (0, "cudaDeviceSynchronize", 5)]
    assert [s.category for s in path.steps] == ["cpu", "gpu compute", "cpu"]


def test_untraced_time_is_credited_as_gaps() -> None:
    path = critical_path(simulated(gap_rank()))
    assert names(path) == [(0, "(gap)", 5), (0, "a", 10), (0, "(gap)", 5), (0, "b", 10)]
    by_cat = {c.name: (c.total_ns, c.count) for c in path.by_category()}
    assert by_cat == {"cpu": (20, 2), "gap": (10, 2)}
    top = path.by_name(1)[0]
    assert top.name == "(gap)" and top.total_ns == 10 and abs(top.share - 10 / 30) < 1e-12


def test_to_dict_lists_categories_and_top_names() -> None:
    out = critical_path(simulated(overlap_rank(), late_peer_rank())).to_dict(top=1)
    assert out["total_ns"] == 100 and out["ranks"] == [1, 0]
    assert out["top"] == [
        {"name": "allreduce", "category": "communication", "total_ns": 50, "count": 1, "share": 0.5}
    ]
