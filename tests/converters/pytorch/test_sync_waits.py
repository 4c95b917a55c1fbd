"""Blocking syncs: the wait for the GPU is an edge, replayed once — not again as a gap."""

from __future__ import annotations

from pathlib import Path

import pytest

from lumos.converters.chakra.attrs import attrs_dict
from lumos.converters.chakra.stream import read_et
from lumos.converters.pytorch.convert import convert
from lumos.proto import pb
from lumos.simulator.report.compare import compare
from lumos.simulator.report.measured import read_measured
from lumos.simulator.run import simulate
from tests.conftest import fixture_path
from tests.converters.pytorch.kineto_snippet import Snippet

HTA = "HolisticTraceAnalysis/tests/data"


def _convert(path: Path, out: Path) -> tuple[dict[str, pb.Node], dict[int, pb.Node], dict]:
    result = convert([path], out, prefix="t")
    _, nodes = read_et(out / "t.0.et")
    return {n.name: n for n in nodes}, {n.id: n for n in nodes}, result.ranks[0].syncs


def _replay_error_pct(out: Path) -> float:
    comparison = compare(simulate(out / "t"), read_measured(out / "t"))
    assert comparison.error_pct is not None
    return comparison.error_pct


def _blocking_copy_step(cuda_sync: bool, sync_name: str = "cudaStreamSynchronize") -> Snippet:
    """A 300 µs kernel, then `.item()`: a stream sync that blocks 278 µs for it."""
    k = Snippet()
    k.step(3, 1000.0, 400.0)
    k.op("aten::mm", 1010.0, 20.0)
    k.launch("void gemm_kernel<float>", 1012.0, stream=7, start=1020.0, dur=300.0)
    k.op("aten::item", 1040.0, 290.0)
    corr = k.runtime(sync_name, 1042.0, 285.0)
    if cuda_sync:
        k.cuda_sync("Stream Sync", corr, 1043.0, 284.0, stream=7, device=0, context=1)
    k.op("aten::add", 1335.0, 10.0)
    return k


@pytest.mark.parametrize("cuda_sync", [True, False], ids=["cuda_sync", "no_cuda_sync"])
def test_sync_wait_is_not_counted_twice(tmp_path: Path, cuda_sync: bool) -> None:
    """The sync keeps the 7 µs it ran after the kernel; the op after it keeps its 5 µs
    recorded gap (it was 283 µs: the wait again, as untraced CPU time, +69%)."""
    path = _blocking_copy_step(cuda_sync).write(tmp_path / "rank0.json.gz")
    by_name, by_id, syncs = _convert(path, tmp_path / "et")
    sync = attrs_dict(by_name["cudaStreamSynchronize"])
    assert (sync["dur_ns"], sync["sync_wait_ns"]) == (7_000, 278_000)
    kernel = by_name["void gemm_kernel<float>"]
    assert kernel.id in by_name["cudaStreamSynchronize"].data_deps
    item_tail = [n for n in by_id.values() if n.name == "aten::item"][-1]
    assert attrs_dict(item_tail)["gap_ns"] == 0
    assert attrs_dict(by_name["aten::add"])["gap_ns"] == 5_000
    assert syncs["recorded" if cuda_sync else "inferred"] == 1
    assert abs(_replay_error_pct(tmp_path / "et")) < 1.0


@pytest.mark.parametrize("cuda_sync", [True, False], ids=["cuda_sync", "no_cuda_sync"])
def test_per_thread_sync_names(tmp_path: Path, cuda_sync: bool) -> None:
    """A program built with `--default-stream per-thread` records the sync as
    `cudaStreamSynchronize_ptsz`. It was not read as a sync: no edge to the kernel, its
    278 µs wait kept inside the call, so a what-if that shortens the kernel could not shorten
    the call. It now waits as the plain call does."""
    name = "cudaStreamSynchronize_ptsz"
    path = _blocking_copy_step(cuda_sync, name).write(tmp_path / "rank0.json.gz")
    by_name, _, syncs = _convert(path, tmp_path / "et")
    sync = attrs_dict(by_name[name])
    assert (sync["dur_ns"], sync["sync_wait_ns"]) == (7_000, 278_000)
    assert sync["sync_kind"] == "stream"
    assert by_name["void gemm_kernel<float>"].id in by_name[name].data_deps
    assert syncs["recorded" if cuda_sync else "inferred"] == 1
    assert abs(_replay_error_pct(tmp_path / "et")) < 1.0


def test_hta_event_sync_fixture_wait_replayed_once(tmp_path: Path) -> None:
    """HTA's cuda_event_sync: cudaEventSynchronize waits 26 µs for a spin kernel; the
    query after it was recorded 3 µs later. Replay was +0.79% (the 26 µs twice)."""
    path = fixture_path(f"{HTA}/critical_path/cuda_event_sync/event_sync_trace.json.gz")
    by_name, _, syncs = _convert(path, tmp_path)
    sync = attrs_dict(by_name["cudaEventSynchronize"])
    assert (sync["dur_ns"], sync["sync_wait_ns"]) == (8_000, 26_000)
    assert attrs_dict(by_name["cudaEventQuery"])["gap_ns"] == 3_000
    assert syncs == {
        "recorded": 3,
        "inferred": 0,
        "rejected": 0,
        "same_stream": 0,
        "unresolved": 0,
    }
    assert abs(_replay_error_pct(tmp_path)) < 0.1
