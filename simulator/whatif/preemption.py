"""Preempted ops: recorded time that was the operating system's, not the op's.

When a host has more runnable threads than cores (ranks sharing a machine's cores with
their communication threads, as in CPU/gloo captures), the scheduler now and then takes
the core from a thread for a whole time slice (milliseconds); the op that was running
records the slice as its own time. On the what-if grid's 2-core captures a 2-rank DDP
step carries one to three such slices of 1.5-5 ms, in ops that otherwise take tens of
microseconds (docs/whatif.md); an edit that copies a layer copies the slice with it, a
pipeline cut re-runs it in every micro-batch.

An op instance is taken as preempted when it ran longer than the typical instance of the
same op (same name, input shapes and segment of the call, over every rank of the step:
the lower median) by
more than `SLICE_MIN_NS` and by more than `SLICE_RATIO` times; its duration becomes the
typical one. A slice can also fall between two ops, in the untraced gap before the
second: a gap that long over the typical gap before the same op is trimmed to it the same
way (gaps that waited for another thread are dependencies by then: `waits`). So can a
collective run on CPU threads (gloo): its worker thread needs a core for every step of
the transfer. Such a collective is trimmed to its transfer on the group's fitted line
(`netfit`, the lower envelope) plus the group's typical excess over it (the lower median
over the step's collectives on CPU threads) when it took 1 ms and 3x more. Ops that
wait by design (collectives, send/recv, synchronisation; on a trace
with GPU work also device copies and the host calls that read a device value) and ops
that depend on another processor (a wait the trace linked) are left as traced, as are
ops seen once.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass

from lumos.converters.chakra import conventions as cv
from lumos.proto import pb
from lumos.simulator.whatif import nodes as nd
from lumos.simulator.whatif.etset import EtSet, RankEt, process_groups
from lumos.simulator.whatif.groups import Members, members_of
from lumos.simulator.whatif.netfit import fit_network

#: smallest excess counted as a lost time slice (ns): Linux gives a preempted thread back
#: its core after the other runnable threads' slices, 3-4 ms at HZ=250 (observed: stalls
#: of 1.5-5 ms on the grid's captures); 1 ms is well above an op's own run-to-run spread
SLICE_MIN_NS = 1_000_000
#: ... and the instance must also take this many times the typical instance
SLICE_RATIO = 3.0
_WAITS = re.compile(r"wait|synchron|barrier|recv|send|broadcast|nccl:|gloo:|^ProfilerStep", re.I)
#: ... and on a trace with GPU work, the host calls that wait for the device
_DEVICE_WAITS = re.compile(
    r"memcpy|memset|^cuda|^hip|item$|_local_scalar_dense|copy|^aten::to$", re.I
)


@dataclass(frozen=True, slots=True)
class PreemptionStats:
    """Op instances trimmed back to their typical time, the time taken out (ns), and the
    untraced gaps before an op trimmed back to the typical gap before it."""

    ops: int = 0
    removed_ns: int = 0
    gaps: int = 0
    collectives: int = 0


def _candidate(n: pb.Node, procs: dict[int, nd.Proc], gpu: bool) -> bool:
    if n.type != pb.COMP_NODE or not nd.is_cpu(n) or _WAITS.search(n.name):
        return False
    if gpu and _DEVICE_WAITS.search(n.name):
        return False
    proc = nd.processor(n)
    return proc[0] == "tid" and all(procs.get(d, proc) == proc for d in n.data_deps)


Signature = tuple[str, str, int, int]


def _signatures(r: RankEt) -> list[Signature]:
    """Per node: the op's name and input shapes, and which of its op's segments it is.

    A host op split around its children keeps its `rf_id` on every segment, and its
    inputs on one of them: the shapes of the call are looked up there.
    """
    calls: dict[tuple[nd.Proc, int, str], list[int]] = defaultdict(list)
    for i, n in enumerate(r.nodes):
        rf = nd.int_attr(n, "rf_id")
        if rf >= 0:
            calls[(nd.processor(n), rf, n.name)].append(i)
    out: list[Signature] = [(n.name, n.inputs.shapes, 0, 1) for n in r.nodes]
    for at in calls.values():
        shapes = next((r.nodes[i].inputs.shapes for i in at if r.nodes[i].inputs.shapes), "")
        for k, i in enumerate(at):
            out[i] = (r.nodes[i].name, shapes, k, len(at))
    return out


def _lower_median(values: list[int]) -> int:
    values = sorted(values)
    return values[(len(values) - 1) // 2]


def _lost(value: int, usual: int | None) -> bool:
    return usual is not None and value > usual + SLICE_MIN_NS and value > SLICE_RATIO * usual


def trim_preemptions(ets: EtSet) -> tuple[EtSet, PreemptionStats]:
    """Every rank with its preempted op instances trimmed (see module doc)."""
    procs = [{n.id: nd.processor(n) for n in r.nodes} for r in ets.ranks]
    gpu = any(nd.on_gpu(n) for r in ets.ranks for n in r.nodes)
    sigs = [_signatures(r) for r in ets.ranks]
    durs: dict[Signature, list[int]] = defaultdict(list)
    gaps: dict[Signature, list[int]] = defaultdict(list)
    for r, p, sig in zip(ets.ranks, procs, sigs, strict=True):
        for n, key in zip(r.nodes, sig, strict=True):
            if _candidate(n, p, gpu):
                durs[key].append(nd.duration(n))
                gaps[key].append(max(0, nd.int_attr(n, cv.GAP_NS, 0)))
    typical = {k: _lower_median(v) for k, v in durs.items() if len(v) >= 2}
    typical_gap = {k: _lower_median(v) for k, v in gaps.items() if len(v) >= 2}
    ops = lost_gaps = removed = 0
    ranks = []
    for r, p, sig in zip(ets.ranks, procs, sigs, strict=True):
        out = []
        for n, key in zip(r.nodes, sig, strict=True):
            if not _candidate(n, p, gpu):
                out.append(n)
                continue
            dur, gap = nd.duration(n), max(0, nd.int_attr(n, cv.GAP_NS, 0))
            usual, usual_gap = typical.get(key), typical_gap.get(key)
            if _lost(dur, usual) or _lost(gap, usual_gap):
                n = nd.clone(n)
            if _lost(dur, usual):
                assert usual is not None
                nd.set_duration(n, usual)
                ops += 1
                removed += dur - usual
            if _lost(gap, usual_gap):
                assert usual_gap is not None
                nd.put(n, cv.GAP_NS, usual_gap, "int64_val")
                lost_gaps += 1
                removed += gap - usual_gap
            out.append(n)
        ranks.append(RankEt(r.rank, r.metadata, tuple(out)))
    trimmed, colls, removed_comm = _trim_cpu_collectives(EtSet(tuple(ranks), ets.source))
    return trimmed, PreemptionStats(ops, removed + removed_comm, lost_gaps, colls)


def _trim_cpu_collectives(ets: EtSet) -> tuple[EtSet, int, int]:
    """Collectives on CPU threads trimmed to transfer + typical excess (see module doc)."""
    fit, groups = fit_network(ets), process_groups(ets)

    def transfer(n: pb.Node) -> tuple[Members, float]:
        m = members_of(n, groups, ets.world_size)
        size = nd.int_attr(n, "comm_size", 0)
        return m, fit.for_group(m).time_ns(nd.int_attr(n, "comm_type", 0), size, len(m))

    excess: dict[Members, list[int]] = defaultdict(list)
    for r in ets.ranks:
        for n in r.nodes:
            if _cpu_collective(n):
                m, t = transfer(n)
                excess[m].append(round(nd.comm_duration(n) - t))
    typical = {m: max(0, _lower_median(v)) for m, v in excess.items() if len(v) >= 2}
    count = removed = 0
    ranks = []
    for r in ets.ranks:
        out = []
        for n in r.nodes:
            if _cpu_collective(n):
                m, t = transfer(n)
                usual = round(t) + typical[m] if m in typical else None
                dur = nd.comm_duration(n)
                if _lost(dur, usual):
                    assert usual is not None
                    n = nd.clone(n)
                    nd.set_duration(n, usual)
                    count += 1
                    removed += dur - usual
            out.append(n)
        ranks.append(RankEt(r.rank, r.metadata, tuple(out)))
    return EtSet(tuple(ranks), ets.source), count, removed


def _cpu_collective(n: pb.Node) -> bool:
    return n.type == pb.COMM_COLL_NODE and nd.processor(n)[0] == "tid"
