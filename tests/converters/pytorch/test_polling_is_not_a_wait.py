"""Polling instead of syncing: a `while not event.query()` loop (`cudaEventQuery`,
`cudaStreamQuery`) never blocks, so no query is a wait; the loop is replayed as the
calls and gaps it was. A blocking `cudaEventSynchronize` after it is a wait."""

from __future__ import annotations

from pathlib import Path

from lumos.converters.chakra.attrs import attrs_dict
from lumos.converters.chakra.stream import read_et
from lumos.converters.pytorch.convert import convert
from lumos.simulator.report.compare import compare
from lumos.simulator.report.measured import read_measured
from lumos.simulator.run import simulate
from tests.converters.pytorch.kineto_snippet import Snippet


def test_query_loop_is_replayed_as_recorded_and_the_sync_after_it_waits(tmp_path: Path) -> None:
    """31 queries poll a 300 µs GEMM's event every 10 µs, the 32nd (after it ended)
    succeeds; then an add kernel, a stream query and an event sync on the add's event,
    which blocks 8 µs. No query gets a dependency or a sync attribute; the event sync
    waits for the add kernel. Replay within 0.01%; main b45c003 read −0.71%, all of it
    the add kernel's 3 µs launch latency (a dispatch gap): its reading of the polling
    was already right, which this keeps."""
    k = Snippet()
    k.step(1, 1000.0, 420.0)
    k.op("aten::mm", 1005.0, 10.0)
    k.launch("gemm", 1007.0, stream=7, start=1015.0, dur=300.0)
    k.runtime("cudaEventRecord", 1013.0, 2.0)
    for i in range(32):
        k.runtime("cudaEventQuery", 1020.0 + 10.0 * i, 2.0)
    k.op("aten::add", 1335.0, 10.0)
    k.launch("add_kernel", 1336.0, stream=7, start=1344.0, dur=20.0)  # ends 1364
    k.runtime("cudaEventRecord", 1342.0, 2.0)
    k.runtime("cudaStreamQuery", 1348.0, 2.0)
    k.runtime("cudaEventSynchronize", 1356.0, 10.0)  # returns at 1366
    k.op("aten::zero_", 1370.0, 5.0)
    result = convert([k.write(tmp_path / "rank0.json.gz")], tmp_path, prefix="t")
    _, nodes = read_et(result.ranks[0].path)
    by_id = {n.id: n for n in nodes}
    queries = [n for n in nodes if n.name in ("cudaEventQuery", "cudaStreamQuery")]
    assert len(queries) == 33
    assert not any(n.data_deps for n in queries)
    assert not any("sync_kind" in attrs_dict(n) for n in queries)
    assert [attrs_dict(n)["gap_ns"] for n in queries[1:32]] == [8000] * 31
    sync = next(n for n in nodes if n.name == "cudaEventSynchronize")
    assert [by_id[d].name for d in sync.data_deps] == ["add_kernel"]
    assert attrs_dict(sync)["sync_wait_ns"] == 8000
    assert result.ranks[0].syncs["inferred"] == 1
    row = compare(simulate(tmp_path / "t"), read_measured(tmp_path / "t")).ranks[0]
    assert row.error_pct is not None and abs(row.error_pct) < 0.01
