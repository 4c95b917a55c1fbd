"""Patterns of real GPU steps checked in round 4 of the replay work and found right
already (`docs/accuracy.md`, round 4): each a hand-made trace in Kineto's field layout,
converted and replayed per rank against its own measured step."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from lumos.converters.pytorch.convert import convert
from lumos.simulator.load import load_graphs
from lumos.simulator.report.compare import compare
from lumos.simulator.report.measured import read_measured
from lumos.simulator.run import simulate
from tests.converters.pytorch.kineto_snippet import DEVICE, Snippet
from tests.converters.pytorch.test_batched_p2p import _rank_trace

AR = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
AG = "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
COPY = "Memcpy DtoD (Device -> Device)"
DIMS = {"Input Dims": [[1_048_576]], "Input type": ["float"]}


def _copy_then_stream_sync(rank: int) -> Snippet:
    """A pinned DtoH `cudaMemcpyAsync` is the stream's last op when the stream sync waits."""
    k = Snippet()
    k.step(1, 1000.0, 400.0)
    k.launch("gemm", 1010.0, 7, 1020.0, 200.0)
    k.launch("Memcpy DtoH (Device -> Pinned)", 1020.0, 7, 1222.0, 30.0, call="cudaMemcpyAsync")
    k.runtime("cudaStreamSynchronize", 1030.0, 225.0)
    k.op("aten::add", 1260.0, 10.0)
    return k


def _event_of_the_previous_step(rank: int) -> Snippet:
    """An event sync and a stream wait on events recorded before the profiled window."""
    k = Snippet()
    k.step(1, 1000.0, 400.0)
    k.launch("gemm", 1010.0, 7, 1020.0, 100.0)
    k.runtime("cudaEventSynchronize", 1020.0, 50.0)
    k.op("aten::add", 1075.0, 10.0)
    k.runtime("cudaStreamWaitEvent", 1090.0, 2.0)
    k.launch("side", 1095.0, 9, 1125.0, 50.0)
    k.runtime("cudaDeviceSynchronize", 1105.0, 72.0)
    k.op("aten::zero_", 1390.0, 5.0)
    return k


def _two_groups_on_one_stream(rank: int) -> Snippet:
    """Collectives of process groups "0" and "1" interleaved on NCCL stream 30."""
    k = _rank_trace(rank, 2)
    assert k.distributed is not None
    k.distributed["pg_config"].append(
        {"pg_name": "1", "pg_desc": "tp", "pg_size": 2, "ranks": [0, 1]}
    )
    k.step(1, 1000.0, 500.0)
    k.launch("gemm", 1005.0, 7, 1015.0, 100.0)
    t = 1020.0
    spans = [
        (1120.0 + 5 * rank, 1200.0, AR, "0", "allreduce"),
        (1202.0, 1260.0 + 3 * rank, AG, "1", "_allgather_base"),
        (1262.0 + 3 * rank, 1320.0, AR, "1", "allreduce"),
        (1322.0, 1400.0, AR, "0", "allreduce"),
    ]
    for start, end, kernel, pg, name in spans:
        comms = {
            "Collective name": name,
            "dtype": "Float",
            "In msg nelems": 1 << 20,
            "Out msg nelems": (1 << 20) * (2 if name == "_allgather_base" else 1),
            "Group size": 2,
            "Process Group Name": pg,
            "Process Group Description": "x",
            "Process Group Ranks": "[0, 1]",
        }
        k.op(f"c10d::{name}_", t, 30.0)
        k.op("record_param_comms", t + 2.0, 26.0, args=comms)
        k.annotation(f"nccl:{name}", t + 4.0, 20.0)
        k.launch(kernel, t + 6.0, 30, start, end - start)
        k.events[-2]["args"].update(comms)
        t += 35.0
    k.runtime("cudaDeviceSynchronize", t, 1402.0 - t)
    k.op("aten::zero_", 1420.0, 5.0)
    return k


def _kernel_before_its_peers_launch(rank: int) -> Snippet:
    """Rank 1's host is 150 µs late: rank 0's all-reduce kernel starts 65 µs before rank
    1's and waits for it inside the kernel."""
    k = _rank_trace(rank, 2)
    k.step(1, 1000.0, 320.0)
    k.launch("gemm", 1005.0, 7, 1015.0, 100.0)
    t = 1020.0 if rank == 0 else 1170.0
    if rank == 1:
        k.op("aten::slow_host", 1015.0, 150.0)
    k.op("c10d::allreduce_", t, 14.0, args=DIMS)
    k.runtime("cudaEventRecord", t + 1, 1.0)
    k.runtime("cudaStreamWaitEvent", t + 2.5, 1.0)
    k.annotation("nccl:all_reduce", t + 4, 8.0)
    start = 1117.0 if rank == 0 else 1182.0
    k.launch(AR, t + 5, 30, start, 1300.0 - start)
    k.runtime("cudaDeviceSynchronize", t + 16, 1302.0 - t - 16)
    k.op("aten::zero_", 1305.0, 5.0)
    return k


def _idle_prologue(rank: int) -> Snippet:
    """150 µs of host work (data loading) before the step's first kernel."""
    k = Snippet()
    k.step(1, 1000.0, 400.0)
    k.op("dataloader", 1002.0, 150.0)
    k.launch("k1", 1160.0, 7, 1170.0, 100.0)
    k.runtime("cudaDeviceSynchronize", 1170.0, 102.0)
    k.op("aten::add", 1280.0, 10.0)
    return k


def _gpu_user_annotation(rank: int) -> Snippet:
    """A `gpu_user_annotation` row spanning two kernels on their stream."""
    k = Snippet()
    k.step(1, 1000.0, 400.0)
    k.annotation("forward", 1005.0, 22.0)
    k.launch("k1", 1010.0, 7, 1020.0, 100.0)
    k.launch("k2", 1016.0, 7, 1122.0, 100.0)
    row = {"ph": "X", "cat": "gpu_user_annotation", "name": "forward", "pid": DEVICE, "tid": 7}
    k.events.append(row | {"ts": 1020.0, "dur": 202.0, "args": {"External id": 1001}})
    k.runtime("cudaDeviceSynchronize", 1030.0, 194.0)
    k.op("aten::add", 1230.0, 10.0)
    return k


def _hip_names(rank: int) -> Snippet:
    """ROCm: `hipLaunchKernel`, `hipEventRecord` + `hipStreamWaitEvent`,
    `hipExtLaunchKernel`, `hipMemcpyAsync`, `hipStreamSynchronize`."""
    k = Snippet()
    k.step(1, 1000.0, 400.0)
    k.launch("Cijk_gemm", 1010.0, 7, 1020.0, 100.0, call="hipLaunchKernel")
    k.runtime("hipEventRecord", 1016.0, 2.0)
    k.runtime("hipStreamWaitEvent", 1019.0, 2.0)
    k.launch("side_kernel", 1022.0, 9, 1122.0, 50.0, call="hipExtLaunchKernel")
    k.launch("Memcpy DtoH (Device -> Pinned)", 1030.0, 9, 1174.0, 10.0, call="hipMemcpyAsync")
    k.runtime("hipStreamSynchronize", 1040.0, 146.0)
    k.op("aten::add", 1190.0, 10.0)
    return k


def _copies_on_the_nccl_stream(rank: int) -> Snippet:
    """A tensor-list collective: memset and copy into the flat buffer on the NCCL stream
    after its wait for the compute stream, the kernel, the copy out."""
    k = _rank_trace(rank, 2)
    k.step(1, 1000.0, 400.0)
    k.launch("gemm", 1005.0, 7, 1015.0, 100.0)
    k.runtime("cudaEventRecord", 1012.0, 1.0)
    k.runtime("cudaStreamWaitEvent", 1013.5, 1.0)
    k.launch("Memset (Device)", 1015.0, 30, 1117.0, 2.0, call="cudaMemsetAsync")
    k.launch(COPY, 1021.0, 30, 1121.0, 6.0, call="cudaMemcpyAsync")
    k.op("c10d::allreduce_", 1027.0, 10.0, args=DIMS)
    k.annotation("nccl:all_reduce", 1029, 6.0)
    k.launch(AR, 1030, 30, 1130.0 + 3 * rank, 120.0 - 3 * rank)
    k.launch(COPY, 1038.0, 30, 1252.0, 8.0, call="cudaMemcpyAsync")
    k.runtime("cudaDeviceSynchronize", 1045.0, 217.0)
    k.op("aten::zero_", 1380.0, 5.0)
    return k


def _offset_step_numbers(rank: int) -> Snippet:
    """Rank 0 profiled ProfilerStep#5 and #6, rank 1 #6 and #7."""
    k = _rank_trace(rank, 2)
    for i, n in enumerate((5, 6) if rank == 0 else (6, 7)):
        t0 = 1000.0 + 1000.0 * i
        k.step(n, t0, 300.0)
        k.launch("gemm", t0 + 7, 7, t0 + 15, 100.0)
        k.op("c10d::allreduce_", t0 + 20, 10.0, args=DIMS)
        k.annotation("nccl:all_reduce", t0 + 22, 6.0)
        start = t0 + 120.0 + 3.0 * rank
        k.launch(AR, t0 + 23, 30, start, t0 + 270.0 - start)
        k.runtime("cudaDeviceSynchronize", t0 + 32, 240.0)
        k.op("aten::zero_", t0 + 290, 5.0)
    return k


CASES: dict[str, tuple[Callable[[int], Snippet], int]] = {
    "stream_sync_after_a_copy": (_copy_then_stream_sync, 1),
    "event_of_the_previous_step": (_event_of_the_previous_step, 1),
    "two_groups_on_one_nccl_stream": (_two_groups_on_one_stream, 2),
    "kernel_before_its_peers_launch": (_kernel_before_its_peers_launch, 2),
    "idle_prologue": (_idle_prologue, 1),
    "gpu_user_annotation": (_gpu_user_annotation, 1),
    "hip_names": (_hip_names, 1),
    "copies_on_the_nccl_stream": (_copies_on_the_nccl_stream, 2),
    "offset_step_numbers": (_offset_step_numbers, 2),
}


@pytest.mark.parametrize("case", list(CASES))
def test_round4_pattern_replays_each_rank_as_measured(tmp_path: Path, case: str) -> None:
    make, ranks = CASES[case]
    paths = [make(r).write(tmp_path / f"rank{r}.json.gz") for r in range(ranks)]
    result = convert(paths, tmp_path / "et", prefix="t")
    assert result.problems == []
    assert len({s.step for s in result.ranks}) == 1
    prefix = tmp_path / "et" / "t"
    rows = compare(simulate(prefix), read_measured(prefix)).ranks
    assert len(rows) == ranks
    for row in rows:
        assert row.error_pct is not None and abs(row.error_pct) < 0.005, (case, row)


def test_peer_wait_inside_a_collective_is_a_wait_not_compute(tmp_path: Path) -> None:
    """Rank 0's all-reduce kernel ran 183 µs, 65 of them waiting for rank 1: replay
    starts it at 117 µs, holds it 65 µs for rank 1's arrival (its wait) and ends both
    at 300 µs."""
    paths = [
        _kernel_before_its_peers_launch(r).write(tmp_path / f"rank{r}.json.gz") for r in range(2)
    ]
    convert(paths, tmp_path / "et", prefix="t")
    run = simulate(tmp_path / "et" / "t")
    g, tasks = run.graphs[0], run.ranks[0].tasks
    ar = next(i for i in range(len(g)) if g.name(i) == AR)
    assert (tasks.start_ns[ar], tasks.end_ns[ar], tasks.wait_ns[ar]) == (117_000, 300_000, 65_000)


def test_stream_sync_after_a_copy_follows_a_shorter_kernel(tmp_path: Path) -> None:
    """The sync waits for the copy, the copy for the GEMM: halving the GEMM (200 µs)
    shortens the 400 µs step by 100 µs."""
    path = _copy_then_stream_sync(0).write(tmp_path / "one.json.gz")
    convert([path], tmp_path / "one", prefix="t")
    graphs = load_graphs(tmp_path / "one" / "t")
    gemm = [i for i in range(len(graphs[0])) if graphs[0].name(i) == "gemm"]
    graphs[0].dur_ns = graphs[0].dur_ns.copy()
    graphs[0].dur_ns[gemm] //= 2
    assert simulate(graphs).ranks[0].iteration_time_ns == 300_000
