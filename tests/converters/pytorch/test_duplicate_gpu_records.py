"""The same GPU op recorded twice (same stream, start, duration, name, correlation): one
execution, kept once. Host events recorded twice were already harmless: flattening nests
the copy inside the original, which leaves one segment."""

from __future__ import annotations

import copy
from pathlib import Path

from lumos.converters.chakra.attrs import attrs_dict
from lumos.converters.chakra.stream import read_et
from lumos.converters.pytorch.convert import convert
from lumos.simulator.report.compare import compare
from lumos.simulator.report.measured import read_measured
from lumos.simulator.run import simulate
from tests.converters.pytorch.kineto_snippet import Snippet


def test_gpu_op_recorded_twice_runs_once(tmp_path: Path) -> None:
    """A 100 µs GEMM written twice (and its launch call and an `aten::add` too), an add
    kernel queued behind it, a stream sync: both GEMM records ran back to back, the sync
    returned 100 µs late (+25.00 %); now one GEMM, 0.00 %, and the summary counts one
    duplicate."""
    k = Snippet()
    k.step(1, 1000.0, 400.0)
    k.op("aten::mm", 1005.0, 10.0)
    k.launch("gemm", 1007.0, stream=7, start=1015.0, dur=100.0)
    k.op("aten::add", 1020.0, 10.0)
    k.launch("add_kernel", 1022.0, stream=7, start=1117.0, dur=20.0)
    k.runtime("cudaStreamSynchronize", 1030.0, 109.0)
    k.op("aten::zero_", 1150.0, 5.0)
    again = [e for e in k.events if e.get("name") in ("gemm", "cudaLaunchKernel", "aten::add")]
    k.events += [copy.deepcopy(e) for e in again if e["ph"] == "X"][:3]
    result = convert([k.write(tmp_path / "r0.json.gz")], tmp_path, prefix="t")
    assert result.ranks[0].gpu_records["duplicates"] == 1
    _, nodes = read_et(result.ranks[0].path)
    gpu = [n.name for n in nodes if attrs_dict(n).get("stream") == 7]
    assert gpu == ["gemm", "add_kernel"]
    assert [n.name for n in nodes].count("cudaLaunchKernel") == 2
    row = compare(simulate(tmp_path / "t"), read_measured(tmp_path / "t")).ranks[0]
    assert row.error_pct is not None and abs(row.error_pct) < 0.005
