"""Edit: DDP's gradient buckets re-formed for the gradients as they are after an edit.

An edit that resizes parameters (hidden, FFN, tensor parallel) or the stack (layers)
changes which gradients share a bucket: DDP closes a bucket when its bytes reach the cap
(`buckets`), so at hidden 256 the attention projection's gradient, under a 100 KB cap at
hidden 128, is over it and gets its own all-reduce. `rebucket` reads the traced buckets
and the cap range that explains them (`buckets.infer_cap`, on the traced step), applies
DDP's rule to the edited gradients' sizes in ready order, and rebuilds each rank's
all-reduces:

* a bucket that still ends at the same gradient keeps its issuing call and collective,
  with the new size;
* a new bucket end gets a copy of the issuing call (`c10d::allreduce_`) and of the
  collective of the traced bucket that gradient was in, right after the gradient's bucket
  copy (a bucket is issued when its last gradient is ready); the collectives take the
  traced worker threads (streams) in turn, as gloo's pool does;
* a traced bucket end that is no longer one loses its call and collective; what waited on
  that collective waits on the new bucket holding its last gradient, and DDP's
  finalisation copies each bucket's gradients back after that bucket's collective;
* every resized collective keeps its measured time less its transfer on the trace's
  fitted line plus the transfer of its new size (`netfit.LinkFit.retime`).

When the buckets cannot be read or no cap explains them, the set is returned unchanged
with a note saying why (the edit's scaled all-reduces stand); a trace without DDP's
bucket copies is returned unchanged with no note.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, replace

from lumos.converters.chakra import conventions as cv
from lumos.proto import pb
from lumos.simulator.whatif import nodes as nd
from lumos.simulator.whatif.assemble import assemble, source_procs
from lumos.simulator.whatif.buckets import (
    CapRange,
    Layout,
    assign,
    choose_cap,
    infer_cap,
    recover_layout,
)
from lumos.simulator.whatif.etset import EtSet, RankEt, process_groups
from lumos.simulator.whatif.groups import Members, members_of, roles_by_members
from lumos.simulator.whatif.netfit import NetworkFit, fit_network

_COPY_OUT = "torch.distributed.ddp.reducer::copy_bucket_to_grad"


def _dp_colls(r: RankEt, is_dp: Callable[[pb.Node], bool]) -> list[int]:
    return [i for i, n in enumerate(r.nodes) if n.type == pb.COMM_COLL_NODE and is_dp(n)]


@dataclass(frozen=True, slots=True)
class Traced:
    """What the traced step says about DDP: the caps taken and their range, the bytes per
    element, and its collectives by the record-function id of the call that issued them."""

    first: int
    cap: int
    rng: CapRange
    elem: int
    by_call: dict[int, pb.Node]


def traced_cap(base: EtSet) -> Traced | str:
    """The traced step's buckets read off its first rank (`Traced`), or why not."""
    is_dp = _dp_test(base)
    r = base.ranks[0]
    layout = recover_layout(r, _dp_colls(r, is_dp))
    if isinstance(layout, str):
        return layout
    numel = layout.bucket_numels()[0]
    size = nd.int_attr(r.nodes[layout.colls[0]], "comm_size", 0)
    if numel <= 0 or size <= 0 or size % numel:
        return f"bucket 0 moves {size} B for {numel} elements"
    elem = size // numel
    sizes, lo = [], 0
    for e in layout.ends:
        sizes.append([g.numel * elem for g in layout.grads[lo : e + 1]])
        lo = e + 1
    rng = infer_cap(sizes)
    if isinstance(rng, str):
        return rng
    first, cap = choose_cap(rng)
    calls = {
        nd.int_attr(r.nodes[at[0]], "rf_id"): r.nodes[c]
        for at, c in zip(layout.issue, layout.colls, strict=True)
    }
    return Traced(first, cap, rng, elem, calls)


def _paired(r: RankEt, is_dp: Callable[[pb.Node], bool], traced: Traced) -> RankEt | str:
    """The rank with one data-parallel collective per bucket call. An edit can leave them
    unpaired: a layer copy takes the calls it issued, not the collectives the converter did
    not link to them (no dependency on the main thread: tagged outside the layers). Then
    every such collective is replaced by a copy of the traced collective of the call it
    was copied from (same record-function id), right after that call."""
    colls = _dp_colls(r, is_dp)
    lay = recover_layout(r, colls, check=False, pair=False)
    if isinstance(lay, str) or len(lay.issue) == len(colls):
        return r if not isinstance(lay, str) else lay
    nodes = [nd.clone(n) for n in r.nodes]
    next_id = max(n.id for n in nodes) + 1
    procs = list(dict.fromkeys(nd.processor(nodes[i]) for i in colls))
    templates = list(traced.by_call.values())
    insert: dict[int, list[pb.Node]] = {}
    new_ids: list[int] = []
    for k, at in enumerate(lay.issue):
        call = nodes[at[0]]
        c = nd.clone(traced.by_call.get(nd.int_attr(call, "rf_id"), templates[-1]))
        c.id, next_id = next_id, next_id + 1
        del c.data_deps[:], c.ctrl_deps[:]
        c.data_deps.append(call.id)
        nd.set_tags(c, *nd.tags(call))
        proc = procs[k % len(procs)] if procs else nd.processor(c)
        nd.put(c, cv.TID if proc[0] == "tid" else cv.STREAM, proc[1], "int64_val")
        insert[at[-1]] = [c]
        new_ids.append(c.id)
    # what waited on an unpaired collective waits on the bucket of the same rank in order
    remap = {nodes[i].id: new_ids[min(k, len(new_ids) - 1)] for k, i in enumerate(colls)}
    return RankEt(r.rank, r.metadata, _emit(r, nodes, set(colls), remap, insert))


def _dp_test(ets: EtSet) -> Callable[[pb.Node], bool]:
    dp = {m for m, role in roles_by_members(ets).items() if role == "dp"}
    groups, world = process_groups(ets), ets.world_size
    return lambda n: members_of(n, groups, world) in dp


#: a gradient's share of its traced elements on a rank (tensor parallelism shards some)
Share = Callable[[pb.Node], float]


def tp_share(hidden: int, ffn: int, traced: int, t: int) -> Share:
    """Megatron's sharding of a layer's parameters from degree `traced` to `t`, read off a
    gradient's bucket copy (shapes as traced, at degree `traced`): QKV and FC1 weights and
    biases (a 3H or FFN dimension) and FC2's weight by columns or rows, the attention
    projection's `[H, H]` weight by rows; layer norms, the row-parallel biases and what is
    outside the layers (embedding, head) whole."""

    def share(n: pb.Node) -> float:
        if nd.tags(n)[1] < 0:
            return 1.0
        try:
            dims = json.loads(n.inputs.shapes)[0]
        except (ValueError, IndexError, TypeError):
            return 1.0
        wide = any(d in (3 * hidden, ffn) for d in dims)
        return traced / t if wide or dims == [hidden, hidden] else 1.0

    return share


def rebucket(base: EtSet, ets: EtSet, share: Share | None = None) -> tuple[EtSet, str]:
    """`ets` (an edit of the tagged traced step `base`) with DDP's buckets re-formed for
    its gradients (`share`: the part of each one a rank holds), and a note of what was
    done (see module doc)."""
    got = traced_cap(base)
    if isinstance(got, str) and "no DDP gradient bucket copies" in got:
        return ets, ""  # not a DDP trace: nothing to say
    if isinstance(got, str):
        return ets, f"DDP buckets kept as traced (cap not inferred: {got})"
    first, cap, rng, elem = got.first, got.cap, got.rng, got.elem
    fit, is_dp = fit_network(base), _dp_test(ets)
    out: list[RankEt] = []
    counts: tuple[int, int] = (0, 0)
    for rank in ets.ranks:
        r = _paired(rank, is_dp, got)
        if isinstance(r, str):
            return ets, f"DDP buckets kept as traced ({r})"
        layout = recover_layout(r, _dp_colls(r, is_dp), check=False)
        if isinstance(layout, str):
            return ets, f"DDP buckets kept as traced ({layout})"
        if share is not None:
            layout = replace(
                layout,
                grads=tuple(
                    replace(g, numel=round(g.numel * share(r.nodes[g.at]))) for g in layout.grads
                ),
            )
        grads = [g.numel * elem for g in layout.grads]
        ends = assign(grads, first, cap)
        counts = (len(layout.ends), len(ends))
        out.append(_rebuild(r, layout, ends, elem, fit))
    note = (
        f"DDP buckets: {counts[0]} -> {counts[1]} all-reduces ({rng.describe()}; "
        f"cap taken {cap:,} B" + (f", first bucket {first:,} B" if first != cap else "") + ")"
    )
    if _depends_on_cap(grads, rng, first, cap):
        note += "; other caps in the range form other buckets"
    return ets.with_ranks(out), note


def _depends_on_cap(grads: list[int], rng: CapRange, first: int, cap: int) -> bool:
    """Whether the caps at the ends of the range form other buckets than the one taken."""
    chosen = assign(grads, first, cap)
    ends = [c for c in (rng.lo + 1, rng.hi) if c is not None]
    if rng.first_lo is None:
        return any(assign(grads, c, c) != chosen for c in ends)
    return any(assign(grads, first, c) != chosen for c in ends)


def _set_numel(n: pb.Node, numel: int) -> None:
    try:
        shapes = json.loads(n.inputs.shapes)
    except ValueError:
        return
    if isinstance(shapes, list) and shapes and isinstance(shapes[0], list):
        shapes[0] = [[numel]] if shapes[0] and isinstance(shapes[0][0], list) else [numel]
        n.inputs.shapes = json.dumps(shapes, separators=(",", ":"))


def _resize(c: pb.Node, new_size: int, fit: NetworkFit) -> None:
    size = nd.int_attr(c, "comm_size", 0)
    if size == new_size:
        return
    members = nd.attr(c, cv.PG_RANKS)
    group: Members = tuple(members) if isinstance(members, list) else ()
    width = len(group) if group else 2
    kind = nd.int_attr(c, "comm_type", 0)
    link = fit.for_group(group)
    nd.put(c, "comm_size", new_size, "int64_val")
    nd.set_duration(c, round(link.retime(nd.comm_duration(c), kind, size, width, width, new_size)))


def _rebuild(r: RankEt, lay: Layout, ends: list[int], elem: int, fit: NetworkFit) -> RankEt:
    """One rank with its buckets ending at `ends` (indices of gradients)."""
    nodes = [nd.clone(n) for n in r.nodes]
    numels = [g.numel for g in lay.grads]
    old_end = {e: k for k, e in enumerate(lay.ends)}
    procs = list(dict.fromkeys(nd.processor(nodes[c]) for c in lay.colls))
    next_id = max(n.id for n in nodes) + 1
    next_rf = max(nd.int_attr(n, "rf_id") for n in nodes) + 1
    insert: dict[int, list[pb.Node]] = {}
    drop: set[int] = set()
    placed: list[tuple[list[pb.Node], pb.Node]] = []
    lo = 0
    for e in ends:
        numel = sum(numels[lo : e + 1])
        if e in old_end:
            k = old_end[e]
            issue = [nodes[i] for i in lay.issue[k]]
            coll = nodes[lay.colls[k]]
        else:  # a copy of the traced bucket this gradient was in
            k = next(k for k, end in enumerate(lay.ends) if end >= e)
            issue = [nd.clone(nodes[i]) for i in lay.issue[k]]
            coll = nd.clone(nodes[lay.colls[k]])
            phase, layer, mb = nd.tags(nodes[lay.grads[e].end])
            for n in (*issue, coll):
                n.id, next_id = next_id, next_id + 1
                del n.data_deps[:], n.ctrl_deps[:]
                nd.set_tags(n, phase, layer, mb)
            for n in issue:
                nd.put(n, "rf_id", next_rf, "int64_val")
            next_rf += 1
            insert[lay.grads[e].end] = issue
        _set_numel(issue[0], numel)
        _resize(coll, numel * elem, fit)
        placed.append((issue, coll))
        lo = e + 1
    if not insert and list(ends) == list(lay.ends):
        return RankEt(r.rank, r.metadata, tuple(nodes))  # same buckets, sizes updated
    for k in range(len(lay.ends)):
        drop.add(lay.colls[k])  # every collective moves next to the call that issues it
        if lay.ends[k] not in ends:
            drop.update(lay.issue[k])
    for j, (issue, coll) in enumerate(placed):
        # issued in bucket order on every rank, on the traced worker threads in turn
        del coll.data_deps[:], coll.ctrl_deps[:]
        coll.data_deps.append(issue[0].id)
        proc = procs[j % len(procs)] if procs else nd.processor(coll)
        nd.put(coll, cv.TID if proc[0] == "tid" else cv.STREAM, proc[1], "int64_val")
        after = lay.issue[old_end[ends[j]]][-1] if ends[j] in old_end else lay.grads[ends[j]].end
        insert.setdefault(after, []).append(coll)
    coll_ids = [coll.id for _, coll in placed]
    new_of_grad: list[int] = []
    for j, e in enumerate(ends):
        new_of_grad += [j] * (e + 1 - len(new_of_grad))
    remap = {
        nodes[lay.colls[k]].id: coll_ids[new_of_grad[e]]
        for k, e in enumerate(lay.ends)
        if e not in ends
    }
    _wait_copy_out(nodes, lay, ends, coll_ids)
    return RankEt(r.rank, r.metadata, _emit(r, nodes, drop, remap, insert))


def _emit(
    r: RankEt,
    nodes: list[pb.Node],
    drop: set[int],
    remap: dict[int, int],
    insert: dict[int, list[pb.Node]],
) -> tuple[pb.Node, ...]:
    """`nodes` (copies of `r`'s) without `drop`, with `insert[i]` after position `i` and
    dependencies on dropped collectives pointed at `remap`'s, laid out by `assemble`."""
    emitted: list[list[pb.Node]] = []
    for i, n in enumerate(nodes):
        if i in drop:
            continue
        if remap:
            for deps in (n.data_deps, n.ctrl_deps):
                fixed = list(dict.fromkeys(remap.get(d, d) for d in deps))
                del deps[:]
                deps.extend(fixed)
        emitted.append([n])
        emitted.extend([x] for x in insert.get(i, ()))
    return assemble(emitted, source_procs(r.nodes))


def _wait_copy_out(nodes: list[pb.Node], lay: Layout, ends: list[int], coll_ids: list[int]) -> None:
    """DDP's finalisation copies a bucket's gradients back (one `copy_bucket_to_grad` per
    gradient, in ready order) after waiting for its collective: the first copy of each
    new bucket depends on that bucket's collective."""
    last = lay.grads[-1].end
    copies = [
        i
        for i in range(last + 1, len(nodes))
        if nodes[i].name == _COPY_OUT and nodes[i].inputs.shapes and nd.tags(nodes[i])[0] == "bwd"
    ]
    if len(copies) != len(lay.grads):
        return
    lo = 0
    for j, e in enumerate(ends):
        n = nodes[copies[lo]]
        if coll_ids[j] not in n.data_deps:
            n.data_deps.append(coll_ids[j])
        lo = e + 1
