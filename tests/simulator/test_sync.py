"""Runtime synchronisation (stream/device/event syncs, stream wait-event) and the ablation."""

from __future__ import annotations

from lumos.simulator.graph import SyncKind
from lumos.simulator.run import SimOptions, simulate
from tests.simulator.graph_cases import rank_graph


def _stream_sync_case(kind: SyncKind) -> list[dict]:
    """Launch a 1000 ns kernel on stream 7, then sync with NO static edge, then a CPU op."""
    return [
        {"name": "launch", "tid": 1, "dur_ns": 10},
        {"name": "kernel", "stream": 7, "deps": [0], "dur_ns": 1000},
        {
            "name": "record",
            "tid": 1,
            "deps": [0],
            "dur_ns": 5,
            "sync_kind": SyncKind.EVENT_RECORD,
            "sync_stream": 7,
            "sync_event": 42,
        },
        {
            "name": "sync",
            "tid": 1,
            "deps": [2],
            "dur_ns": 3,
            "sync_kind": kind,
            "sync_stream": 7,
            "sync_event": 42,
        },
        {"name": "after", "tid": 1, "deps": [3], "dur_ns": 20},
    ]


def test_stream_device_and_event_syncs_wait_for_launched_work() -> None:
    for kind in (SyncKind.STREAM, SyncKind.DEVICE, SyncKind.EVENT):
        t = simulate([rank_graph(0, _stream_sync_case(kind))]).ranks[0].tasks
        # kernel runs 10..1010; the sync starts at 15, blocks until 1010, then takes 3 ns
        assert t.end_ns[1] == 1010
        assert (t.start_ns[3], t.wait_ns[3], t.end_ns[3]) == (15, 995, 1013), kind
        assert t.start_ns[4] == 1013


def test_ablation_drops_runtime_syncs() -> None:
    t = simulate([rank_graph(0, _stream_sync_case(SyncKind.STREAM))], SimOptions(ablate_sync=True))
    tasks = t.ranks[0].tasks
    assert tasks.end_ns[3] == 18 and tasks.wait_ns[3] == 0


def test_stream_wait_event_holds_later_kernels_on_the_waiting_stream() -> None:
    nodes = [
        {"name": "launch_a", "tid": 1, "dur_ns": 10},
        {"name": "kernel_a", "stream": 7, "deps": [0], "dur_ns": 500},
        {
            "name": "record",
            "tid": 1,
            "deps": [0],
            "dur_ns": 5,
            "sync_kind": SyncKind.EVENT_RECORD,
            "sync_stream": 7,
            "sync_event": 1,
        },
        {
            "name": "wait_event",
            "tid": 1,
            "deps": [2],
            "dur_ns": 5,
            "sync_kind": SyncKind.STREAM_WAIT_EVENT,
            "sync_stream": 9,
            "sync_event": 1,
        },
        {"name": "launch_b", "tid": 1, "deps": [3], "dur_ns": 10},
        {"name": "kernel_b", "stream": 9, "deps": [4], "dur_ns": 100},
    ]
    t = simulate([rank_graph(0, nodes)]).ranks[0].tasks
    assert t.end_ns[1] == 510
    assert (t.start_ns[5], t.end_ns[5]) == (510, 610)
    ablated = simulate([rank_graph(0, nodes)], SimOptions(ablate_sync=True)).ranks[0].tasks
    assert ablated.start_ns[5] == 30


def test_ablation_drops_static_cross_stream_and_gpu_to_cpu_edges() -> None:
    nodes = [
        {"name": "launch_a", "tid": 1, "dur_ns": 10},
        {"name": "kernel_a", "stream": 7, "deps": [0], "dur_ns": 500},
        {"name": "launch_b", "tid": 1, "deps": [0], "dur_ns": 10},
        {"name": "kernel_b", "stream": 9, "deps": [2, 1], "dur_ns": 100},
        {"name": "sync", "tid": 1, "deps": [2, 3], "dur_ns": 1},
    ]
    full = simulate([rank_graph(0, nodes)]).ranks[0].tasks
    assert full.start_ns[3] == 510 and full.end_ns[4] == 611
    ablated = simulate([rank_graph(0, nodes)], SimOptions(ablate_sync=True)).ranks[0].tasks
    assert ablated.start_ns[3] == 20 and ablated.end_ns[4] == 21
