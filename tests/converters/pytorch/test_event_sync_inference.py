"""`cudaEventSynchronize` / `hipEventSynchronize` without `cuda_sync` events: the CPU's wait
for an event is inferred like the stream waits (the event record it waits on → the sync).

Kineto writes the event a sync waited on only in `cuda_sync` events, which older
PyTorch/Kineto and ROCm traces lack; before this, such a sync got no edge at all and
the CPU ran on in the simulation as if the GPU were done. Hand-made traces with the
field layout PyTorch writes (`kineto_snippet`).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from lumos.converters.chakra.attrs import attrs_dict
from lumos.converters.chakra.conventions import INFERRED_EVENT_BASE
from lumos.converters.chakra.stream import read_et
from lumos.converters.pytorch.convert import convert
from lumos.proto import pb
from lumos.simulator.run import simulate
from tests.converters.pytorch.kineto_snippet import Snippet

NAMES = {
    "cuda": ("cudaEventSynchronize", "cudaEventRecord", "cudaLaunchKernel"),
    "hip": ("hipEventSynchronize", "hipEventRecord", "hipLaunchKernel"),
}


def _convert(path: Path, out: Path) -> tuple[dict[str, pb.Node], dict[str, int]]:
    result = convert([path], out, prefix="t")
    nodes = read_et(result.ranks[0].path)[1]
    return {n.name: n for n in nodes}, result.ranks[0].syncs


def _event_sync_step(api: str, sync_returns: float = 1525.0, record: bool = True) -> Snippet:
    """A long kernel on s7, its event recorded, a short kernel on s20 launched after the
    record, then the CPU syncs on the event (returns after A) and runs an op."""
    sync, rec, launch = NAMES[api]
    k = Snippet()
    k.step(1, 1000.0, 700.0)
    k.launch("kernel_A", 1010.0, stream=7, start=1020.0, dur=500.0, call=launch)
    if record:
        k.runtime(rec, 1016.0, 2.0)
    k.launch("kernel_side", 1022.0, stream=20, start=1030.0, dur=10.0, call=launch)
    k.runtime(sync, 1030.0, sync_returns - 1030.0)
    k.op("aten::add", sync_returns + 5.0, 10.0)
    return k


@pytest.mark.parametrize("api", ["cuda", "hip"])
def test_event_sync_without_cuda_sync_waits_for_the_recorded_op(tmp_path: Path, api: str) -> None:
    sync, rec, _ = NAMES[api]
    nodes, syncs = _convert(_event_sync_step(api).write(tmp_path / "r.json.gz"), tmp_path / "et")
    waited = [n for n in nodes.values() if n.id in nodes[sync].data_deps]
    assert [n.name for n in waited if n.type == pb.COMP_NODE] == ["kernel_A"]  # not s20's
    attrs, rec_attrs = attrs_dict(nodes[sync]), attrs_dict(nodes[rec])
    assert attrs["sync_kind"] == "event" and attrs["sync_inferred"] is True
    assert attrs["sync_stream"] == 7 and attrs["sync_event"] == rec_attrs["event_record"]
    assert rec_attrs["event_record"] >= INFERRED_EVENT_BASE
    assert attrs["sync_wait_ns"] > 400_000  # the 495 µs wait became the edge
    assert (syncs["inferred"], syncs["rejected"], syncs["unresolved"]) == (1, 0, 0)
    result = simulate(tmp_path / "et" / "t")
    g, tasks = result.graphs[0], result.ranks[0].tasks
    end = {g.name(i): int(tasks.end_ns[i]) for i in range(len(g))}
    start = {g.name(i): int(tasks.start_ns[i]) for i in range(len(g))}
    assert start["aten::add"] >= end["kernel_A"]  # the CPU waited for the GPU


def test_event_sync_contradicted_by_timestamps_is_rejected(tmp_path: Path) -> None:
    """The sync returned 300 µs before kernel_A ended: it did not wait for it."""
    snippet = _event_sync_step("cuda", sync_returns=1220.0)
    nodes, syncs = _convert(snippet.write(tmp_path / "r.json.gz"), tmp_path / "et")
    assert nodes["kernel_A"].id not in nodes["cudaEventSynchronize"].data_deps
    assert "sync_event" not in attrs_dict(nodes["cudaEventSynchronize"])
    assert (syncs["inferred"], syncs["rejected"]) == (0, 1)


def test_event_sync_without_a_record_on_its_thread_is_unresolved(tmp_path: Path) -> None:
    snippet = _event_sync_step("cuda", record=False)
    nodes, syncs = _convert(snippet.write(tmp_path / "r.json.gz"), tmp_path / "et")
    assert nodes["kernel_A"].id not in nodes["cudaEventSynchronize"].data_deps
    assert (syncs["inferred"], syncs["unresolved"]) == (0, 1)
