"""A GPU op whose recorded start precedes its launch call's start: the CPU and GPU clocks
of the trace disagree by more than the launch latency (or CUPTI wrote a corrupt record,
pytorch/pytorch#192021). Replay cannot start an op before its call; the converter counts
such ops and the largest lead, so the error it causes is stated, not silent."""

from __future__ import annotations

from pathlib import Path

from lumos.converters.pytorch.convert import convert
from lumos.simulator.report.compare import compare
from lumos.simulator.report.measured import read_measured
from lumos.simulator.run import simulate
from tests.converters.pytorch.kineto_snippet import Snippet


def test_gpu_op_before_its_launch_is_counted_and_replayed_from_the_call(
    tmp_path: Path,
) -> None:
    """A GEMM recorded 3 µs before its `cudaLaunchKernel`, an add queued behind it, a
    stream sync: replay starts the GEMM at its call, so the step reads +0.75 % (its 3 µs
    of a 400 µs step), as before; the summary now says why (1 op, 3 µs)."""
    k = Snippet()
    k.step(1, 1000.0, 400.0)
    k.op("aten::mm", 1005.0, 10.0)
    k.launch("gemm", 1010.0, stream=7, start=1007.0, dur=100.0)
    k.op("aten::add", 1020.0, 10.0)
    k.launch("add_kernel", 1022.0, stream=7, start=1109.0, dur=20.0)
    k.runtime("cudaStreamSynchronize", 1030.0, 101.0)
    k.op("aten::zero_", 1140.0, 5.0)
    result = convert([k.write(tmp_path / "r0.json.gz")], tmp_path, prefix="t")
    records = result.ranks[0].gpu_records
    assert (records["before_launch"], records["before_launch_max_ns"]) == (1, 3000)
    row = compare(simulate(tmp_path / "t"), read_measured(tmp_path / "t")).ranks[0]
    assert row.error_pct is not None and abs(row.error_pct - 0.75) < 0.005
