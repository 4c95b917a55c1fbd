"""The ASTRA-sim export writes rank by rank: one rank held, nothing left when one is refused."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import lumos.converters.astra_sim.export as export_module
from lumos.converters.chakra.stream import read_et
from lumos.errors import ExportError
from lumos.proto import pb
from tests.converters.astra_sim.test_export import all_reduce, export, gpu, write_trace


def _ranks(n: int) -> list[list[pb.Node]]:
    return [[gpu(0), all_reduce(1, deps=(0,)), gpu(2, deps=(1,))] for _ in range(n)]


def test_each_rank_is_written_before_the_next_is_mapped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    trace = write_trace(tmp_path / "in", _ranks(4))
    out = tmp_path / "out"
    written_when_mapped: list[list[str]] = []
    real = export_module.export_rank

    def spy(graph: Any, *args: Any, **kw: Any) -> Any:
        staged = sorted(p.name for p in tmp_path.glob(".*/workload/*.et"))
        written_when_mapped.append(staged)
        return real(graph, *args, **kw)

    monkeypatch.setattr(export_module, "export_rank", spy)
    summary = export(trace, out)
    assert written_when_mapped == [[f"t.{r}.et" for r in range(k)] for k in range(4)]
    assert summary.preflight.nodes == 4 * 3
    for rank in range(4):
        _, nodes = read_et(out / "workload" / f"t.{rank}.et")
        assert [n.type for n in nodes] == [pb.COMP_NODE, pb.COMM_COLL_NODE, pb.COMP_NODE]


def test_a_refused_last_rank_removes_the_ranks_already_written(tmp_path: Path) -> None:
    ranks = _ranks(3)
    ranks[2][2].data_deps.append(99)  # a dependency on a node the file does not hold
    trace = write_trace(tmp_path / "in", ranks)
    with pytest.raises(ExportError) as err:
        export(trace, tmp_path / "out")
    text = str(err.value)
    assert "1 of 3 ranks refused; nothing written" in text
    assert "rank 2 node 2 'k2': depends on id 99" in text and "t.2.et" in text
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in"]  # no bundle, no staging
