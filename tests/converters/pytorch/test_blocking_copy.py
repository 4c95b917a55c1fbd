"""A synchronous `cudaMemcpy` (`loss.item()` on a pageable tensor, `.cpu()`): the call
queues its device-to-host copy behind the stream's work and returns only once the copy
is done. Replay must read right and must keep that wait as a wait for the stream, so a
what-if that shortens the kernel before the copy shortens the call too."""

from __future__ import annotations

from pathlib import Path

import pytest

from lumos.converters.pytorch.convert import convert
from lumos.simulator.load import load_graphs
from lumos.simulator.report.compare import compare
from lumos.simulator.report.measured import read_measured
from lumos.simulator.run import simulate
from tests.converters.pytorch.kineto_snippet import PID, Snippet

GEMM = "void gemm_kernel<float>"
COPY = "Memcpy DtoH (Device -> Pageable)"


def _copy_step(call_at: float, copy_at: float) -> Snippet:
    """400 µs: a 200 µs GEMM on stream 7 (1020-1220 µs), then `aten::item` whose
    `cudaMemcpy` starts at `call_at`; its 3 µs copy runs at `copy_at` and the call
    returns 4 µs after it."""
    k = Snippet()
    k.step(1, 1000.0, 400.0)
    k.op("aten::mm", 1010.0, 20.0)
    k.launch(GEMM, 1012.0, stream=7, start=1020.0, dur=200.0)
    k.op("aten::item", call_at - 2.0, copy_at + 9.0 - call_at)
    corr = k.runtime("cudaMemcpy", call_at, copy_at + 7.0 - call_at)
    k._flow_start(corr, call_at, PID)
    k.gpu_op(COPY, corr, 7, copy_at, 3.0)
    k.op("aten::add", copy_at + 12.0, 10.0)
    return k


def _steps(tmp_path: Path, call_at: float, copy_at: float) -> tuple[float, int, int]:
    """Replay error (%), and the simulated step with the GEMM as recorded and halved."""
    path = _copy_step(call_at, copy_at).write(tmp_path / "rank0.json.gz")
    convert([path], tmp_path / "et", prefix="t")
    prefix = tmp_path / "et" / "t"
    row = compare(simulate(prefix), read_measured(prefix)).ranks[0]
    assert row.measured_ns == 400_000 and row.error_pct is not None
    graphs = load_graphs(prefix)
    base = simulate(graphs).ranks[0].iteration_time_ns
    g = graphs[0]
    gemm = [i for i in range(len(g)) if g.name(i) == GEMM]
    g.dur_ns = g.dur_ns.copy()
    g.dur_ns[gemm] //= 2
    return row.error_pct, base, simulate(graphs).ranks[0].iteration_time_ns


@pytest.mark.parametrize("gap", [2.0, 30.0], ids=["copy_2us_after_gemm", "copy_30us_after"])
def test_synchronous_memcpy_waits_for_the_kernel_before_it(tmp_path: Path, gap: float) -> None:
    """The call starts at 1042 µs, while the GEMM runs; its copy starts `gap` after the
    GEMM ends. Halving the GEMM left the step at 400 µs: the call kept its 180 µs wait as
    its own duration and released its copy at its recorded start. Now the call queues the
    copy as it begins and returns 4 µs after it: the step is 100 µs shorter."""
    error, base, halved = _steps(tmp_path, 1042.0, 1220.0 + gap)
    assert abs(error) < 0.01
    assert base == 400_000
    assert halved == 300_000


def test_synchronous_memcpy_on_an_idle_stream_keeps_its_latency(tmp_path: Path) -> None:
    """The call starts 15 µs after the GEMM ended and its copy 6 µs into the call: nothing
    to wait for, and halving the GEMM does not move the call (nor, before, did it)."""
    error, base, halved = _steps(tmp_path, 1235.0, 1241.0)
    assert abs(error) < 0.01
    assert base == halved == 400_000
