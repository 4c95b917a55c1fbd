"""Ranks whose own default step differs: the profiler window cut rank 1's last step short
of its all-reduce kernel, so rank 1 fell back to ProfilerStep#1 while rank 0 kept #2. The
ETs held different iterations whose all-reduces still paired one for one, and replay
compared them with no warning. Now every rank converts the last step all of them have
complete."""

from __future__ import annotations

from pathlib import Path

from lumos.converters.pytorch.convert import convert
from lumos.converters.pytorch.step_agreement import AGREED
from lumos.simulator.report.compare import compare
from lumos.simulator.report.measured import read_measured
from lumos.simulator.run import simulate
from tests.converters.pytorch.kineto_snippet import Snippet
from tests.converters.pytorch.test_batched_p2p import _rank_trace

ALL_REDUCE = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"


def _two_steps(rank: int, cut: bool) -> Snippet:
    """Steps of 300 and 400 µs: a GEMM, an all-reduce (rank 1 enters 3 µs later), a
    device sync; with `cut`, step 2's all-reduce kernel is past the profiler's window."""
    k = _rank_trace(rank, 2)
    for i, t0 in enumerate((1000.0, 2000.0)):
        length = 300.0 + 100.0 * i
        k.step(i + 1, t0, length)
        k.op("aten::mm", t0 + 5, 10.0)
        k.launch("gemm", t0 + 7, 7, t0 + 15, 100.0)
        dims = {"Input Dims": [[1_048_576]], "Input type": ["float"]}
        k.op("c10d::allreduce_", t0 + 20, 10.0, args=dims)
        k.annotation("nccl:all_reduce", t0 + 22, 6.0)
        start = t0 + 120.0 + 3.0 * rank
        if cut and i == 1:
            k.runtime("cudaLaunchKernel", t0 + 23, 5.0)
        else:
            k.launch(ALL_REDUCE, t0 + 23, 30, start, t0 + 270.0 - start)
        k.runtime("cudaDeviceSynchronize", t0 + 32, 240.0)
        k.op("aten::zero_", t0 + length - 10, 5.0)
    return k


def test_ranks_convert_the_same_step_when_their_own_choices_differ(tmp_path: Path) -> None:
    """Before: rank 0 ProfilerStep#2 (400 µs), rank 1 ProfilerStep#1 (300 µs), no problem
    reported, ranks not aligned (their starts 1 ms apart). Now both #1, aligned, each
    rank 0.00 %; only rank 0 was converted a second time."""
    paths = [_two_steps(r, cut=r == 1).write(tmp_path / f"rank{r}.json.gz") for r in range(2)]
    result = convert(paths, tmp_path / "et", prefix="t")
    assert result.problems == []
    assert [(s.step, s.step_ns) for s in result.ranks] == [("ProfilerStep#1", 300_000)] * 2
    assert [s.step_chosen_by for s in result.ranks] == [AGREED, "the last complete step"]
    prefix = tmp_path / "et" / "t"
    cmp = compare(simulate(prefix), read_measured(prefix))
    assert cmp.aligned
    assert all(r.error_pct is not None and abs(r.error_pct) < 0.005 for r in cmp.ranks)


def test_ranks_without_a_common_step_are_reported(tmp_path: Path) -> None:
    """Rank 1's trace holds only ProfilerStep#7 and #8: no step is on both ranks, so each
    keeps its own and `problems` names them."""
    paths = [_two_steps(0, cut=False).write(tmp_path / "rank0.json.gz")]
    other = _two_steps(1, cut=False)
    for e in other.events:
        if e.get("name", "").startswith("ProfilerStep#"):
            e["name"] = f"ProfilerStep#{int(e['name'][-1]) + 6}"
    paths.append(other.write(tmp_path / "rank1.json.gz"))
    result = convert(paths, tmp_path / "et", prefix="t")
    assert "ranks converted different steps: rank 0 ProfilerStep#2, rank 1 ProfilerStep#8" in (
        result.problems
    )
