"""Cross-stream waits without `cuda_sync` events: pairs inferred from program order, checked
against the recorded kernel starts (older PyTorch/Kineto, ROCm)."""

from __future__ import annotations

import tarfile
from pathlib import Path

import pytest

from lumos.converters.chakra.attrs import attrs_dict
from lumos.converters.chakra.conventions import INFERRED_EVENT_BASE
from lumos.converters.chakra.stream import read_et
from lumos.converters.pytorch.convert import convert
from lumos.proto import pb
from lumos.simulator.report.compare import compare
from lumos.simulator.report.measured import read_measured
from lumos.simulator.run import SimOptions, simulate
from tests.conftest import fixture_path
from tests.converters.pytorch.kineto_snippet import Snippet
from tests.converters.pytorch.test_batched_p2p import _rank_trace

#: one rank of a larger job (a DLRM worker, an HTA rank): a partial set on purpose
PART = SimOptions(allow_partial=True)

HTA = "HolisticTraceAnalysis/tests/data"
DLRM = "param/et_replay/tests/inputs"
ALL_REDUCE = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
NAMES = {
    "cuda": ("cudaStreamWaitEvent", "cudaEventRecord", "cudaLaunchKernel", "cudaStreamSynchronize"),
    "hip": ("hipStreamWaitEvent", "hipEventRecord", "hipLaunchKernel", "hipStreamSynchronize"),
}


def _convert(path: Path, out: Path) -> tuple[list[pb.Node], dict[str, int]]:
    result = convert([path], out, prefix="t")
    rank = result.ranks[0]
    return read_et(rank.path)[1], rank.syncs


def _edges(nodes: list[pb.Node]) -> list[tuple[str, str]]:
    """Cross-stream GPU → GPU data edges as (source name, target name)."""
    by_id = {n.id: n for n in nodes}
    out = []
    for n in nodes:
        stream = attrs_dict(n).get("stream")
        for dep in n.data_deps:
            other = attrs_dict(by_id[dep]).get("stream")
            if stream is not None and other is not None and other != stream:
                out.append((by_id[dep].name, n.name))
    return out


def _side_stream_step(api: str, records: bool) -> Snippet:
    """compute A (s7) → side X (s20) → compute B (s7), ordered only by stream waits;
    the CPU then syncs on s7, so the step's end depends on both waits."""
    wait, record, launch, sync = NAMES[api]
    k = Snippet()
    k.step(1, 1000.0, 800.0)
    k.launch("kernel_A", 1010.0, stream=7, start=1020.0, dur=200.0, call=launch)
    if records:
        k.runtime(record, 1016.0, 2.0)
    k.runtime(wait, 1020.0, 2.0)
    k.launch("kernel_X", 1025.0, stream=20, start=1221.0, dur=300.0, call=launch)
    if records:
        k.runtime(record, 1031.0, 2.0)
    k.runtime(wait, 1035.0, 2.0)
    k.launch("kernel_B", 1040.0, stream=7, start=1522.0, dur=100.0, call=launch)
    k.runtime(sync, 1050.0, 575.0)  # returns at 1625, after B
    k.op("aten::add", 1630.0, 10.0)
    return k


@pytest.mark.parametrize("api", ["cuda", "hip"])
def test_stream_wait_without_cuda_sync_flows_is_inferred(tmp_path: Path, api: str) -> None:
    """No cudaEventRecord at all (PARAM's DLRM Kineto): each wait pairs with the most
    recently launched other stream; the waiting stream is the next launch's."""
    path = _side_stream_step(api, records=False).write(tmp_path / "rank0.json.gz")
    nodes, syncs = _convert(path, tmp_path / "et")
    assert sorted(_edges(nodes)) == sorted({("kernel_A", "kernel_X"), ("kernel_X", "kernel_B")})
    assert syncs["inferred"] == 3 and syncs["rejected"] == 0  # 2 waits + the stream sync
    waits = [attrs_dict(n) for n in nodes if n.name == NAMES[api][0]]
    assert [(w["sync_stream"], w["sync_inferred"]) for w in waits] == [(20, True), (7, True)]
    result = simulate(tmp_path / "et" / "t")
    tasks, g = result.ranks[0].tasks, result.graphs[0]
    end = {g.name(i): int(tasks.end_ns[i]) for i in range(len(g))}
    start = {g.name(i): int(tasks.start_ns[i]) for i in range(len(g))}
    assert start["kernel_X"] >= end["kernel_A"] and start["kernel_B"] >= end["kernel_X"]
    comparison = compare(result, read_measured(tmp_path / "et" / "t"))
    assert comparison.error_pct is not None and abs(comparison.error_pct) < 1.0


@pytest.mark.parametrize("api", ["cuda", "hip"])
def test_stream_wait_pairs_with_the_last_event_record(tmp_path: Path, api: str) -> None:
    """Records without cuda_sync (HTA's nccl_data, ROCm): a wait pairs with the event
    recorded last before it on its thread, on the stream launched on before the record;
    both get a lumos event id, so the simulator's runtime sync resolves the pair too."""
    path = _side_stream_step(api, records=True).write(tmp_path / "rank0.json.gz")
    nodes, syncs = _convert(path, tmp_path / "et")
    assert sorted(_edges(nodes)) == sorted({("kernel_A", "kernel_X"), ("kernel_X", "kernel_B")})
    recs = [attrs_dict(n) for n in nodes if n.name == NAMES[api][1]]
    waits = [attrs_dict(n) for n in nodes if n.name == NAMES[api][0]]
    assert [r["sync_stream"] for r in recs] == [7, 20]
    assert all(r["event_record"] >= INFERRED_EVENT_BASE for r in recs)
    assert [w["sync_event"] for w in waits] == [r["event_record"] for r in recs]
    assert (syncs["inferred"], syncs["rejected"]) == (3, 0)
    comparison = compare(
        simulate(tmp_path / "et" / "t", PART), read_measured(tmp_path / "et" / "t")
    )
    assert comparison.error_pct is not None and abs(comparison.error_pct) < 1.0


def test_inferred_wait_contradicted_by_timestamps_is_dropped(tmp_path: Path) -> None:
    """DDP's backward thread waits right after an async all-reduce launch, but its next
    kernel ran during the all-reduce: that wait was not for it. No edge is invented."""
    k = Snippet()
    k.step(1, 1000.0, 800.0)
    k.launch("ncclKernel_AllReduce_RING_LL_Sum_float", 1010.0, stream=20, start=1020.0, dur=500.0)
    k.runtime("cudaStreamWaitEvent", 1020.0, 2.0)
    k.launch("kernel_B", 1030.0, stream=7, start=1040.0, dur=10.0)
    nodes, syncs = _convert(k.write(tmp_path / "rank0.json.gz"), tmp_path / "et")
    assert _edges(nodes) == []
    assert (syncs["inferred"], syncs["rejected"]) == (0, 1)


def test_wait_on_an_event_of_its_own_stream_orders_nothing(tmp_path: Path) -> None:
    """cuDNN's pattern (HTA AlexNet): record on s7, then side streams without work wait
    on it; the next launch is on s7 itself, so there is nothing to order."""
    k = Snippet()
    k.step(1, 1000.0, 800.0)
    k.launch("kernel_side", 1005.0, stream=20, start=1010.0, dur=5.0)
    k.launch("kernel_A", 1010.0, stream=7, start=1020.0, dur=20.0)
    k.runtime("cudaEventRecord", 1016.0, 2.0)
    for t in (1020.0, 1023.0, 1026.0):
        k.runtime("cudaStreamWaitEvent", t, 2.0)
    k.launch("kernel_B", 1030.0, stream=7, start=1041.0, dur=10.0)
    nodes, syncs = _convert(k.write(tmp_path / "rank0.json.gz"), tmp_path / "et")
    assert _edges(nodes) == []
    assert (syncs["same_stream"], syncs["inferred"]) == (3, 0)


def test_nccl_trace_with_records_but_no_cuda_sync(tmp_path: Path) -> None:
    """HTA's NCCL trace (A100, ProcessGroupNCCL): cudaEventRecord + cudaStreamWaitEvent,
    no cuda_sync. The compute → NCCL-stream waits before each all-reduce and the
    NCCL → compute waits after are inferred; waits the kernel starts contradict are not."""
    path = fixture_path(f"{HTA}/nccl_parser_config/nccl_data.json.gz")
    nodes, syncs = _convert(path, tmp_path)
    # its 8 cudaEventSynchronize (timer events, recorded before the step) have no record
    # on their thread in the step: unresolved (they were counted as recorded, edge-less)
    assert syncs == {
        "recorded": 0,
        "inferred": 19,
        "rejected": 8,
        "same_stream": 1,
        "unresolved": 8,
    }
    edges = _edges(nodes)
    into_nccl = [(a, b) for a, b in edges if b.startswith("ncclKernel")]
    assert len(into_nccl) >= 5 and all(not a.startswith("ncclKernel") for a, _ in into_nccl)
    assert any(a.startswith("ncclKernel") and not b.startswith("ncclKernel") for a, b in edges)


def test_dlrm_waits_bring_back_the_stream_sync_wait(tmp_path: Path) -> None:
    """PARAM's DLRM rank 4 (V100, no cudaEventRecord in the trace): a 3.8 ms
    cudaStreamSynchronize waits for a copy queued behind an all-to-all on the NCCL stream.
    Without the inferred waits the copy ran at once (rank 4 −8.7% once the sync's wait is
    no longer replayed twice); with them rank 4 replays within 1%."""
    with tarfile.open(fixture_path(f"{DLRM}/dlrm_kineto.tar.gz")) as tar:
        member = next(m for m in tar.getmembers() if "worker4_" in m.name)
        (tmp_path / "rank4.json").write_bytes(tar.extractfile(member).read())  # type: ignore[union-attr]
    nodes, syncs = _convert(tmp_path / "rank4.json", tmp_path / "et")
    assert syncs["inferred"] >= 30 and syncs["rejected"] >= 1
    assert any(a.startswith("ncclKernel") for a, _ in _edges(nodes))
    comparison = compare(
        simulate(tmp_path / "et" / "t", PART), read_measured(tmp_path / "et" / "t")
    )
    assert comparison.error_pct is not None and abs(comparison.error_pct) < 1.0


def test_wait_after_the_threads_last_launch_makes_its_current_stream_wait(
    tmp_path: Path,
) -> None:
    """DDP's last bucket: the autograd thread launches a kernel on s7 and the all-reduce on
    the NCCL stream, then waits for it (`work.wait()`) and launches nothing more; the next
    kernel on s7 comes from the main thread (the optimizer) and started when the all-reduce
    ended. The wait has no launch after it on its thread: it was left unresolved and the
    edge missing (PARAM's DLRM, every rank). Its stream is the thread's other stream, s7."""
    k = Snippet()
    k.step(1, 1000.0, 800.0)
    k.launch("kernel_grad", 1005.0, stream=7, start=1010.0, dur=10.0, tid=2)
    k.launch(
        "ncclKernel_AllReduce_RING_LL_Sum_float", 1010.0, stream=20, start=1021.0, dur=500.0, tid=2
    )
    k.runtime("cudaStreamWaitEvent", 1020.0, 2.0, tid=2)
    k.launch("kernel_optim", 1100.0, stream=7, start=1522.0, dur=10.0)
    nodes, syncs = _convert(k.write(tmp_path / "rank0.json.gz"), tmp_path / "et")
    assert _edges(nodes) == [("ncclKernel_AllReduce_RING_LL_Sum_float", "kernel_optim")]
    assert (syncs["inferred"], syncs["unresolved"]) == (1, 0)
    wait = next(attrs_dict(n) for n in nodes if n.name == "cudaStreamWaitEvent")
    assert (wait["sync_stream"], wait["sync_inferred"]) == (7, True)


def test_dlrm_last_all_reduce_orders_the_kernel_after_it(tmp_path: Path) -> None:
    """PARAM's DLRM rank 0: the optimizer kernel that started 2 µs after the last all-reduce
    ended (launched 0.5 ms before) now depends on it; the replay stays exact."""
    with tarfile.open(fixture_path(f"{DLRM}/dlrm_kineto.tar.gz")) as tar:
        member = next(m for m in tar.getmembers() if "worker0_" in m.name)
        (tmp_path / "rank0.json").write_bytes(tar.extractfile(member).read())  # type: ignore[union-attr]
    nodes, syncs = _convert(tmp_path / "rank0.json", tmp_path / "et")
    by_id = {n.id: n for n in nodes}
    ars = [n for n in nodes if n.name.startswith("ncclKernel_AllReduce")]
    last = max(ars, key=lambda n: attrs_dict(n)["start_ns"])
    end = attrs_dict(last)["start_ns"] + attrs_dict(last)["dur_ns"]
    after = [
        n
        for n in nodes
        if attrs_dict(n).get("stream") == 7 and 0 <= attrs_dict(n)["start_ns"] - end <= 2000
    ]
    assert len(after) == 1 and last.id in after[0].data_deps, [
        by_id[d].name for d in after[0].data_deps
    ]
    assert syncs["unresolved"] <= 9
    comparison = compare(
        simulate(tmp_path / "et" / "t", PART), read_measured(tmp_path / "et" / "t")
    )
    assert comparison.error_pct is not None and abs(comparison.error_pct) < 0.1


def _scratch_memset_before_the_record(rank: int) -> Snippet:
    """ProcessGroupNCCL without `cuda_sync` events: a scratch memset launched onto NCCL
    stream 30, then the record (on compute stream 7, not named) and the NCCL stream's
    wait, then the all-reduce, which is held until the 100 µs GEMM on stream 7 ends."""
    k = _rank_trace(rank, 2)
    k.step(1, 1000.0, 400.0)
    k.launch("gemm", 1005.0, 7, 1015.0, 100.0)
    k.launch("Memset (Device)", 1012.0, 30, 1020.0, 2.0, call="cudaMemsetAsync")
    k.runtime("cudaEventRecord", 1017.0, 1.0)
    k.runtime("cudaStreamWaitEvent", 1018.5, 1.0)
    k.op("c10d::allreduce_", 1020.0, 10.0, args={"Input Dims": [[1_048_576]]})
    k.annotation("nccl:all_reduce", 1022, 6.0)
    start = 1120.0 + 3 * rank
    k.launch(ALL_REDUCE, 1023, 30, start, 1250.0 - start)
    k.launch("Memcpy DtoD (Device -> Device)", 1032.0, 30, 1252.0, 8.0, call="cudaMemcpyAsync")
    k.runtime("cudaDeviceSynchronize", 1040.0, 222.0)
    k.op("aten::zero_", 1380.0, 5.0)
    return k


def test_copy_on_the_waiting_stream_before_the_record_does_not_hide_the_wait(
    tmp_path: Path,
) -> None:
    """The record's stream was guessed from the launch before it, the memset on the NCCL
    stream: the wait read as one on the NCCL stream's own event (`same_stream`, no edge),
    the all-reduce ran 82 µs early and both ranks replayed −21.25 %. The all-reduce was
    held until the GEMM ended 5 µs before it: the record was on stream 7. Now 0.00 %."""
    paths = [
        _scratch_memset_before_the_record(r).write(tmp_path / f"rank{r}.json.gz") for r in (0, 1)
    ]
    result = convert(paths, tmp_path / "et", prefix="t")
    for summary in result.ranks:
        assert (summary.syncs["inferred"], summary.syncs["same_stream"]) == (1, 0)
        assert ("gemm", ALL_REDUCE) in _edges(read_et(summary.path)[1])
    prefix = tmp_path / "et" / "t"
    rows = compare(simulate(prefix), read_measured(prefix)).ranks
    assert [abs(r.error_pct or 0.0) < 0.005 for r in rows] == [True, True]
