"""Measured and simulated steps in one Perfetto file, one process each, for `compare`.

Process "simulated" and process "measured" hold the same tracks — one per rank and
processor ("rank 1 · stream 7"), in the same order — so expanding both shows each
node's recorded slice under its simulated one. A node is placed on the measured side
by its recorded `start_ns` (relative to its rank's step start) plus, when the ranks
were aligned, the rank's measured step start relative to the earliest one: the same
clock the simulation ran on. Nodes without a recorded start appear on the simulated
side only. Written atomically (temp + rename), gzip when the name ends in `.gz`.
"""

from __future__ import annotations

import gzip
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from lumos.outputs import atomic_write
from lumos.simulator.report.measured import MeasuredRank
from lumos.simulator.result import ProcKind, SimResult

SIDES = ("simulated", "measured")
_TRACKS_PER_RANK = 10_000


def _meta(pid: int, side: str) -> list[dict[str, Any]]:
    return [
        {"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": side}},
        {
            "ph": "M",
            "name": "process_sort_index",
            "pid": pid,
            "tid": 0,
            "args": {"sort_index": pid},
        },
    ]


def _slice(pid: int, tid: int, name: str, start: int, dur: int, args: dict[str, Any]) -> Any:
    return {
        "ph": "X",
        "cat": "node",
        "name": name,
        "pid": pid,
        "tid": tid,
        "ts": start / 1000.0,
        "dur": dur / 1000.0,
        "args": args,
    }


def comparison_events(result: SimResult, measured: Sequence[MeasuredRank]) -> list[Any]:
    """Every event of the side-by-side file (metadata, then slices per side)."""
    by_rank = {m.rank: m for m in measured}
    starts = [m.step_start_ns for m in measured if m.step_start_ns is not None]
    origin = min(starts) if starts else 0
    events: list[Any] = _meta(1, SIDES[0]) + _meta(2, SIDES[1])
    for rank in result.ranks:
        m = by_rank.get(rank.rank)
        shift = 0
        if result.aligned and m is not None and m.step_start_ns is not None:
            shift = m.step_start_ns - origin
        t = rank.tasks
        for p, proc in enumerate(rank.processors):
            if proc.kind == ProcKind.META:
                continue
            tid = rank.rank * _TRACKS_PER_RANK + p
            for pid in (1, 2):
                events.append(
                    {
                        "ph": "M",
                        "name": "thread_name",
                        "pid": pid,
                        "tid": tid,
                        "args": {"name": f"rank {rank.rank} · {proc.name}"},
                    }
                )
                events.append(
                    {
                        "ph": "M",
                        "name": "thread_sort_index",
                        "pid": pid,
                        "tid": tid,
                        "args": {"sort_index": tid},
                    }
                )
        rows = np.flatnonzero(
            ~np.isin(t.proc, [i for i, q in enumerate(rank.processors) if q.kind == ProcKind.META])
        )
        m_start, m_dur = _recorded(t.node_id, m)
        for row in rows.tolist():
            tid = rank.rank * _TRACKS_PER_RANK + int(t.proc[row])
            name = t.name(row)
            args = {"node_id": int(t.node_id[row]), "rank": rank.rank}
            sim_dur = int(t.end_ns[row] - t.start_ns[row])
            events.append(_slice(1, tid, name, int(t.start_ns[row]), sim_dur, args))
            if m_start[row] >= 0:
                rec = int(m_start[row]) + shift
                events.append(_slice(2, tid, name, rec, int(m_dur[row]), args))
    return events


def _recorded(node_id: np.ndarray, m: MeasuredRank | None) -> tuple[np.ndarray, np.ndarray]:
    """Recorded start and duration of each simulated row (-1 / 0 when not recorded)."""
    missing = (np.full(node_id.size, -1, np.int64), np.zeros(node_id.size, np.int64))
    if m is None or m.node_id.size == 0:
        return missing
    pos = np.clip(np.searchsorted(m.node_id, node_id), 0, m.node_id.size - 1)
    found = m.node_id[pos] == node_id
    return np.where(found, m.start_ns[pos], -1), np.where(found, m.dur_ns[pos], 0)


def write_comparison_timeline(
    result: SimResult, measured: Sequence[MeasuredRank], path: str | os.PathLike[str]
) -> int:
    """Write the side-by-side file; returns the number of slices written."""
    events = comparison_events(result, measured)
    target = Path(path)
    doc = orjson.dumps({"displayTimeUnit": "ns", "traceEvents": events})
    if target.name.endswith(".gz"):
        doc = gzip.compress(doc, compresslevel=3, mtime=0)
    with atomic_write(target) as out:  # through links, umask modes, nothing half-written
        out.write(doc)
    return sum(1 for e in events if e["ph"] == "X")
