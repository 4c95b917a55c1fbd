"""What a simulation returns: per-rank task tables, processors, iteration times.

Times are integer nanoseconds from the simulated step start (t = 0). Row `i` of a rank's
`TaskTable` is node `i` of that rank's `RankGraph` (`SimResult.graphs[k]`, same order as
`SimResult.ranks`), so the graph's dependency arrays (`dep_ptr`/`dep_idx`, node indices)
apply directly to the table's rows — that is what a critical-path analysis walks.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from lumos.simulator.graph import RankGraph
    from lumos.simulator.report.breakdown import Breakdown


class ProcKind(str, Enum):
    """What kind of in-order resource runs a task.

    `cpu`: a host thread (`tid`), or the rank's single "cpu" processor of foreign ETs;
    `gpu`: a CUDA stream (`stream`), or the rank's single "gpu" compute processor;
    `comm`: the rank's communication processor of foreign ETs (no stream/tid);
    `meta`: zero-cost bookkeeping nodes (METADATA/INVALID) and, in astra mode, receives —
    unlimited concurrency, never a bottleneck.
    """

    CPU = "cpu"
    GPU = "gpu"
    COMM = "comm"
    META = "meta"


@dataclass(frozen=True, slots=True)
class ProcessorInfo:
    """One processor of a rank. `key` is the tid (cpu) or stream id (gpu), None for the
    per-rank catch-all processors. `name` is for display: "thread 7", "stream 20", "gpu"."""

    name: str
    kind: ProcKind
    key: int | None = None


@dataclass(slots=True)
class TaskTable:
    """Simulated schedule of one rank, one row per graph node (numpy arrays, length n).

    - `node_id` (int64): the node's id in the ET;
    - `start_ns` / `end_ns` (int64): when the node took / released its processor;
    - `wait_ns` (int64): the part of [start, end) spent blocked — a collective or send/recv
      waiting for peers (rendezvous), or a synchronize call waiting for GPU work at run
      time; the active part is [start + wait, end). A collective's transfer therefore
      starts at `start_ns + wait_ns`, the same instant on every member;
    - `proc` (int32): index into `RankResult.processors`;
    - `type` (int8): Chakra NodeType value (4 COMP, 5 SEND, 6 RECV, 7 COLL, ...);
    - `is_comm` (bool): COMM_SEND / COMM_RECV / COMM_COLL;
    - `name_idx` (int32): index into `names` (names are interned per rank);
    - `match` (int64): for communication rows, the id of the joint event they take part in
      (a collective instance, or a send/recv pair), equal on every member rank and unique
      within one `SimResult`; -1 for other rows. The member that arrived last
      (largest `start_ns`) is the one the others waited for.
    """

    node_id: np.ndarray
    start_ns: np.ndarray
    end_ns: np.ndarray
    wait_ns: np.ndarray
    proc: np.ndarray
    type: np.ndarray
    is_comm: np.ndarray
    name_idx: np.ndarray
    match: np.ndarray
    names: list[str]

    def __len__(self) -> int:
        return len(self.node_id)

    def name(self, row: int) -> str:
        """The node name of one row."""
        return self.names[int(self.name_idx[row])]


@dataclass(slots=True)
class RankResult:
    """One rank's simulated step: it starts at `start_ns` (0 unless ranks are aligned on
    their measured step starts). `iteration_time_ns` is the CPU loop's window, what a
    `ProfilerStep` measures (the step thread's last end + the untraced tail, see
    `lumos.simulator.step_end`; without a measured step, the last node's end), minus
    `start_ns`; `gpu_inclusive_ns` runs to the later of that and the last node's end (GPU
    work that outlives the loop). `gpu_free_ns[p]`: when processor p (a GPU stream busy
    with work queued before the step) could take its first node (`lumos.simulator.backlog`).

    When the run was folded (identical ranks simulated once), a rank that was not
    simulated itself shares its representative's `tasks` and `processors`;
    `folded_from` names that representative (None for simulated ranks).

    A run that kept no timelines (`SimResult.timelines` false) has no task rows; its
    `breakdown` was computed from the schedule before the per-node times were dropped
    (None when the task table is there to compute it from).
    """

    rank: int
    iteration_time_ns: int
    processors: list[ProcessorInfo]
    tasks: TaskTable
    measured_step_ns: int | None = None
    folded_from: int | None = None
    start_ns: int = 0
    gpu_inclusive_ns: int = -1
    gpu_free_ns: dict[int, int] = field(default_factory=dict)
    breakdown: Breakdown | None = None

    def __post_init__(self) -> None:
        if self.gpu_inclusive_ns < self.iteration_time_ns:
            self.gpu_inclusive_ns = self.iteration_time_ns

    @property
    def end_ns(self) -> int:
        """When the rank's CPU window ends (simulated clock)."""
        return self.start_ns + self.iteration_time_ns

    @property
    def gpu_end_ns(self) -> int:
        """When the rank's last work ends, GPU included (simulated clock)."""
        return self.start_ns + self.gpu_inclusive_ns


@dataclass(slots=True)
class SimResult:
    """A whole simulation: every rank, sorted by rank.

    `iteration_time_ns` is the slowest rank's step (max over ranks of their own
    `iteration_time_ns`; never the span from the first start to the last end). `aligned`: ranks start at their measured step starts
    (`RankResult.start_ns`); `align_note` says why not, when they do not. `graphs[k]` is the `RankGraph` of
    `ranks[k]` (for folded ranks, the representative's graph). `mode` is "replay",
    "model" or "astra". `stats` holds run counters (nodes simulated, events, wall seconds).
    `notes` says, in words, what the numbers rest on where a reader could assume more
    (compute kept at its recorded time under `--hw`, durations that were missing).
    `timelines` false: the run kept no per-node times and no graphs (`SimOptions.timelines`):
    step times and breakdowns only, no critical path or timeline.
    """

    ranks: list[RankResult]
    iteration_time_ns: int
    mode: str
    graphs: list[RankGraph] = field(default_factory=list)
    stats: dict[str, Any] = field(default_factory=dict)
    aligned: bool = False
    align_note: str = ""
    notes: list[str] = field(default_factory=list)
    timelines: bool = True

    @property
    def gpu_inclusive_ns(self) -> int:
        """The slowest rank's GPU-inclusive step (GPU work that outlives the CPU loop
        included): what an edit of GPU work alone moves when the loop never waits for it."""
        return max((r.gpu_inclusive_ns for r in self.ranks), default=0)

    def rank(self, rank: int) -> RankResult:
        """The result of one global rank. Raises KeyError if it was not loaded."""
        for r in self.ranks:
            if r.rank == rank:
                return r
        raise KeyError(rank)

    def to_json(self) -> dict[str, Any]:
        """Summary for `--json`: overall and per-rank iteration times."""
        return {
            "mode": self.mode,
            "iteration_time_ns": self.iteration_time_ns,
            "gpu_inclusive_ns": self.gpu_inclusive_ns,
            "aligned": self.aligned,
            "align_note": self.align_note,
            "ranks": [
                {
                    "rank": r.rank,
                    "start_ns": r.start_ns,
                    "iteration_time_ns": r.iteration_time_ns,
                    "gpu_inclusive_ns": r.gpu_inclusive_ns,
                    "measured_step_ns": r.measured_step_ns,
                    "folded_from": r.folded_from,
                }
                for r in self.ranks
            ],
            "notes": self.notes,
            "stats": self.stats,
        }


@dataclass(slots=True)
class Schedule:
    """Per global node (int64 arrays): start, end, blocked time (-1 = never ran); events
    processed."""

    start: np.ndarray
    end: np.ndarray
    wait: np.ndarray
    events: int
