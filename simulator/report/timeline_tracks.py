"""What the Perfetto timeline adds to the per-rank slices: peers, the critical path, args.

- `peer_flows`: an arrow from the member of each collective (or send/recv pair) that
  arrived last — the one the others waited for — to every other member, landing where
  that member's transfer starts (`start_ns + wait_ns`, the same instant on all of them);
- `critical_path_events`: a process "critical path" with one track of the path's
  stretches in time order (task, wait, gap, backlog), each naming its rank and node;
- `comm_args`: what a communication slice is (type, bytes, group, peer) for its args.

Every event follows the Chrome trace-event format: `ts`/`dur` in µs, flows as an `s`
event and an `f` event (`bp: "e"`, bound to the enclosing slice) sharing an `id`.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np

from lumos.simulator.graph import COLL, RankGraph
from lumos.simulator.report.critical_path import CriticalPath
from lumos.simulator.result import SimResult

#: the critical-path track's process id: after every rank's
CRITICAL_PATH_PID = 1 << 30
_COMM_NAMES = {
    0: "all_reduce",
    1: "all_to_all",
    2: "all_gather",
    3: "reduce_scatter",
    4: "broadcast",
}


def comm_args(graph: RankGraph, row: int) -> dict[str, Any]:
    """Args of a communication slice: collective type, bytes, process group, peer."""
    args: dict[str, Any] = {"bytes": int(graph.comm_size[row])}
    if graph.type[row] == COLL:
        kind = int(graph.comm_type[row])
        args["collective"] = _COMM_NAMES.get(kind, f"type {kind}")
        group = int(graph.group[row])
        if 0 <= group < len(graph.groups):
            args["group_ranks"] = list(graph.groups[group])
        label = int(graph.pg_label[row])
        if 0 <= label < len(graph.pg_labels):
            args["pg_name"] = graph.pg_labels[label]
    else:
        args["peer"] = int(graph.comm_peer[row])
    return args


def peer_flows(result: SimResult, tids: dict[int, list[int]], first_id: int) -> list[Any]:
    """Flow arrows from the last-arriving member of each joint event to the others.

    `tids[rank]` maps a rank's processor index to its trace `tid`. Ranks folded onto
    another (not simulated themselves) are left out.
    """
    members: dict[int, list[tuple[int, int, int]]] = defaultdict(list)
    for rank in result.ranks:
        if rank.folded_from is not None or rank.rank not in tids:
            continue
        t = rank.tasks
        rows = np.flatnonzero(t.match >= 0)
        for row, m in zip(rows.tolist(), t.match[rows].tolist(), strict=True):
            members[m].append((int(t.start_ns[row]), rank.rank, row))
    by_rank = {r.rank: r for r in result.ranks}
    events: list[Any] = []
    flow_id = first_id
    for match in sorted(members):
        group = members[match]
        if len({r for _, r, _ in group}) < 2:
            continue
        start, src_rank, src_row = max(group)
        src = by_rank[src_rank].tasks
        for _, dst_rank, dst_row in group:
            if dst_rank == src_rank:
                continue
            dst = by_rank[dst_rank].tasks
            common = {"cat": "peer", "name": "last arrival", "id": flow_id}
            events.append(
                {
                    **common,
                    "ph": "s",
                    "pid": src_rank,
                    "tid": tids[src_rank][int(src.proc[src_row])],
                    "ts": start / 1000.0,
                }
            )
            land = int(dst.start_ns[dst_row] + dst.wait_ns[dst_row])
            events.append(
                {
                    **common,
                    "ph": "f",
                    "bp": "e",
                    "pid": dst_rank,
                    "tid": tids[dst_rank][int(dst.proc[dst_row])],
                    "ts": land / 1000.0,
                }
            )
            flow_id += 1
    return events


def critical_path_events(path: CriticalPath) -> list[Any]:
    """A "critical path" process with one track holding the path's stretches."""
    pid, tid = CRITICAL_PATH_PID, 1
    events: list[Any] = [
        {
            "ph": "M",
            "name": "process_name",
            "pid": pid,
            "tid": 0,
            "args": {"name": "critical path"},
        },
        {"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0, "args": {"sort_index": -1}},
        {
            "ph": "M",
            "name": "thread_name",
            "pid": pid,
            "tid": tid,
            "args": {"name": f"critical path ({path.total_ns / 1e6:.3f} ms)"},
        },
    ]
    for step in path.steps:
        if step.dur_ns <= 0:
            continue
        name = step.name
        if step.kind.value != "task":
            plain = not step.name or step.name.startswith("(")
            name = step.kind.value if plain else f"{step.kind.value}: {step.name}"
        events.append(
            {
                "ph": "X",
                "cat": "critical_path",
                "name": name,
                "pid": pid,
                "tid": tid,
                "ts": step.start_ns / 1000.0,
                "dur": step.dur_ns / 1000.0,
                "args": {
                    "rank": step.rank,
                    "node_id": step.node_id,
                    "kind": step.kind.value,
                    "category": step.category,
                },
            }
        )
    return events
