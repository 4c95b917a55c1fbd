"""Kineto (2024+) writes each event's `ts` relative to `baseTimeNanoseconds`, the wall
clock floored to 3 months when the profiler started (libkineto `ChromeTraceBaseTime`),
so that a double keeps ns precision. Ranks whose profilers started on both sides of such
a boundary have bases 7,889,238 s apart; their steps line up only once each rank's `ts`
is counted from its own base. `displayTimeUnit` only tells viewers how to show times:
`ts` stays in µs whatever it says."""

from __future__ import annotations

from pathlib import Path

import pytest

from lumos.converters.pytorch.convert import convert
from lumos.errors import TraceFormatError
from lumos.simulator.report.compare import compare
from lumos.simulator.report.measured import read_measured
from lumos.simulator.run import simulate
from tests.converters.pytorch.kineto_snippet import Snippet
from tests.converters.pytorch.test_batched_p2p import _rank_trace

ALL_REDUCE = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
QUARTER_NS = 7_889_238 * 10**9  # libkineto's `_trimonths`
BASE_NS = 217 * QUARTER_NS  # 2024-04-01 09:44:06 UTC, HTA's nccl_data trace's base


def _late_rank(rank: int, base_ns: int, unit: str = "ms") -> Snippet:
    """Rank 1 enters the step 100 µs after rank 0 (absolute time); both leave the
    all-reduce together at 390 µs. `ts` counts from `base_ns`."""
    k = _rank_trace(rank, 2)
    k.meta = {"baseTimeNanoseconds": base_ns, "displayTimeUnit": unit}
    shift = (BASE_NS - base_ns) / 1000.0  # µs to add to an absolute time from BASE_NS
    t0 = 1000.0 + 100.0 * rank + shift
    end = 1390.0 + shift
    k.step(1, t0, end + 10.0 - t0)
    k.launch("gemm", t0 + 5.0, 7, t0 + 15.0, 100.0)
    dims = {"Input Dims": [[1_048_576]], "Input type": ["float"]}
    k.op("c10d::allreduce_", t0 + 20.0, 10.0, args=dims)
    k.annotation("nccl:all_reduce", t0 + 22.0, 6.0)
    k.launch(ALL_REDUCE, t0 + 23.0, 30, t0 + 120.0, end - t0 - 120.0)
    k.runtime("cudaDeviceSynchronize", t0 + 32.0, end - t0 - 30.0)
    k.op("aten::zero_", end + 3.0, 5.0)
    return k


def _errors(tmp_path: Path, bases: tuple[int, int], unit: str = "ms") -> tuple[bool, list]:
    paths = [
        _late_rank(r, b, unit).write(tmp_path / f"rank{r}.json.gz") for r, b in enumerate(bases)
    ]
    convert(paths, tmp_path / "et", prefix="t")
    prefix = tmp_path / "et" / "t"
    cmp = compare(simulate(prefix), read_measured(prefix))
    return cmp.aligned, [r.error_pct for r in cmp.ranks]


def test_ranks_with_bases_a_quarter_apart_are_aligned(tmp_path: Path) -> None:
    """Rank 0's profiler started before the quarter turned: its `ts` are 7.9e12 µs larger.
    Before, the steps looked 3 months apart, ranks were not aligned and rank 0 (which
    waited 100 µs for rank 1 in its all-reduce) replayed −25.00 %. Now aligned, both
    0.00 %."""
    aligned, errors = _errors(tmp_path, (BASE_NS - QUARTER_NS, BASE_NS))
    assert aligned
    assert all(e is not None and abs(e) < 0.01 for e in errors), errors


def test_negative_ts_of_a_rebased_trace(tmp_path: Path) -> None:
    """A trace re-based onto a later base (as merge tools do to put ranks on one clock)
    has negative `ts`. Host ops were cut from time 0 instead of from their own starts:
    each got a duration of about −7.9e15 ns and the step replayed +7.9e12 %, with no
    error. Now both ranks 0.00 %."""
    aligned, errors = _errors(tmp_path, (BASE_NS + QUARTER_NS, BASE_NS + QUARTER_NS))
    assert aligned
    assert all(e is not None and abs(e) < 0.01 for e in errors), errors


def test_display_time_unit_does_not_scale_ts(tmp_path: Path) -> None:
    """`displayTimeUnit: ns` (tools other than Kineto write it) leaves `ts` in µs: the same
    ETs and errors as Kineto's "ms" (this was right before)."""
    aligned, errors = _errors(tmp_path, (BASE_NS, BASE_NS), unit="ns")
    assert aligned
    assert all(e is not None and abs(e) < 0.01 for e in errors), errors


@pytest.mark.parametrize("bad", ["1711964646000000000", -5, 1.5])
def test_a_base_that_is_not_a_time_is_an_error_naming_the_file(tmp_path: Path, bad) -> None:
    k = _late_rank(0, BASE_NS)
    k.meta["baseTimeNanoseconds"] = bad
    path = k.write(tmp_path / "rank0.json.gz")
    with pytest.raises(TraceFormatError, match="baseTimeNanoseconds") as info:
        convert([path], tmp_path / "et", prefix="t")
    assert str(path) in str(info.value)
