"""Waits in a traced step: a gap the trace explains by another processor's task is a
dependency, not time of its own.

The converter records before each op on a thread the untraced time since the thread's
previous op (`gap_ns`), and gives the op a data dependency on the task of another
thread that ended last in the gap's second half: the thread was waiting for it (DDP's
finalisation waiting for a gloo all-reduce, a gloo worker waiting for the bucket the
main thread made ready). Replay keeps both, which reproduces the trace; but after an
edit that shortens or removes the awaited task (one replica instead of two, a pipeline
without DDP, a smaller all-reduce) the gap would still hold the old wait, and a rank
that waited for a late peer keeps that wait in every prediction.

`anchor_waits` keeps, of such a gap, only the part after the awaited task's recorded end
(the wake-up), so the op resumes when its dependency ends in the edited step. A gap right
after a send/recv or collective on the same thread is that communication's wait (gloo's
blocking `wait()` after the call returned), which the simulator already gives it by
pairing it with its peers: the gap goes to 0. It also
finds the waits the converter missed because the awaited task's own event closed after
the waiter resumed: a gloo worker completes the work, wakes the waiting thread, and
closes its `gloo:all_reduce` annotation tens to hundreds of microseconds later. A
collective on another thread of the rank, started before the op, whose recorded end lies
after the midpoint of a gap of at least `WAIT_MIN_GAP_NS`
and at most `WAKE_SLACK_NS` after the op started becomes the op's dependency, and the gap
goes to 0. Only traced steps (nodes with their recorded `start_ns`) are anchored.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass

from lumos.converters.chakra import conventions as cv
from lumos.proto import pb
from lumos.simulator.whatif import nodes as nd
from lumos.simulator.whatif.etset import EtSet, RankEt

#: how long after a waiter resumed the awaited collective's event may still close (ns):
#: gloo closes `gloo:all_reduce` 50-260 us after waking the waiter on the what-if grid's
#: 2-core captures (docs/whatif.md), so 0.5 ms leaves room for a slower host
WAKE_SLACK_NS = 500_000
#: shortest gap searched for a missed wait (ns): the converter's own threshold for taking
#: an idle thread to have waited (`converters.pytorch.exec_graph.WAIT_MIN_GAP_NS`)
WAIT_MIN_GAP_NS = 10_000


@dataclass(frozen=True, slots=True)
class WaitStats:
    """What `anchor_waits` changed: gaps re-anchored on a recorded dependency, waits
    found on a collective the converter had not linked, and the gap time taken out (ns)."""

    anchored: int = 0
    found: int = 0
    removed_ns: int = 0

    def __add__(self, other: WaitStats) -> WaitStats:
        return WaitStats(
            self.anchored + other.anchored,
            self.found + other.found,
            self.removed_ns + other.removed_ns,
        )


def _end(n: pb.Node) -> int:
    return nd.int_attr(n, cv.START_NS) + nd.duration(n)


class _Collectives:
    """Recorded ends of one rank's collectives on CPU threads, sorted, per thread."""

    def __init__(self, nodes: tuple[pb.Node, ...]) -> None:
        colls = [
            (_end(n), n.id, nd.processor(n), nd.int_attr(n, cv.START_NS))
            for n in nodes
            if n.type == pb.COMM_COLL_NODE
            and nd.processor(n)[0] == "tid"
            and nd.int_attr(n, cv.START_NS) >= 0
        ]
        colls.sort()
        self.ends = [c[0] for c in colls]
        self.items = colls

    def latest(self, proc: nd.Proc, lo: int, hi: int, before: int) -> int | None:
        """Id of the collective on another thread than `proc`, started before `before`,
        ending last in (lo, hi]."""
        k = bisect_right(self.ends, hi) - 1
        while k >= 0 and self.ends[k] > lo:
            _, node_id, where, start = self.items[k]
            if where != proc and start < before:
                return node_id
            k -= 1
        return None


def anchor_rank(r: RankEt) -> tuple[RankEt, WaitStats]:
    """One rank with its waits anchored on their dependencies (see module doc)."""
    by_id = {n.id: n for n in r.nodes}
    colls = _Collectives(r.nodes)
    stats = WaitStats()
    out: list[pb.Node] = []
    last: dict[nd.Proc, pb.Node] = {}
    for n in r.nodes:
        gap = nd.int_attr(n, cv.GAP_NS, 0)
        start = nd.int_attr(n, cv.START_NS)
        proc = nd.processor(n)
        before = last.get(proc)
        last[proc] = n
        if gap <= 0 or start < 0 or proc[0] != "tid" or nd.on_gpu(n):
            out.append(n)
            continue
        if before is not None and nd.is_comm(before):
            c = nd.clone(n)
            nd.put(c, cv.GAP_NS, 0, "int64_val")
            out.append(c)
            stats += WaitStats(1, 0, gap)
            continue
        resumed = start - gap
        ends = [
            _end(d)
            for d in (by_id.get(i) for i in n.data_deps)
            if d is not None and nd.processor(d) != proc and nd.int_attr(d, cv.START_NS) >= 0
        ]
        awaited = max((e for e in ends if e > resumed), default=None)
        if awaited is not None:
            new_gap = max(0, start - awaited)
            if new_gap < gap:
                c = nd.clone(n)
                nd.put(c, cv.GAP_NS, new_gap, "int64_val")
                n = c
                stats += WaitStats(1, 0, gap - new_gap)
        elif not ends and gap >= WAIT_MIN_GAP_NS:
            found = colls.latest(proc, resumed + gap // 2, start + WAKE_SLACK_NS, start)
            if found is not None:
                c = nd.clone(n)
                c.data_deps.append(found)
                nd.put(c, cv.GAP_NS, 0, "int64_val")
                n = c
                stats += WaitStats(0, 1, gap)
        out.append(n)
    return RankEt(r.rank, r.metadata, tuple(out)), stats


def anchor_waits(ets: EtSet) -> tuple[EtSet, WaitStats]:
    """Every rank's waits anchored on their dependencies, and what changed."""
    ranks, total = [], WaitStats()
    for r in ets.ranks:
        anchored, stats = anchor_rank(r)
        ranks.append(anchored)
        total += stats
    return EtSet(tuple(ranks), ets.source), total
