"""A step whose loop thread ends in a blocking sync (`torch.cuda.synchronize()` closing a
benchmark step, `loss.item()`'s copy and stream sync before `profiler.step()`). The
converter keeps only the time a sync ran after the GPU work it waited for (the wait is
its edges); the step's untraced tail (`step_end`) must still count from when the sync
returned as recorded, not from its start plus that remainder."""

from __future__ import annotations

from pathlib import Path

import pytest

from lumos.converters.pytorch.convert import convert
from lumos.simulator.report.compare import compare
from lumos.simulator.report.measured import read_measured
from lumos.simulator.run import simulate
from tests.converters.pytorch.kineto_snippet import Snippet

PAGEABLE = "Memcpy DtoH (Device -> Pageable)"
PINNED = "Memcpy DtoH (Device -> Pinned)"


def _step(closing: str) -> Snippet:
    """400 µs: a 200 µs kernel, host work, a 40 µs kernel, then the closing sync, which
    returns at 393 µs; `profiler.step()` 7 µs later."""
    k = Snippet()
    k.step(1, 1000.0, 400.0)
    k.launch("gemm", 1010.0, 7, 1020.0, 200.0)
    k.op("aten::add", 1230.0, 110.0)
    k.launch("loss_kernel", 1345.0, 7, 1352.0, 36.0)
    if closing == "pageable":  # loss.item(): the copy call blocks until its copy is done
        k.launch(PAGEABLE, 1350.0, 7, 1389.0, 2.0, call="cudaMemcpyAsync")
        k.events[-4]["dur"] = 1392.0 - 1350.0
        k.runtime("cudaStreamSynchronize", 1392.2, 0.8)
    elif closing == "pinned":  # .to("cpu", non_blocking=True), then a stream sync
        k.launch(PINNED, 1350.0, 7, 1389.0, 2.0, call="cudaMemcpyAsync")
        k.runtime("cudaStreamSynchronize", 1356.0, 37.0)
    elif closing == "event":  # an event recorded after the copy, then waited for
        k.launch(PINNED, 1350.0, 7, 1389.0, 2.0, call="cudaMemcpyAsync")
        k.runtime("cudaEventRecord", 1356.0, 2.0)
        k.runtime("cudaEventSynchronize", 1359.0, 34.0)
    else:  # torch.cuda.synchronize()
        k.runtime("cudaDeviceSynchronize", 1350.0, 43.0)
    return k


@pytest.mark.parametrize("closing", ["synchronize", "pinned", "event", "pageable"])
def test_tail_counts_from_when_the_closing_sync_returned(tmp_path: Path, closing: str) -> None:
    """Replay ended the step late: +9.50 % (device sync), +8.75 % (pinned copy, stream
    sync), +8.00 % (event sync): the tail was taken from the sync's start plus the time
    it ran after its GPU op. Now 0.00 %. A pageable copy's call blocks by itself (the
    stream sync after it waits for nothing): that was right before."""
    path = _step(closing).write(tmp_path / "rank0.json.gz")
    convert([path], tmp_path / "et", prefix="t")
    prefix = tmp_path / "et" / "t"
    row = compare(simulate(prefix), read_measured(prefix)).ranks[0]
    assert row.measured_ns == 400_000
    assert row.error_pct is not None and abs(row.error_pct) < 0.01, row
