"""CUDA graph launches: one call, many GPU ops, ordered by dependencies the trace omits.

A `cudaGraphLaunch` (`hipGraphLaunch`) replays a captured graph: Kineto gives every op of
the graph the launch's `correlation`, and CUPTI reports the ops on the streams the graph
executor placed them on — often not the stream the graph was launched into, and a fresh
set of streams per replay (pytorch/pytorch#152114) — with none of the graph's own edges
(fork and join between its branches) nor its place in the launch stream's order. The
recorded times still show each wait: an op that started more than `HELD_NS` after it was
ready (`tasks.ready_ns`: its stream predecessor, its launch and its other dependencies
had ended) waited for something, and when an op on another stream ended within `HELD_NS`
before it started, that op is what it waited for. The converter adds that edge for:

- every op of a launch with more than one GPU op (a join inside the graph; for the
  graph's first ops, the work on other streams launched before the graph: its entry);
- the first op launched after the graph on each stream (the graph's exit: eager work on
  the launch stream waits for the whole graph).

A graph's "stream" for a sync that names none is the stream of its last op to end
(`sync_edges`). Edges never point back in recorded time (the op waited for ended before
the waiting op started), so they cannot make a cycle.
"""

from __future__ import annotations

import numpy as np

from lumos.converters.pytorch.stream_index import StreamIndex
from lumos.converters.pytorch.tasks import GPU_GAP_MAX_NS, TaskTable, ready_ns

#: an op starting this much later than it was ready waited for something (more than the
#: dispatch overhead that `tasks.GPU_GAP_MAX_NS` keeps as a gap).
HELD_NS = GPU_GAP_MAX_NS
#: runtime calls a stream sync looks back over for the graphs launched before it.
MAX_LOOKBACK = 10_000


def graph_launches(table: TaskTable, index: StreamIndex) -> dict[int, list[int]]:
    """Launch task → its GPU ops (in stream order), for launches of more than one op."""
    ops_of: dict[int, list[int]] = {}
    for ops in index.ops.values():
        for op in ops:
            launch = int(table.data1[op])
            if launch >= 0:
                ops_of.setdefault(launch, []).append(op)
    return {launch: ops for launch, ops in ops_of.items() if len(ops) > 1}


def add_graph_edges(table: TaskTable, index: StreamIndex) -> dict[str, int]:
    """Add the join, entry and exit edges of every graph launch (see module doc).

    Returns counts: `launches` (graphs), `ops` (their GPU ops), `joins` (edges added).
    """
    graphs = graph_launches(table, index)
    counts = {"launches": len(graphs), "ops": sum(map(len, graphs.values())), "joins": 0}
    for launch in sorted(graphs, key=lambda t: (int(table.start[t]), t)):
        ops = graphs[launch]
        at = int(table.start[launch])
        prior = [index.last_before(s, at) for s in index.ops]
        before = [op for op in prior if op is not None]
        for op in sorted(ops, key=lambda t: (int(table.start[t]), t)):
            counts["joins"] += _join(table, op, ops + before)
        for stream in index.ops:
            after = index.first_after(stream, at)
            if after is not None and int(table.data1[after]) != launch:
                counts["joins"] += _join(table, after, ops)
    return counts


def _join(table: TaskTable, op: int, candidates: list[int]) -> bool:
    """Make `op` wait for the candidate on another stream that ended last before it
    started, when `op` was held and that end explains it; True if an edge was added."""
    start = int(table.start[op])
    ready = int(ready_ns(table, np.asarray([op]))[0])
    if start - ready <= HELD_NS:
        return False
    stream = int(table.stream[op])
    best, best_end = -1, ready
    for c in candidates:
        end = table.end(c)
        if int(table.stream[c]) != stream and start - HELD_NS <= end <= start and end > best_end:
            best, best_end = c, end
    if best < 0:
        return False
    table.add_data(op, best)
    return True


def launch_streams(table: TaskTable, index: StreamIndex, n_cpu: int) -> np.ndarray:
    """The stream each of the first `n_cpu` tasks launched on (-1: none); a graph
    launch's is the stream of its op that ended last (the graph is done when it is)."""
    out = np.full(n_cpu, -1, np.int64)
    parts = [np.asarray(ops, np.int64) for ops in index.ops.values() if ops]
    if not parts:
        return out
    ops = np.concatenate(parts)
    ops = ops[np.lexsort((ops, table.start[ops] + table.dur[ops]))][::-1]
    launch, first = np.unique(table.data1[ops], return_index=True)
    keep = launch >= 0
    out[launch[keep]] = table.stream[ops[first[keep]]]
    return out


class RecentGraphs:
    """Graph launches among a thread-sorted list of runtime calls (`stream_at`: the stream
    each launched on, -1 for none), for the stream syncs after them."""

    def __init__(
        self, table: TaskTable, index: StreamIndex, runtime: np.ndarray, stream_at: np.ndarray
    ) -> None:
        self.table, self.runtime, self.stream_at = table, runtime, stream_at
        graphs = graph_launches(table, index)
        self.sink = {launch: max(ops, key=table.end) for launch, ops in graphs.items()}
        self.streams = {g: {int(table.stream[o]) for o in ops} for g, ops in graphs.items()}

    def sinks(self, pos: int, stream: int, until: int) -> list[int]:
        """The last op of each graph that the thread of call `pos` launched before it and
        after its last launch onto `stream`, if that op ended by `until`: the graph's launch
        stream is not in the trace, and a graph launched into `stream` is part of its work.
        A graph with an op on `stream` ends the search like a launch onto it."""
        if not self.sink:
            return []
        table, runtime = self.table, self.runtime
        tid = table.tid[runtime[pos]]
        out = []
        for q in range(pos - 1, max(pos - MAX_LOOKBACK, 0) - 1, -1):
            task = int(runtime[q])
            if table.tid[task] != tid:
                break
            if task in self.sink:
                if stream in self.streams[task]:
                    break
                if table.end(self.sink[task]) <= until:
                    out.append(self.sink[task])
            elif int(self.stream_at[q]) == stream:
                break
        return out
