"""Chrome/Perfetto trace of a simulated run, shaped like a Kineto trace.

One process (`pid`) per rank named "rank N"; one thread (`tid`) per processor, named as
Kineto names them ("stream 7" for a CUDA stream, "thread 1234" for a host thread); every
task a complete event (`ph: "X"`) with `ts`/`dur` in microseconds as floats. Optional flow
arrows (`ph: "s"`/`"f"`) join a task to a dependent task on another processor, like
Kineto's launch → kernel arrows. The file is written in chunks with orjson, so runs with
millions of tasks stream to disk (gzip when the path ends in `.gz`) without building one
giant list.
"""

from __future__ import annotations

import gzip
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any, cast

import numpy as np
import orjson

from lumos.outputs import atomic_write
from lumos.simulator.graph import RankGraph
from lumos.simulator.report.critical_path import CriticalPath
from lumos.simulator.report.timeline_tracks import comm_args, critical_path_events, peer_flows
from lumos.simulator.result import ProcessorInfo, ProcKind, RankResult, SimResult

CHUNK = 65_536
_CAT = {ProcKind.GPU: "kernel", ProcKind.CPU: "cpu_op", ProcKind.COMM: "comm"}
_SORT = {ProcKind.CPU: 0, ProcKind.GPU: 1, ProcKind.COMM: 2, ProcKind.META: 3}


def thread_ids(processors: list[ProcessorInfo]) -> list[int]:
    """A distinct trace `tid` per processor: its stream id or thread id where it has one."""
    used: set[int] = set()
    out: list[int] = []
    for proc in processors:
        tid = proc.key if proc.key is not None and proc.key not in used else None
        if tid is None:
            tid = -1
            while tid in used:
                tid -= 1
        used.add(tid)
        out.append(tid)
    return out


def _metadata(pid: int, rank: int, processors: list[ProcessorInfo], tids: list[int]) -> list[Any]:
    events: list[dict[str, Any]] = [
        {"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": f"rank {rank}"}},
        {
            "ph": "M",
            "name": "process_sort_index",
            "pid": pid,
            "tid": 0,
            "args": {"sort_index": rank},
        },
    ]
    for i, (proc, tid) in enumerate(zip(processors, tids, strict=True)):
        events.append(
            {"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": proc.name}}
        )
        order = _SORT.get(proc.kind, 4) * 100_000 + i
        events.append(
            {
                "ph": "M",
                "name": "thread_sort_index",
                "pid": pid,
                "tid": tid,
                "args": {"sort_index": order},
            }
        )
    return events


def rank_events(rank: RankResult, graph: RankGraph | None = None) -> Iterator[list[dict[str, Any]]]:
    """The trace events of one rank, in chunks: metadata first, then one X event per task.

    Zero-length bookkeeping tasks (metadata nodes) are left out. Args say what a slice
    is: node id, processor, and for communication (with the rank's `graph`) the type,
    bytes, group or peer and the wait for peers.
    """
    procs = rank.processors
    tids = thread_ids(procs)
    yield _metadata(rank.rank, rank.rank, procs, tids)
    tasks = rank.tasks
    meta = np.array([p.kind == ProcKind.META for p in procs] + [False], dtype=bool)
    keep = np.flatnonzero(~(meta[tasks.proc] & (tasks.end_ns == tasks.start_ns)))
    tid_of = np.asarray(tids, dtype=np.int64)
    cat_of = [_CAT.get(p.kind, "meta") for p in procs]
    pid = rank.rank
    for lo in range(0, keep.size, CHUNK):
        rows = keep[lo : lo + CHUNK]
        start = tasks.start_ns[rows]
        ts = (start / 1000.0).tolist()
        dur = ((tasks.end_ns[rows] - start) / 1000.0).tolist()
        proc = tasks.proc[rows].tolist()
        tid = tid_of[tasks.proc[rows]].tolist()
        name_idx = tasks.name_idx[rows].tolist()
        node = tasks.node_id[rows].tolist()
        wait = tasks.wait_ns[rows].tolist()
        comm = tasks.is_comm[rows].tolist()
        row_ids = rows.tolist()
        names = tasks.names
        chunk = []
        for j in range(rows.size):
            args: dict[str, Any] = {"node_id": node[j], "processor": procs[proc[j]].name}
            if comm[j]:
                if graph is not None:
                    args.update(comm_args(graph, row_ids[j]))
                args["wait_for_peers_ns"] = wait[j]
            elif wait[j]:
                args["wait_ns"] = wait[j]
            chunk.append(
                {
                    "ph": "X",
                    "cat": cat_of[proc[j]],
                    "name": names[name_idx[j]],
                    "pid": pid,
                    "tid": tid[j],
                    "ts": ts[j],
                    "dur": dur[j],
                    "args": args,
                }
            )
        yield chunk


def flow_events(result: SimResult, k: int, first_id: int) -> list[dict[str, Any]]:
    """Flow arrows for the dependencies of rank index `k` that cross processors."""
    rank = result.ranks[k]
    if k >= len(result.graphs):
        return []
    graph, tasks = result.graphs[k], rank.tasks
    dst = np.repeat(np.arange(len(tasks)), np.diff(graph.dep_ptr))
    src = graph.dep_idx.astype(np.int64)
    cross = tasks.proc[src] != tasks.proc[dst]
    src, dst = src[cross], dst[cross]
    tids = np.asarray(thread_ids(rank.processors), dtype=np.int64)
    out: list[dict[str, Any]] = []
    for i, (s, d) in enumerate(zip(src.tolist(), dst.tolist(), strict=True)):
        common = {"cat": "dep", "name": "dep", "pid": rank.rank, "id": first_id + i}
        s_ts = float(tasks.start_ns[s]) / 1000.0
        out.append({**common, "ph": "s", "tid": int(tids[tasks.proc[s]]), "ts": s_ts})
        d_ts = float(tasks.start_ns[d]) / 1000.0
        out.append({**common, "ph": "f", "bp": "e", "tid": int(tids[tasks.proc[d]]), "ts": d_ts})
    return out


def _open(raw: IO[bytes], compress: bool) -> IO[bytes]:
    if compress:
        return cast(IO[bytes], gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=3))
    return raw


def _write_chunk(out: IO[bytes], chunk: list[dict[str, Any]], first: bool) -> bool:
    """Append events to the open traceEvents array; returns whether it is still empty."""
    if not chunk:
        return first
    if not first:
        out.write(b",")
    out.write(orjson.dumps(chunk)[1:-1])
    return False


def write_timeline(
    result: SimResult,
    path: str | os.PathLike[str],
    *,
    ranks: Iterable[int] | None = None,
    flows: bool = False,
    peers: bool = True,
    critical_path: CriticalPath | None = None,
) -> int:
    """Write the run as a Chrome/Perfetto JSON trace; returns the number of task events.

    `ranks` limits the output to some global ranks (all by default); `flows` adds
    dependency arrows between processors; `peers` arrows from each collective's last
    arrival to its other members; `critical_path` a track of the path. The file appears
    atomically (temp + rename).
    """
    target = Path(path)
    wanted = None if ranks is None else set(ranks)
    count = 0
    flow_id = 1
    with atomic_write(target) as raw, _open(raw, target.name.endswith(".gz")) as out:
        out.write(b'{"schemaVersion":1,"displayTimeUnit":"ns","traceEvents":[')
        first = True
        tids: dict[int, list[int]] = {}
        for k, rank in enumerate(result.ranks):
            if wanted is not None and rank.rank not in wanted:
                continue
            tids[rank.rank] = thread_ids(rank.processors)
            graph = result.graphs[k] if k < len(result.graphs) else None
            for index, chunk in enumerate(rank_events(rank, graph)):
                count += len(chunk) if index else 0
                first = _write_chunk(out, chunk, first)
            if flows:
                arrows = flow_events(result, k, flow_id)
                flow_id += len(arrows) // 2
                first = _write_chunk(out, arrows, first)
        if peers:
            first = _write_chunk(out, peer_flows(result, tids, flow_id), first)
        if critical_path is not None and critical_path.steps:
            first = _write_chunk(out, critical_path_events(critical_path), first)
        meta = {"lumos": {"mode": result.mode, "iteration_time_ns": result.iteration_time_ns}}
        out.write(b"]," + orjson.dumps(meta)[1:-1] + b"}")
    return count
