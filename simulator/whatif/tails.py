"""The untraced tail of an edited step: kept from the traced step, not re-read from copies.

The simulator ends a rank's step on its step thread (the CPU thread whose last recorded
node ends latest) plus the step's untraced tail: `measured_step_ns` minus that node's
recorded end (`simulator.step_end`). Edited nodes keep their source's recorded times, so
in an edited rank the latest recorded end can belong to another node than in the trace
(a pipeline's first stage keeps only its own layers' optimizer updates, which ran early
in the traced optimizer), and the difference would be read as a tail of milliseconds.
`keep_tails` sets each edited rank's `measured_step_ns` so that its tail is the traced
one: the same rank's when the trace has it, else the median over the traced ranks.
"""

from __future__ import annotations

import statistics

from lumos.converters.chakra import conventions as cv
from lumos.converters.chakra.attrs import get_attr
from lumos.proto import pb
from lumos.simulator.whatif import nodes as nd
from lumos.simulator.whatif.etset import EtSet, RankEt

_TIMES = (cv.STREAM, cv.TID, cv.START_NS, cv.DUR_NS)


def last_recorded_end(r: RankEt) -> int | None:
    """The latest recorded end of a node on a CPU thread (None without recorded times)."""
    best: int | None = None
    for n in r.nodes:
        stream, tid, start, dur = nd.int_attrs(n, _TIMES)
        if stream >= 0 or tid < 0 or start < 0:
            continue
        end = start + (dur if dur >= 0 else int(n.duration_micros) * 1000)
        best = end if best is None or end > best else best
    return best


def tail_ns(r: RankEt) -> int | None:
    """The rank's untraced step tail (None when its step was not measured)."""
    measured = int(get_attr(r.metadata, cv.META_STEP_NS, 0) or 0)
    end = last_recorded_end(r)
    return measured - end if measured and end is not None else None


def keep_tails(traced: EtSet, edited: EtSet) -> EtSet:
    """`edited` with every rank's step tail equal to the traced one (see module doc)."""
    tails = {r.rank: t for r in traced.ranks if (t := tail_ns(r)) is not None}
    if not tails:
        return edited
    typical = round(statistics.median(tails.values()))
    ranks = []
    for r in edited.ranks:
        end = last_recorded_end(r)
        if end is None or not get_attr(r.metadata, cv.META_STEP_NS, 0):
            ranks.append(r)
            continue
        meta = pb.GlobalMetadata()
        meta.CopyFrom(r.metadata)
        nd.put(meta, cv.META_STEP_NS, end + tails.get(r.rank, typical), "int64_val")  # type: ignore[arg-type]
        ranks.append(RankEt(r.rank, meta, r.nodes))
    return EtSet(tuple(ranks), edited.source)
