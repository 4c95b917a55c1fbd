"""CPU time the GPU waited for, measured on a rank's recorded timeline (see docs/export.md).

A delay node is a GPU compute node placed before the kept node that waited: it stands
for the time between that node's dependencies and its recorded start in which no kept
node of the rank ran (the CPU was launching, loading data, running Python). ASTRA-sim
has one compute slot per rank, so the delays of several streams queue on it: each idle
moment goes to one delay only, the kept node that started first after it. Per rank the
delays thus never exceed the measured step minus the recorded GPU busy time.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence

from lumos.converters.astra_sim.graph import RankGraph
from lumos.converters.astra_sim.nodes import duration_ns, start_ns
from lumos.converters.chakra.attrs import get_attr
from lumos.converters.chakra.conventions import START_NS


class Covered:
    """Disjoint sorted intervals [begin, end) with the measure of a range they leave free."""

    def __init__(self, intervals: Iterable[tuple[int, int]]) -> None:
        merged = merged_intervals(intervals)
        self.begins = [b for b, _ in merged]
        self.ends = [e for _, e in merged]

    def free_then_cover(self, lo: int, hi: int) -> int:
        """ns of [lo, hi) not yet covered; [lo, hi) is covered afterwards."""
        if hi <= lo:
            return 0
        # intervals that touch [lo, hi): from the last one beginning at or before lo
        first = bisect.bisect_right(self.begins, lo) - 1
        if first < 0 or self.ends[first] < lo:
            first += 1
        last = bisect.bisect_right(self.begins, hi)
        covered = sum(
            max(0, min(e, hi) - max(b, lo))
            for b, e in zip(self.begins[first:last], self.ends[first:last], strict=True)
        )
        free = hi - lo - covered
        if first < last:
            lo = min(lo, self.begins[first])
            hi = max(hi, self.ends[last - 1])
        self.begins[first:last] = [lo]
        self.ends[first:last] = [hi]
        return free


def idle_gaps(
    graph: RankGraph,
    kept_order: Sequence[int],
    folded: dict[int, list[int]],
    chain: dict[int, int],
) -> dict[int, int]:
    """{kept position: ns of CPU time the rank's GPU waited for before it}.

    Only for ETs that record `start_ns` (relative to the step start).
    """
    timed = [p for p in kept_order if get_attr(graph.nodes[p], START_NS) is not None]
    if not timed:
        return {}
    span = {p: (start_ns(graph.nodes[p]) or 0, duration_ns(graph.nodes[p])) for p in timed}
    covered = Covered((s, s + d) for s, d in span.values())
    gaps: dict[int, int] = {}
    for pos in sorted(timed, key=lambda p: span[p][0]):
        deps = [*folded[pos], *([chain[pos]] if pos in chain else [])]
        if any(d not in span for d in deps):
            continue
        ready = max((span[d][0] + span[d][1] for d in deps), default=0)
        gap = covered.free_then_cover(ready, span[pos][0])
        if gap:
            gaps[pos] = gap
    return gaps


def tail_gap(graph: RankGraph, kept_order: Sequence[int]) -> int:
    """ns the rank kept working on the CPU after its last kept node ended (e.g. optimizer)."""
    ends = [
        (start_ns(n) or 0) + duration_ns(n)
        for n in graph.nodes
        if get_attr(n, START_NS) is not None
    ]
    kept_ends = [
        (start_ns(graph.nodes[p]) or 0) + duration_ns(graph.nodes[p])
        for p in kept_order
        if get_attr(graph.nodes[p], START_NS) is not None
    ]
    if not ends or not kept_ends:
        return 0
    return max(0, max(ends) - max(kept_ends))


def merged_intervals(intervals: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """The union of [begin, end) intervals as disjoint sorted ones."""
    out: list[tuple[int, int]] = []
    for begin, end in sorted(intervals):
        if out and begin <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((begin, end))
    return out
