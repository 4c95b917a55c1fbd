"""Patterns of real GPU steps checked in round 6 of the replay work (`docs/accuracy.md`,
round 6): each a hand-made trace in Kineto's field layout, converted and replayed per
rank against its own measured step."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from lumos.converters.pytorch.convert import convert
from lumos.simulator.report.compare import compare
from lumos.simulator.report.measured import read_measured
from lumos.simulator.run import simulate
from tests.converters.pytorch.kineto_snippet import TID, Snippet
from tests.converters.pytorch.test_batched_p2p import _rank_trace
from tests.converters.pytorch.test_replay_patterns_round4 import AR, DIMS

PEER = "Memcpy PtoP (Device -> Device)"


def _event_recorded_twice(named: bool) -> Callable[[int], Snippet]:
    """One CUDA event (id 5) recorded after each of two GEMMs on stream 7; stream 9 waits
    on it after each record, so its second kernel waits for the second GEMM.
    `named`: Kineto's `cuda_sync` events name each wait's record."""

    def make(rank: int) -> Snippet:
        k = Snippet()
        k.step(1, 1000.0, 400.0)
        t = 1005.0
        for gemm, side, (g0, s0) in (
            ("gemm1", "side1", (1015.0, 1117.0)),
            ("gemm2", "side2", (1115.0, 1217.0)),
        ):
            k.launch(gemm, t, 7, g0, 100.0)
            rec = k.runtime("cudaEventRecord", t + 6.0, 2.0)
            wait = k.runtime("cudaStreamWaitEvent", t + 9.0, 2.0)
            if named:
                args = {"wait_on_stream": 7, "wait_on_cuda_event_record_corr_id": rec}
                k.cuda_sync(
                    "Wait Event", wait, t + 9.0, 0.0, stream=9, wait_on_cuda_event_id=5, **args
                )
            k.launch(side, t + 12.0, 9, s0, 50.0)
            t += 20.0
        k.runtime("cudaDeviceSynchronize", t, 1269.0 - t)
        k.op("aten::add", 1275.0, 10.0)
        return k

    return make


def _stream_sync_on_a_side_stream(rank: int) -> Snippet:
    """`torch.cuda.current_stream()` is not the stream synced: a 200 µs kernel on side
    stream 9, then a 10 µs kernel on 7, then `cudaStreamSynchronize` on 9 (no
    `cuda_sync`: the converter takes the thread's last launch stream, 7)."""
    k = Snippet()
    k.step(1, 1000.0, 400.0)
    k.launch("side_gemm", 1005.0, 9, 1012.0, 200.0)
    k.launch("small", 1012.0, 7, 1020.0, 10.0)
    k.runtime("cudaStreamSynchronize", 1020.0, 194.0)
    k.op("aten::add", 1220.0, 10.0)
    return k


def _second_thread_launches_during_a_sync(rank: int) -> Snippet:
    """The main thread blocks in `cudaDeviceSynchronize` for k1 while another thread
    (autograd's device thread) launches k2 onto the same stream during the sync."""
    k = Snippet()
    k.step(1, 1000.0, 400.0)
    k.launch("k1", 1005.0, 7, 1012.0, 150.0)
    k.runtime("cudaDeviceSynchronize", 1015.0, 149.0)
    k.op("autograd::engine::evaluate_function: MulBackward0", 1020.0, 40.0, tid=TID + 1)
    k.launch("k2", 1050.0, 7, 1164.0, 100.0, tid=TID + 1)
    k.op("aten::add", 1170.0, 10.0)
    k.runtime("cudaDeviceSynchronize", 1185.0, 81.0)
    k.op("aten::zero_", 1270.0, 5.0)
    return k


def _peer_copy_on_the_nccl_stream(rank: int) -> Snippet:
    """`cudaMemcpyPeerAsync` (`Memcpy PtoP`) on NCCL stream 30 after its wait for the
    GEMM, then the all-reduce and a `Memcpy DtoD` out, on both ranks."""
    k = _rank_trace(rank, 2)
    k.step(1, 1000.0, 400.0)
    k.launch("gemm", 1005.0, 7, 1015.0, 100.0)
    k.runtime("cudaEventRecord", 1012.0, 1.0)
    k.runtime("cudaStreamWaitEvent", 1013.5, 1.0)
    k.launch(PEER, 1016.0, 30, 1117.0, 12.0, call="cudaMemcpyPeerAsync")
    k.op("c10d::allreduce_", 1027.0, 10.0, args=DIMS)
    k.annotation("nccl:all_reduce", 1029, 6.0)
    k.launch(AR, 1030, 30, 1131.0 + 4 * rank, 120.0 - 4 * rank)
    k.launch("Memcpy DtoD (Device -> Device)", 1038.0, 30, 1253.0, 8.0, call="cudaMemcpyAsync")
    k.runtime("cudaDeviceSynchronize", 1045.0, 218.0)
    k.op("aten::zero_", 1380.0, 5.0)
    return k


def _collective_past_the_step_end(rank: int) -> Snippet:
    """DDP's last all-reduce is launched inside the step and ends 30 µs after
    `ProfilerStep#1` (the optimizer waits for it in the next step)."""
    k = _rank_trace(rank, 2)
    k.step(1, 1000.0, 300.0)
    k.launch("gemm", 1005.0, 7, 1015.0, 150.0)
    k.op("c10d::allreduce_", 1020.0, 10.0, args=DIMS)
    k.runtime("cudaEventRecord", 1021.0, 1.0)
    k.runtime("cudaStreamWaitEvent", 1022.5, 1.0)
    k.annotation("nccl:all_reduce", 1024.0, 5.0)
    k.launch(AR, 1025.0, 30, 1167.0 + 3 * rank, 163.0 - 3 * rank)
    k.op("aten::zero_", 1290.0, 5.0)
    return k


CASES: dict[str, tuple[Callable[[int], Snippet], int]] = {
    "event_recorded_twice": (_event_recorded_twice(False), 1),
    "event_recorded_twice_named": (_event_recorded_twice(True), 1),
    "stream_sync_on_a_side_stream": (_stream_sync_on_a_side_stream, 1),
    "second_thread_launches_during_a_sync": (_second_thread_launches_during_a_sync, 1),
    "peer_copy_on_the_nccl_stream": (_peer_copy_on_the_nccl_stream, 2),
    "collective_past_the_step_end": (_collective_past_the_step_end, 2),
}


@pytest.mark.parametrize("case", list(CASES))
def test_round6_pattern_replays_each_rank_as_measured(tmp_path: Path, case: str) -> None:
    """Every rank within 0.01 % of its measured step. All but one were right before;
    `second_thread_launches_during_a_sync` read +9.25 %: the autograd thread's first op
    was made to wait for the main thread's sync (taken to end at its cut duration), and
    the sync, started only once k1 had ended, counted k2 on the stream too."""
    make, ranks = CASES[case]
    paths = [make(r).write(tmp_path / f"rank{r}.json.gz") for r in range(ranks)]
    result = convert(paths, tmp_path / "et", prefix="t")
    assert result.problems == []
    prefix = tmp_path / "et" / "t"
    rows = compare(simulate(prefix), read_measured(prefix)).ranks
    errors = [r.error_pct for r in rows]
    assert all(e is not None and abs(e) < 0.01 for e in errors), errors
