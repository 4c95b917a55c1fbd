"""GPU ops whose launch call is not in the Kineto trace: Triton kernels launched through
`cuLaunchKernel` before Kineto recorded driver calls (pytorch/kineto#752), records CUPTI
dropped (pytorch/pytorch#192021), RCCL kernels with correlation 0 (ROCm/roctracer#100).
No runtime call has the op's `correlation`. It ran on its stream and held the ops behind it, so it is kept, with the CPU task
that ended last before it as stand-in launch."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from lumos.converters.chakra.attrs import attrs_dict
from lumos.converters.chakra.stream import read_et
from lumos.converters.pytorch.convert import convert
from lumos.converters.pytorch.orphan_ops import stand_in_launches
from lumos.proto import pb
from lumos.simulator.report.compare import compare
from lumos.simulator.report.measured import read_measured
from lumos.simulator.run import simulate
from tests.converters.pytorch.kineto_snippet import Snippet
from tests.converters.pytorch.test_batched_p2p import _rank_trace


def _step_with_orphans() -> Snippet:
    """A GEMM, a 200 µs Triton kernel whose `cuLaunchKernel` is missing, and an add queued
    behind it; the loop syncs on the stream. A kernel of the previous step without launch
    (GPU time before the step) stays out."""
    k = Snippet()
    k.gpu_op("triton_prev_step", 88888, 7, 990.0, 5.0)
    k.step(1, 1000.0, 400.0)
    k.op("aten::mm", 1005.0, 10.0)
    k.launch("gemm", 1007.0, stream=7, start=1015.0, dur=100.0)  # ends 1115
    k.op("triton_poi_fused_add_0", 1016.0, 3.0)  # its launch record is lost
    k.gpu_op("triton_poi_fused_add_0", 99999, 7, 1117.0, 200.0)  # ends 1317
    k.op("aten::add", 1020.0, 10.0)
    k.launch("add_kernel", 1022.0, stream=7, start=1319.0, dur=20.0)  # ends 1339
    k.runtime("cudaStreamSynchronize", 1030.0, 311.0)  # returns 1341
    k.op("aten::zero_", 1350.0, 5.0)
    return k


def test_kernel_without_launch_holds_its_stream(tmp_path: Path) -> None:
    """Dropped, the Triton kernel let the add run 200 µs early and the sync return with
    it: the step replayed −48.50 %. Kept behind the GEMM, 0.00 %; the summary counts it."""
    result = convert([_step_with_orphans().write(tmp_path / "r0.json.gz")], tmp_path, prefix="t")
    summary = result.ranks[0]
    assert summary.gpu_records == {
        "without_launch": 1,
        "without_stand_in": 0,
        "paired_with_bare_launch": 0,
        "duplicates": 0,
        "before_launch": 0,
        "before_launch_max_ns": 0,
        "overlapping": 0,
        "overlap_max_ns": 0,
    }
    assert summary.to_json()["gpu_records"]["without_launch"] == 1
    _, nodes = read_et(summary.path)
    by_id = {n.id: n for n in nodes}
    gpu = [n for n in nodes if attrs_dict(n).get("stream") == 7]
    assert [n.name for n in gpu] == ["gemm", "triton_poi_fused_add_0", "add_kernel"]
    orphan = gpu[1]
    assert [by_id[d].name for d in orphan.ctrl_deps] == ["gemm"]
    assert [by_id[d].name for d in orphan.data_deps] == ["triton_poi_fused_add_0"]  # CPU op
    sync = next(n for n in nodes if n.name == "cudaStreamSynchronize")
    assert [by_id[d].name for d in sync.data_deps] == ["add_kernel"]
    row = compare(simulate(tmp_path / "t"), read_measured(tmp_path / "t")).ranks[0]
    assert row.error_pct is not None and abs(row.error_pct) < 0.005


def test_idle_stream_kernel_without_launch_starts_after_its_stand_in(tmp_path: Path) -> None:
    """On an idle stream the lost launch's kernel cannot start before the CPU task that
    preceded it: a short GEMM, 30 µs of CPU work, then a 150 µs kernel without launch
    record and a device sync. Replay starts it at that task's end + its recorded dispatch
    delay (at most 10 µs), not 10 µs after the GEMM (8 µs early): the sync returns as
    recorded. Dropped, it left the sync's 148 µs wait as CPU time (0.00 % in replay, but
    no kernel to wait for once durations change); now the sync waits for it."""
    k = Snippet()
    k.step(1, 1000.0, 300.0)
    k.op("aten::mm", 1005.0, 30.0)  # ends 1035
    k.launch("gemm", 1007.0, stream=7, start=1015.0, dur=10.0)  # ends 1025
    k.op("aten::relu", 1036.0, 3.0)  # ends 1039
    k.gpu_op("triton_red_fused_0", 77777, 7, 1043.0, 150.0)  # ends 1193
    k.runtime("cudaDeviceSynchronize", 1045.0, 150.0)  # returns 1195
    k.op("aten::zero_", 1200.0, 5.0)
    result = convert([k.write(tmp_path / "r0.json.gz")], tmp_path, prefix="t")
    assert result.ranks[0].gpu_records["without_launch"] == 1
    _, nodes = read_et(result.ranks[0].path)
    by_id = {n.id: n for n in nodes}
    sync = next(n for n in nodes if n.name == "cudaDeviceSynchronize")
    assert "triton_red_fused_0" in [by_id[d].name for d in sync.data_deps]
    assert attrs_dict(sync)["sync_wait_ns"] == 148_000
    row = compare(simulate(tmp_path / "t"), read_measured(tmp_path / "t")).ranks[0]
    assert row.error_pct is not None and abs(row.error_pct) < 0.005


def _rccl_rank(rank: int) -> Snippet:
    """An all-reduce on ROCm: the `hipExtLaunchKernel` inside `nccl:all_reduce` has its
    correlation, RCCL's `ncclDevKernel_Generic` has correlation 0 (ROCm/roctracer#100)."""
    k = _rank_trace(rank, 2)
    k.step(1, 1000.0, 300.0)
    k.op("aten::mm", 1005.0, 10.0)
    k.launch("Cijk_Ailk_Bljk_SB_MT128x128x16", 1007.0, 7, 1015.0, 100.0)
    dims = {"Input Dims": [[1_048_576]], "Input type": ["float"]}
    k.op("c10d::allreduce_", 1020.0, 10.0, args=dims)
    k.annotation("nccl:all_reduce", 1022.0, 6.0)
    k.runtime("hipExtLaunchKernel", 1023.0, 5.0)
    start = 1120.0 + 3.0 * rank
    kernel = "ncclDevKernel_Generic(ncclDevComm*, channelMasks, ncclWork*)"
    k.gpu_op(kernel, 0, 30, start, 1270.0 - start)
    k.runtime("hipDeviceSynchronize", 1032.0, 240.0)
    k.op("aten::zero_", 1275.0, 5.0)
    return k


def test_rccl_kernel_with_correlation_0_pairs_with_its_bare_launch(tmp_path: Path) -> None:
    """Both ranks' all-reduce kernels were dropped (no COMM node at all: the ranks
    replayed as if they never communicated). Now each pairs with the launch call that has
    no GPU op, takes its type from the enclosing `nccl:all_reduce` and its size from
    `c10d::allreduce_`: one 4 MiB ALL_REDUCE per rank, replay 0.00 % on both."""
    paths = [_rccl_rank(r).write(tmp_path / f"rank{r}.json.gz") for r in range(2)]
    result = convert(paths, tmp_path / "et", prefix="t")
    assert result.problems == [] and [r.unknown_comm for r in result.ranks] == [0, 0]
    for summary in result.ranks:
        assert summary.gpu_records["paired_with_bare_launch"] == 1
        colls = [n for n in read_et(summary.path)[1] if n.type == pb.COMM_COLL_NODE]
        got = [(attrs_dict(n)["comm_type"], attrs_dict(n)["comm_size"]) for n in colls]
        assert got == [(pb.ALL_REDUCE, 4 * 1_048_576)]
    prefix = tmp_path / "et" / "t"
    rows = compare(simulate(prefix), read_measured(prefix)).ranks
    assert all(r.error_pct is not None and abs(r.error_pct) < 0.005 for r in rows)


def test_stand_in_is_the_last_task_of_the_kernels_name_else_of_any() -> None:
    """CPU tasks (name id, start, end): (1, 0, 10), (2, 15, 20), (1, 25, 30), (3, 31, 33).
    Kernels (name, start): (1, 12) → task 0; (1, 35) → task 2; (2, 25) → task 1; (5, 34),
    no task of its name → task 3, the last to end; (1, 5), none ended yet → -1."""
    got = stand_in_launches(
        np.array([1, 2, 1, 3]),
        np.array([0, 15, 25, 31]),
        np.array([10, 20, 30, 33]),
        np.array([1, 1, 2, 5, 1]),
        np.array([12, 35, 25, 34, 5]),
    )
    assert got.tolist() == [0, 2, 1, 3, -1]
