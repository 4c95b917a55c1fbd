"""A device sync closing one step, then a GPU op without launch record first on its stream
in the next: the converter searched streams by launch time and gave such an op its stream
predecessor's launch time, so the sync counted it as launched before it and waited for
it, while the op waits for its stand-in launch, a CPU task after the sync: a cycle.
`scripts/make_big_trace.py --dlrm --copies 2` wrote exactly this (the DLRM capture's
kernels queued before the profiler started, copied mid-trace), and so can a real
capture (a launch record CUPTI dropped, pytorch/pytorch#192021). `lumos simulate`
refused the ET (rank 1: dependency cycle among 4,087 nodes)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import lumos.converters.pytorch.exec_graph as exec_graph
from lumos.converters.chakra.stream import read_et
from lumos.converters.pytorch.convert import convert
from lumos.converters.pytorch.orphan_ops import orphan_launch_times
from lumos.errors import ValidationError
from lumos.simulator.report.compare import compare
from lumos.simulator.report.measured import read_measured
from lumos.simulator.run import simulate
from tests.converters.pytorch.kineto_snippet import Snippet


def _sync_then_orphan() -> Snippet:
    """An add and a device sync (the end of one step), then `aten::zero_` and a kernel on
    the same stream whose launch record is lost, then a mul the loop syncs on."""
    k = Snippet()
    k.step(1, 1000.0, 200.0)
    k.op("aten::add", 1005.0, 10.0)
    k.launch("add_kernel", 1007.0, stream=7, start=1015.0, dur=20.0)  # ends 1035
    k.runtime("cudaDeviceSynchronize", 1020.0, 17.0)  # returns 1037
    k.op("aten::zero_", 1100.0, 10.0)  # ends 1110: the lost launch's stand-in
    k.gpu_op("addcdiv_kernel", 99999, 7, 1115.0, 30.0)  # ends 1145, no launch record
    k.op("aten::mul", 1150.0, 5.0)
    k.launch("mul_kernel", 1152.0, stream=7, start=1160.0, dur=10.0)  # ends 1170
    k.runtime("cudaStreamSynchronize", 1165.0, 7.0)  # returns 1172
    return k


def test_device_sync_before_orphan_op_waits_only_for_earlier_launches(tmp_path: Path) -> None:
    """The sync waits for the add alone (it used to wait for the orphan too: a cycle of
    5 nodes); the orphan still follows its stand-in and holds the mul; replay 0.00 %."""
    result = convert([_sync_then_orphan().write(tmp_path / "r0.json.gz")], tmp_path, prefix="t")
    assert result.ranks[0].gpu_records["without_launch"] == 1
    _, nodes = read_et(result.ranks[0].path)
    by_id = {n.id: n for n in nodes}
    sync = next(n for n in nodes if n.name == "cudaDeviceSynchronize")
    assert [by_id[d].name for d in sync.data_deps] == ["add_kernel"]
    orphan = next(n for n in nodes if n.name == "addcdiv_kernel")
    assert [by_id[d].name for d in orphan.data_deps] == ["aten::zero_"]
    mul = next(n for n in nodes if n.name == "mul_kernel")
    assert [by_id[d].name for d in mul.ctrl_deps] == ["addcdiv_kernel"]
    row = compare(simulate(tmp_path / "t"), read_measured(tmp_path / "t")).ranks[0]
    assert row.error_pct is not None and abs(row.error_pct) < 0.005


def test_orphan_launch_time_stays_between_its_stream_neighbours() -> None:
    """Stream 7: a launch at 10, an orphan (stand-in end 100), a launch at 50, an orphan
    (stand-in end 30); stream 9: an orphan (stand-in end 5), a launch at 3. Each orphan
    takes its stand-in's end kept between its predecessor's time and the next linked
    launch: 100 → 50 (launched before the op at 50), 30 → 50 (after the op at 50),
    5 → 3 (before the op at 3); each stream's times stay sorted."""
    launch = np.array([10, 100, 50, 30, 5, 3])
    orphan = np.array([False, True, False, True, True, False])
    stream = np.array([7, 7, 7, 7, 9, 9])
    got = orphan_launch_times(launch, orphan, stream)
    assert got.tolist() == [10, 50, 50, 50, 3, 3]


def test_convert_refuses_a_cyclic_graph_and_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the old rule back (an orphan takes its stream predecessor's launch time) the
    graph has the cycle: convert fails naming the rank, the ET and the edges that close
    it, and the output folder holds no ET."""

    def predecessor_launch(
        launch_ts: np.ndarray, orphan: np.ndarray, stream: np.ndarray
    ) -> np.ndarray:
        out = launch_ts.copy()
        for k in np.flatnonzero(orphan).tolist():
            if k and stream[k - 1] == stream[k]:
                out[k] = out[k - 1]
        return out

    monkeypatch.setattr(exec_graph, "orphan_launch_times", predecessor_launch)
    src = _sync_then_orphan().write(tmp_path / "r0.json.gz")
    with pytest.raises(ValidationError) as err:
        convert([src], tmp_path / "et", prefix="t")
    (problem,) = err.value.problems
    assert problem.startswith(f"rank 0 ({src}): the converted graph for t.0.et has a")
    assert "'cudaDeviceSynchronize'" in problem
    assert "'aten::zero_' -> " in problem and "'addcdiv_kernel' -> " in problem
    assert not list(tmp_path.rglob("*.et"))
