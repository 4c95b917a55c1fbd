"""Structure recovery: the phases, layers and micro-batches of every rank's step.

Per rank, every node gets a phase (`fwd`, `bwd`, `optim`, `other`), a transformer layer
(-1: outside the layer stack) and a micro-batch (-1: unknown), which `tag` writes into
the ETs as the reserved attributes `phase`, `layer` and `microbatch` so each edit works
on whole layers. How they are found:

* phases, on the CPU threads, by time: backward starts with the first autograd-engine or
  `*Backward*` op, the optimizer with the first `Optimizer.*` op after it. GPU and
  communication nodes take the phase of the CPU op they depend on (their launch);
* layers, per phase, from module annotations when the trace has them (`nn.Module:
  ..._<k>`, `layers.<k>`), else from the repeating pattern of op names and input shapes
  on the busiest CPU thread of that phase (`repeat.find_repeat`); backward runs the
  layers in reverse. Communication calls are left out of the pattern (DDP buckets do
  not fall on layer boundaries), and so are gradient accumulations (autograd runs each
  parameter's `AccumulateGrad` when it is ready, not at a fixed place in its layer);
  they take the layer of the op before them;
* micro-batches, from the pipeline's send/recv calls on that thread.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

from lumos.converters.chakra import conventions as cv
from lumos.proto import pb
from lumos.simulator.whatif import nodes as nd
from lumos.simulator.whatif.etset import EtSet, RankEt
from lumos.simulator.whatif.repeat import Repeat, find_repeat

PHASES = ("fwd", "bwd", "optim")
_BWD = re.compile(r"^autograd::engine::evaluate_function|Backward\d*$|Backward\d*\b")
_OPT = re.compile(r"^Optimizer\.|^optimizer", re.IGNORECASE)
_COMMISH = re.compile(
    r"c10d|nccl|gloo|reducer::|record_param_comms|all_reduce|allreduce|reduce_scatter"
    r"|all_gather|::wait|^wait|accumulategrad"
)
_MODULE = re.compile(r"(?:nn\.Module: \w*?_|layers?\.|blocks?\.|h\.)(\d+)$")


@dataclass(slots=True)
class RankStructure:
    """What was recognised on one rank (lists are per node position in `RankEt.nodes`)."""

    rank: int
    phase: list[str]
    layer: list[int]
    microbatch: list[int]
    layers: int = 0
    repeats: dict[str, Repeat] = field(default_factory=dict)
    layer_source: str = "none"
    notes: list[str] = field(default_factory=list)


def _cpu_threads(r: RankEt) -> list[int]:
    return [i for i, n in enumerate(r.nodes) if nd.processor(n)[0] in ("tid", "cpu")]


def _start(n: object) -> int:
    return nd.int_attr(n, cv.START_NS, 0)  # type: ignore[arg-type]


def _phases(r: RankEt) -> list[str]:
    cpu = _cpu_threads(r)
    starts = [_start(r.nodes[i]) for i in cpu]
    names = [r.nodes[i].name for i in cpu]
    bwd = [s for s, nm in zip(starts, names, strict=True) if _BWD.search(nm)]
    t_bwd = min(bwd) if bwd else None
    opt = [
        s
        for s, nm in zip(starts, names, strict=True)
        if _OPT.search(nm) and (t_bwd is None or s >= t_bwd)
    ]
    t_opt = min(opt) if opt else None
    phase = ["other"] * len(r.nodes)

    def by_time(s: int) -> str:
        if t_opt is not None and s >= t_opt:
            return "optim"
        if t_bwd is not None and s >= t_bwd:
            return "bwd"
        return "fwd"

    for i, s in zip(cpu, starts, strict=True):
        phase[i] = by_time(s)
    index = {n.id: i for i, n in enumerate(r.nodes)}
    for i, n in enumerate(r.nodes):
        if nd.processor(n)[0] in ("tid", "cpu"):
            continue
        launch = [index[d] for d in nd.deps(n) if d in index and phase[index[d]] != "other"]
        phase[i] = phase[launch[0]] if launch else by_time(_start(n))
    return phase


def _op_shapes(r: RankEt) -> dict[tuple[int, str], str]:
    """Input shapes of each op, keyed by (rf_id, name): a converter that splits an op into
    segments around its children puts the inputs on one segment only."""
    shapes: dict[tuple[int, str], str] = {}
    for n in r.nodes:
        if n.inputs.shapes:
            shapes.setdefault((nd.int_attr(n, "rf_id"), n.name), n.inputs.shapes)
    return shapes


def _signature(
    n: pb.Node, shapes: dict[tuple[int, str], str], table: dict[str, int]
) -> tuple[int, int]:
    """(name id, name+shapes id or -1 when the op's shapes are unknown)."""
    rf = nd.int_attr(n, "rf_id")
    shape = shapes.get((rf, n.name), "") if rf >= 0 else n.inputs.shapes
    name_id = table.setdefault(n.name, len(table))
    return name_id, table.setdefault(f"{n.name}|{shape}", len(table)) if shape else -1


def _busiest_thread(r: RankEt, idx: list[int]) -> list[int]:
    counts = Counter(nd.processor(r.nodes[i]) for i in idx)
    if not counts:
        return []
    proc = counts.most_common(1)[0][0]
    return [i for i in idx if nd.processor(r.nodes[i]) == proc]


def _annotated_layers(r: RankEt, s: RankStructure) -> bool:
    spans = []
    for n in r.nodes:
        m = _MODULE.search(n.name)
        if m and nd.attr(n, cv.CATEGORY) == "user_annotation":
            start = _start(n)
            spans.append((start, start + nd.duration(n), nd.processor(n), int(m.group(1))))
    if not spans:
        return False
    for i, n in enumerate(r.nodes):
        t, proc = _start(n), nd.processor(n)
        for lo, hi, p, k in spans:
            if p == proc and lo <= t < hi:
                s.layer[i] = k
    s.layers = 1 + max(k for *_, k in spans)
    s.layer_source = "module annotations"
    return True


def _without_comm_calls(r: RankEt, seq: list[int]) -> list[int]:
    """`seq` without communication calls and everything inside them (DDP's bucket work
    runs inside `reducer::*` calls, between the segments of the call)."""
    spans: dict[tuple[int, str], list[int]] = {}
    for pos, i in enumerate(seq):
        n = r.nodes[i]
        if _COMMISH.search(n.name.lower()) or nd.is_comm(n):
            spans.setdefault(
                (nd.int_attr(n, "rf_id"), n.name)
                if nd.int_attr(n, "rf_id") >= 0
                else (-pos - 2, ""),
                [],
            ).append(pos)
    drop = [False] * len(seq)
    for positions in spans.values():
        for pos in range(positions[0], positions[-1] + 1):
            drop[pos] = True
    return [i for i, d in zip(seq, drop, strict=True) if not d]


def _pattern_layers(r: RankEt, s: RankStructure) -> None:
    table: dict[str, int] = {}
    shapes = _op_shapes(r)
    counts: dict[str, int] = {}
    for phase in PHASES:
        seq = _busiest_thread(r, [i for i, p in enumerate(s.phase) if p == phase])
        kept = _without_comm_calls(r, seq)
        sigs = [_signature(r.nodes[i], shapes, table) for i in kept]
        rep = find_repeat([a for a, _ in sigs], [b for _, b in sigs])
        if rep is None:
            continue
        s.repeats[phase] = rep
        counts[phase] = rep.count
        for k in range(rep.count):
            layer = rep.count - 1 - k if phase == "bwd" else k
            for pos in rep.block(k):
                s.layer[kept[pos]] = layer
        # calls left out of the pattern (and those between copies) join the op before them
        first, last = kept[rep.start], kept[rep.end - 1]
        current = -1
        for i in seq:
            if first <= i <= last:
                current = s.layer[i] if s.layer[i] >= 0 else current
                s.layer[i] = current
    fwd = counts.get("fwd", 0)
    s.layers = fwd
    s.layer_source = "repeating op pattern" if fwd else "none"
    for phase, c in counts.items():
        if c != fwd:
            s.notes.append(f"{phase}: {c} repeats, not the {fwd} layers of fwd; left untagged")
            s.layer[:] = [-1 if p == phase else v for p, v in zip(s.phase, s.layer, strict=True)]
            del s.repeats[phase]


def _inherit(r: RankEt, s: RankStructure) -> None:
    """GPU and communication nodes take the layer/micro-batch of the CPU op they follow."""
    index = {n.id: i for i, n in enumerate(r.nodes)}
    for i, n in enumerate(r.nodes):
        if nd.processor(n)[0] in ("tid", "cpu") and not nd.is_comm(n):
            continue
        for d in nd.deps(n):
            j = index.get(d)
            if j is not None and nd.processor(r.nodes[j]) != nd.processor(n):
                s.layer[i], s.microbatch[i] = s.layer[j], s.microbatch[j]
                break


def _microbatches(r: RankEt, s: RankStructure) -> None:
    for phase in ("fwd", "bwd"):
        seq = _busiest_thread(r, [i for i, p in enumerate(s.phase) if p == phase])
        if not any(r.nodes[i].type in (pb.COMM_SEND_NODE, pb.COMM_RECV_NODE) for i in seq):
            continue
        mb, seen = 0, False
        for i in seq:
            t = r.nodes[i].type
            if t == pb.COMM_RECV_NODE and seen:
                mb, seen = mb + 1, False
            s.microbatch[i] = mb
            if t == pb.COMM_SEND_NODE:
                mb, seen = mb + 1, False
            elif t != pb.COMM_RECV_NODE:
                seen = True


def recover_rank(r: RankEt) -> RankStructure:
    """Phases, layers and micro-batches of one rank's step."""
    n = len(r.nodes)
    s = RankStructure(r.rank, _phases(r), [-1] * n, [-1] * n)
    if not _annotated_layers(r, s):
        _pattern_layers(r, s)
    _microbatches(r, s)
    _inherit(r, s)
    if not s.layers:
        s.notes.append("no repeated layer found (one layer, or no layer structure)")
    return s


def _harmonize(ets: EtSet, by_rank: dict[int, RankStructure]) -> None:
    """Give the k-th collective of a process group (by `comm_seq`, the order collectives
    match in, where every one has it; else node order) the tags it has on the group's
    lowest rank on every member, so every rank's edit keeps or copies the same ones."""
    ref: dict[tuple[str, int], tuple[str, int, int]] = {}
    for r in ets.ranks:
        s, seen = by_rank[r.rank], Counter[str]()
        colls = [i for i, n in enumerate(r.nodes) if n.type == pb.COMM_COLL_NODE]
        if all(nd.attr(r.nodes[i], cv.COMM_SEQ) is not None for i in colls):
            colls.sort(key=lambda i: nd.int_attr(r.nodes[i], cv.COMM_SEQ))  # how they match
        for i in colls:
            n = r.nodes[i]
            key = str(nd.attr(n, "pg_name", "")) + str(nd.attr(n, cv.PG_RANKS, ""))
            k = (key, seen[key])
            seen[key] += 1
            if k in ref:
                s.phase[i], s.layer[i], s.microbatch[i] = ref[k]
            else:
                ref[k] = (s.phase[i], s.layer[i], s.microbatch[i])


def tag(ets: EtSet, structures: list[RankStructure]) -> EtSet:
    """A copy of `ets` whose nodes carry `phase`, `layer` and `microbatch`."""
    by_rank = {s.rank: s for s in structures}
    _harmonize(ets, by_rank)
    ranks = []
    for r in ets.ranks:
        s = by_rank[r.rank]
        new = []
        for i, n in enumerate(r.nodes):
            c = nd.clone(n)
            nd.set_tags(c, s.phase[i], s.layer[i], s.microbatch[i])
            new.append(c)
        ranks.append(RankEt(r.rank, r.metadata, tuple(new)))
    return EtSet(tuple(ranks), ets.source)
