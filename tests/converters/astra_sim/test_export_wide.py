"""Wide graphs export in linear time: a join over thousands of kernels, a wide fan-out.

The quadratic step was the de-duplication of one node's dependencies against a list
(`build_rank_graph`): a join over N kernels cost N²/2 comparisons (20k wide: 8.4 CPU s,
now 0.3). `scripts/bench_export_wide.py` measures the scaling; these tests check that the
wide shapes still export every dependency exactly once, in order.
"""

from __future__ import annotations

from pathlib import Path

from lumos.converters.astra_sim.graph import build_rank_graph
from lumos.converters.chakra.stream import read_et
from lumos.proto import pb
from tests.converters.astra_sim.test_export import export, gpu, write_trace

WIDE = 3000


def _join(width: int) -> list[pb.Node]:
    """A launch kernel, `width` kernels after it, one kernel after all of them; the join
    lists every dependency twice (data and control), as merged traces do."""
    nodes = [gpu(0)]
    nodes += [gpu(i, deps=(0,)) for i in range(1, width + 1)]
    sink = gpu(width + 1, deps=tuple(range(1, width + 1)))
    sink.ctrl_deps.extend(range(width, 0, -1))
    return [*nodes, sink]


def test_wide_join_dependencies_deduplicated_in_order() -> None:
    nodes = _join(WIDE)
    graph = build_rank_graph(0, "t.0.et", nodes)
    assert graph.deps[-1] == list(range(1, WIDE + 1))  # data order first, repeats dropped
    assert all(graph.deps[i] == [0] for i in range(1, WIDE + 1))


def test_wide_join_exports_every_dependency_once(tmp_path: Path) -> None:
    trace = write_trace(tmp_path / "in", [_join(WIDE), _join(WIDE)])
    summary = export(trace, tmp_path / "b")
    assert summary.preflight.compute == 2 * (WIDE + 2)
    _, out = read_et(tmp_path / "b" / "workload" / "t.1.et")
    by_name = {n.name: n for n in out}
    join = by_name[f"k{WIDE + 1}"]
    deps = [*join.data_deps, *join.ctrl_deps]
    assert len(deps) == len(set(deps)) == WIDE
    assert {out[d].name for d in deps} == {f"k{i}" for i in range(1, WIDE + 1)}
    fan = [n for n in out if n.name.startswith("k") and n.name not in ("k0", f"k{WIDE + 1}")]
    assert len(fan) == WIDE and all(list(n.data_deps) == [by_name["k0"].id] for n in fan)
