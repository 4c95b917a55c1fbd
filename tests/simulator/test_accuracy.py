"""Replay accuracy on real traces (the table in docs/accuracy.md): convert, replay, compare
with the measured ProfilerStep — every trace within 10%, overall and per rank — and the
causes fixed on the way: entry skew (rank alignment), gloo waits recorded as gaps, blocking
copies, the untraced tail of the step."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from lumos.converters.chakra.attrs import get_attr
from lumos.converters.chakra.conventions import META_STEP_START_NS
from lumos.converters.chakra.files import find_et_sources
from lumos.converters.pytorch.convert import convert
from lumos.simulator.report.compare import Comparison, compare
from lumos.simulator.report.measured import read_measured
from lumos.simulator.run import SimOptions, simulate
from tests.conftest import DATA, fixture_path

HTA = "HolisticTraceAnalysis/tests/data"
DLRM = "param/et_replay/tests/inputs"


def _convert(inputs: list[Path], out: Path) -> Path:
    convert(inputs, out, prefix="t")
    for source in find_et_sources(out):
        with source.open() as reader:  # the converter records where each rank's step began
            assert get_attr(reader.metadata, META_STEP_START_NS) is not None
    return out / "t"


def _replay(prefix: Path, **options: bool) -> Comparison:
    # single ranks of larger jobs (HTA's rank 0 of 16, sampled ranks of 128): a partial set
    return compare(
        simulate(prefix, SimOptions(allow_partial=True, **options)), read_measured(prefix)
    )


def _assert_within(comparison: Comparison, pct: float) -> None:
    assert comparison.error_pct is not None and abs(comparison.error_pct) <= pct
    for rank in comparison.ranks:
        assert rank.error_pct is not None and abs(rank.error_pct) <= pct, rank


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _convert([DATA / "captures" / "pipeline"], tmp_path_factory.mktemp("pipe"))


@pytest.mark.parametrize("capture", ["ddp", "fsdp"])
def test_data_parallel_captures_replay_within_one_percent(capture: str, tmp_path: Path) -> None:
    prefix = _convert([DATA / "captures" / capture], tmp_path)
    comparison = _replay(prefix)
    assert comparison.aligned
    _assert_within(comparison, 1.0)


def test_pipeline_ranks_start_at_their_measured_step_starts(pipeline: Path) -> None:
    result = simulate(pipeline)
    assert result.aligned
    # rank 1 entered ProfilerStep#2 4.185 ms after rank 0 (Kineto ts 4407803353218.271
    # vs 4407803349033.081 µs)
    assert [r.start_ns for r in result.ranks] == [0, 4_185_190]
    assert result.to_json()["ranks"][1]["start_ns"] == 4_185_190
    rank1 = result.ranks[1]
    assert rank1.iteration_time_ns == rank1.end_ns - rank1.start_ns
    unaligned = simulate(pipeline, SimOptions(align_ranks=False))
    assert not unaligned.aligned and unaligned.align_note == "disabled"
    assert [r.start_ns for r in unaligned.ranks] == [0, 0]


def test_pipeline_replay_within_one_percent(pipeline: Path) -> None:
    """gloo's `work.wait()` is untraced: the wait for the peer is inside the gap before
    the next op, so replay must not add the simulated wait on top of it (was +26%). A
    send leaves when its `c10d::send` starts, not when its later `gloo:send` annotation
    does (was +4.19%; now −0.02%, rank 1 −0.16%)."""
    comparison = _replay(pipeline)
    _assert_within(comparison, 1.0)
    result = simulate(pipeline)
    g, tasks = result.graphs[0], result.ranks[0].tasks
    recv = int(np.flatnonzero(g.ids == 542)[0])  # first gradient gloo:recv on rank 0
    after = recv + 1
    assert g.name(recv) == "gloo:recv" and g.gap_ns[after] > 13_000_000
    assert tasks.wait_ns[recv] > 10_000_000
    issue_end = tasks.end_ns[recv] - tasks.wait_ns[recv]
    assert tasks.start_ns[after] == max(tasks.end_ns[recv], issue_end + g.gap_ns[after])


def test_hta_alexnet_blocking_copy_overlaps_its_call(tmp_path: Path) -> None:
    """A pageable cudaMemcpyAsync returns after its copy: the copy starts inside the
    call (recorded 258 µs after it), not when the 35 ms call has returned."""
    prefix = _convert([fixture_path(f"{HTA}/critical_path/alexnet")], tmp_path)
    comparison = _replay(prefix)
    _assert_within(comparison, 0.1)
    result = simulate(prefix)
    g, tasks = result.graphs[0], result.ranks[0].tasks
    call, copy = (int(np.flatnonzero(g.ids == i)[0]) for i in (295, 296))
    assert g.name(call) == "cudaMemcpyAsync" and g.name(copy).startswith("Memcpy HtoD")
    assert tasks.start_ns[copy] - tasks.start_ns[call] == 258_000
    assert tasks.end_ns[copy] < tasks.end_ns[call] + 1_000_000


@pytest.mark.parametrize(
    ("inputs", "pct"),
    [
        (f"{HTA}/critical_path/cuda_event_sync", 1.0),
        (f"{HTA}/trace_filter/sampled_rank-0.json.gz", 0.1),
        ("TraceLens/tests/traces/h100", 0.5),
    ],
)
def test_single_rank_gpu_traces_replay_within_tolerance(
    inputs: str, pct: float, tmp_path: Path
) -> None:
    """HTA/TraceLens A100/H100 traces; the step ends after the step thread's untraced
    tail (sampled rank 0: 4.4 ms after its last op). The TraceLens folder holds two
    unrelated single-GPU runs (names end in process ids, not ranks): each is its own job."""
    folder = fixture_path(inputs)
    files = sorted(folder.glob("*.json.gz")) if "TraceLens" in inputs else [folder]
    for k, path in enumerate(files):
        prefix = _convert([path], tmp_path / str(k))
        _assert_within(_replay(prefix), pct)


def test_event_sync_waits_for_the_gpu_only_with_sync_edges(tmp_path: Path) -> None:
    """cudaEventSynchronize waits for the spin kernel recorded before its event; the
    ablation (no sync edges) lets the CPU run past it."""
    prefix = _convert([fixture_path(f"{HTA}/critical_path/cuda_event_sync")], tmp_path)
    full = simulate(prefix)
    ablated = simulate(prefix, SimOptions(ablate_sync=True))
    g = full.graphs[0]
    sync = int(np.flatnonzero(g.ids == 34)[0])
    kernel = int(np.flatnonzero(g.ids == 32)[0])
    assert g.name(sync) == "cudaEventSynchronize"
    assert full.ranks[0].tasks.end_ns[sync] > full.ranks[0].tasks.end_ns[kernel]
    assert ablated.ranks[0].tasks.end_ns[sync] < ablated.ranks[0].tasks.end_ns[kernel]
    assert full.iteration_time_ns > ablated.iteration_time_ns


@pytest.mark.slow
def test_dlrm_eight_ranks_aligned_replay_within_one_percent(tmp_path: Path) -> None:
    """DLRM 8×V100: ranks end ProfilerStep#10 together but start it up to 7.5 ms apart;
    replaying every rank from t = 0 was off by up to +46% per rank. The CPU loops never
    wait for the GPU here, so the skew shows in the GPU-inclusive step (the last NCCL
    kernels), not in the CPU window."""
    inputs = [
        fixture_path(f"{DLRM}/dlrm_pytorch_et.tar.gz"),
        fixture_path(f"{DLRM}/dlrm_kineto.tar.gz"),
    ]
    prefix = _convert(inputs, tmp_path)
    aligned = _replay(prefix)
    assert aligned.aligned
    _assert_within(aligned, 1.0)
    starts = {r.rank: r.start_ns for r in simulate(prefix).ranks}
    assert starts[1] == 0 and 7_000_000 < starts[7] < 8_000_000
    assert aligned.max_abs_gpu_error_pct is not None and aligned.max_abs_gpu_error_pct < 1.0
    unaligned = _replay(prefix, align_ranks=False)
    assert unaligned.max_abs_gpu_error_pct is not None
    assert unaligned.max_abs_gpu_error_pct > 40.0
