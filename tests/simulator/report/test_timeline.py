"""Timeline export: Kineto-shaped Chrome trace JSON of hand-made and real simulated runs."""

from __future__ import annotations

import gzip
from pathlib import Path

import orjson

from lumos.simulator.report.timeline import thread_ids, write_timeline
from lumos.simulator.result import ProcessorInfo, ProcKind
from tests.simulator.report.cases import late_peer_rank, overlap_rank, simulated


def load(path: Path) -> dict:  # type: ignore[type-arg]
    data = path.read_bytes()
    return orjson.loads(gzip.decompress(data) if path.name.endswith(".gz") else data)


def test_timeline_has_one_pid_per_rank_named_threads_and_float_microseconds(tmp_path: Path) -> None:
    out = tmp_path / "run.json"
    count = write_timeline(simulated(overlap_rank(), late_peer_rank()), out)
    trace = load(out)
    events = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert count == len(events) == 7
    assert {e["pid"] for e in events} == {0, 1}
    threads = {
        (e["pid"], e["tid"]): e["args"]["name"]
        for e in trace["traceEvents"]
        if e["ph"] == "M" and e["name"] == "thread_name"
    }
    assert threads[(0, 7)] == "stream 7" and threads[(0, 20)] == "stream 20"
    assert threads[(1, 1)] == "thread 1"
    procs = {
        e["pid"]: e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "process_name"
    }
    assert procs == {0: "rank 0", 1: "rank 1"}
    ar = next(e for e in events if e["pid"] == 0 and e["name"] == "allreduce")
    assert ar["ts"] == 0.04 and ar["dur"] == 0.06 and ar["tid"] == 20
    assert ar["cat"] == "kernel" and ar["args"]["node_id"] == 103
    assert ar["args"]["wait_for_peers_ns"] == 10 and ar["args"]["processor"] == "stream 20"
    assert next(e for e in events if e["name"] == "launch_a")["cat"] == "cpu_op"
    assert trace["lumos"]["iteration_time_ns"] == 100


def test_flows_join_tasks_across_processors_and_gzip_output(tmp_path: Path) -> None:
    out = tmp_path / "run.json.gz"
    write_timeline(simulated(overlap_rank()), out, flows=True)
    events = load(out)["traceEvents"]
    starts = [e for e in events if e["ph"] == "s"]
    finishes = [e for e in events if e["ph"] == "f"]
    # launch_a -> gemm and launch_ar -> allreduce cross processors; the rest do not
    assert len(starts) == len(finishes) == 2
    assert sorted((s["tid"], f["tid"]) for s, f in zip(starts, finishes, strict=True)) == [
        (1, 7),
        (1, 20),
    ]
    assert not (tmp_path / "run.json.gz.tmp").exists()


def test_rank_filter_and_distinct_thread_ids(tmp_path: Path) -> None:
    out = tmp_path / "r1.json"
    assert write_timeline(simulated(overlap_rank(), late_peer_rank()), out, ranks=[1]) == 2
    assert {e["pid"] for e in load(out)["traceEvents"]} == {1}
    procs = [
        ProcessorInfo("gpu", ProcKind.GPU),
        ProcessorInfo("comm", ProcKind.COMM),
        ProcessorInfo("stream 7", ProcKind.GPU, 7),
        ProcessorInfo("thread 7", ProcKind.CPU, 7),
    ]
    assert thread_ids(procs) == [-1, -2, 7, -3]
