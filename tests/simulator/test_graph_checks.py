"""The load-time cycle check: dependencies on later nodes (a converted trace's stream syncs
wait for a copy listed after them) are checked in their own index windows first."""

from __future__ import annotations

import numpy as np

from lumos.converters.chakra.dag import blocked_nodes
from lumos.simulator.graph import RankGraph
from lumos.simulator.graph_checks import cycle_problems


def _graph(n: int, edges: list[tuple[int, int]]) -> RankGraph:
    """Node `after` depends on node `before` for each (before, after)."""
    deps: list[list[int]] = [[] for _ in range(n)]
    for before, after in edges:
        deps[after].append(before)
    ptr = np.concatenate(([0], np.cumsum([len(d) for d in deps]))).astype(np.int64)
    flat = np.array([d for ds in deps for d in ds], np.int32)
    return RankGraph.from_arrays(0, n, dep_ptr=ptr, dep_idx=flat)


def test_stream_sync_waiting_for_a_later_copy_is_no_cycle() -> None:
    """DLRM's pattern: sync (node 3) waits for the copy (node 5) launched before it and
    listed after it; the copy's launch (node 2) comes first."""
    g = _graph(8, [(0, 1), (1, 2), (2, 3), (3, 4), (2, 5), (5, 3), (4, 6), (6, 7)])
    assert cycle_problems(g) == []


def test_cycle_through_two_later_dependencies_is_found() -> None:
    """1 -> 4 -> 2 -> 5 -> 1: two dependencies on later nodes whose windows overlap; node 7
    waits behind the cycle and is counted with it."""
    g = _graph(8, [(0, 1), (1, 4), (4, 2), (2, 5), (5, 1), (5, 7), (0, 6)])
    (problem,) = cycle_problems(g)
    assert "dependency cycle among 5 nodes" in problem


def test_self_dependency_is_a_cycle() -> None:
    g = _graph(3, [(0, 1), (1, 1), (1, 2)])
    (problem,) = cycle_problems(g)
    assert "among 2 nodes" in problem


def test_windowed_check_agrees_with_a_whole_sort_on_random_graphs() -> None:
    rng = np.random.default_rng(7)
    for _ in range(300):
        n = int(rng.integers(2, 40))
        m = int(rng.integers(1, 3 * n))
        before = rng.integers(0, n, m)
        after = np.where(
            rng.random(m) < 0.9,
            np.minimum(before + rng.integers(1, 4, m), n - 1),
            rng.integers(0, n, m),
        )
        edges = list(zip(before.tolist(), after.tolist(), strict=True))
        g = _graph(n, edges)
        owner = np.repeat(np.arange(n), np.diff(g.dep_ptr))
        whole = blocked_nodes(n, g.dep_idx.astype(np.int64), owner)
        problems = cycle_problems(g)
        assert bool(problems) == any(whole)
        if problems:
            assert f"among {sum(whole)} nodes" in problems[0]
