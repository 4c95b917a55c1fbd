"""From a finished schedule to a `SimResult`: per-rank task tables, step ends, folding.

With timelines (the default) every rank's `TaskTable` holds its nodes' simulated times
as views of the schedule, and the result keeps the graphs (the critical path walks
their dependencies). Without (`SimOptions.timelines=False`, for jobs of tens of millions
of nodes), each rank keeps only its step times and its breakdown, computed here from its
slice of the schedule; the graphs were released before the event loop and only what a
result or an error message needs of them is kept in a `RankMeta`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from lumos.simulator.fold import Folding
from lumos.simulator.graph import COLL, RECV, SEND, RankGraph
from lumos.simulator.plan import Plan
from lumos.simulator.report.breakdown import rank_breakdown
from lumos.simulator.result import ProcessorInfo, RankResult, SimResult, TaskTable
from lumos.simulator.scheduler import Schedule
from lumos.simulator.step_end import StepTail, rank_end


@dataclass(frozen=True, slots=True)
class RankMeta:
    """What the result needs of one rank's graph once the graph itself is gone: node
    ids, types and names (task tables, error messages), the measured step."""

    rank: int
    ids: np.ndarray
    type: np.ndarray
    name_idx: np.ndarray
    names: list[str]
    measured_step_ns: int | None

    @classmethod
    def of(cls, g: RankGraph) -> RankMeta:
        return cls(g.rank, g.ids, g.type, g.name_idx, g.names, g.measured_step_ns)

    def where(self, i: int) -> str:
        """'rank R node ID "name"' for error messages (as `RankGraph.where`)."""
        return f"rank {self.rank} node {int(self.ids[i])} {self.names[int(self.name_idx[i])]!r}"


def empty_table(names: list[str]) -> TaskTable:
    """A task table of no rows (a run that kept no timelines)."""
    i64, i32 = np.zeros(0, np.int64), np.zeros(0, np.int32)
    kind, flag = np.zeros(0, np.int8), np.zeros(0, bool)
    return TaskTable(i64, i64, i64, i64, i32, kind, flag, i32, i64, names)


def assemble(
    metas: Sequence[RankMeta],
    sim_metas: Sequence[RankMeta],
    processors: Sequence[list[ProcessorInfo]],
    tails: Sequence[StepTail | None],
    plan: Plan,
    schedule: Schedule,
    folding: Folding,
    mode: str,
    free: dict[int, dict[int, int]],
    graphs: Sequence[RankGraph] | None,
) -> SimResult:
    """The result of a run; `graphs`: the loaded graphs, in the order of `metas`, kept
    with the timelines (None: keep no per-node times, breakdowns computed here)."""
    start, end, wait = schedule.start, schedule.end, schedule.wait
    own: dict[int, RankResult] = {}
    for k, (m, procs) in enumerate(zip(sim_metas, processors, strict=True)):
        lo, hi = plan.offsets[k], plan.offsets[k + 1]
        proc = np.subtract(plan.proc[lo:hi], plan.proc_offsets[k], dtype=np.int32)
        tasks = TaskTable(
            node_id=m.ids,
            start_ns=start[lo:hi],
            end_ns=end[lo:hi],
            wait_ns=wait[lo:hi],
            proc=proc,
            type=m.type,
            is_comm=(m.type == SEND) | (m.type == RECV) | (m.type == COLL),
            name_idx=m.name_idx,
            match=plan.match[lo:hi],
            names=m.names,
        )
        t0 = plan.slot_start[k]
        ends = rank_end(end[lo:hi], proc, tails[k])
        rank = RankResult(
            m.rank,
            ends.cpu_ns - t0 if hi > lo else 0,
            procs,
            tasks,
            m.measured_step_ns,
            start_ns=t0,
            gpu_inclusive_ns=ends.all_ns - t0 if hi > lo else 0,
            gpu_free_ns=free.get(k, {}),
        )
        if graphs is None:
            rank.breakdown = rank_breakdown(rank)
            rank.tasks = empty_table(m.names)
        own[m.rank] = rank
    ranks, out_graphs = [], []
    by_rank = {m.rank: m for m in metas}
    graph_of = {m.rank: g for m, g in zip(metas, graphs or [], strict=False)}
    for r in sorted(folding.rep):
        rep = folding.rep[r]
        base = own[rep]
        if rep == r:
            ranks.append(base)
        else:
            ranks.append(
                RankResult(
                    r,
                    base.iteration_time_ns,
                    base.processors,
                    base.tasks,
                    by_rank[r].measured_step_ns,
                    folded_from=rep,
                    start_ns=base.start_ns,
                    gpu_inclusive_ns=base.gpu_inclusive_ns,
                    gpu_free_ns=base.gpu_free_ns,
                    breakdown=None if base.breakdown is None else replace(base.breakdown, rank=r),
                )
            )
        if graphs is not None:
            out_graphs.append(graph_of[rep])
    total = max((r.iteration_time_ns for r in ranks), default=0)
    return SimResult(ranks, total, mode, out_graphs, timelines=graphs is not None)
