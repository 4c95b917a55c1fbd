"""Edit: another number of transformer layers (forward, backward, optimizer, collectives).

Each phase's layer stack is re-emitted with `n` layers: new layer `k` is a copy of a
traced layer (`layer_sources`), everything outside the stack is kept, and backward runs
the stack in reverse as traced. A layer's piece holds all of its nodes (CPU ops, kernels,
the collectives it issued, its optimizer updates when the optimizer was recognised per
layer), so they come and go together; durations are the measured ones of the source
layer.
"""

from __future__ import annotations

from collections.abc import Iterator

from lumos.errors import ConfigError
from lumos.proto import pb
from lumos.simulator.whatif import nodes as nd
from lumos.simulator.whatif.assemble import assemble, source_procs
from lumos.simulator.whatif.etset import EtSet, RankEt
from lumos.simulator.whatif.segments import Key, Segments, segment


def layer_sources(traced: int, n: int) -> list[int]:
    """Which traced layer each of `n` new layers copies: the first and last as traced
    (they may border embedding and head), interior ones from the traced interior."""
    if n <= 0 or traced <= 0:
        return []
    if n == 1:
        return [traced - 1]
    if n <= traced:
        return [*range(n - 1), traced - 1]
    interior = min(1, traced - 1) if traced > 2 else 0
    return [*range(traced - 1), *[interior] * (n - traced), traced - 1]


def _copies(r: RankEt, seg: Segments, key: Key, layer: int) -> list[pb.Node]:
    out = []
    for i in seg.pieces[key]:
        c = nd.clone(r.nodes[i])
        phase, _, mb = nd.tags(c)
        nd.set_tags(c, phase, layer, mb)
        out.append(c)
    return out


def _pieces(r: RankEt, seg: Segments, n: int) -> Iterator[list[pb.Node]]:
    sources = layer_sources(seg.layers, n)
    done: set[str] = set()
    for key in seg.order:
        phase, layer, _ = key
        if layer < 0:
            yield [r.nodes[i] for i in seg.pieces[key]]
            continue
        if phase in done:
            continue
        done.add(phase)
        traced = {k[1]: k for k in seg.layer_keys(phase)}
        order = range(n - 1, -1, -1) if phase == "bwd" else range(n)
        for new in order:
            src = traced.get(sources[new])
            if src is not None:
                yield _copies(r, seg, src, new)


def set_layers(ets: EtSet, n: int) -> EtSet:
    """The step with `n` transformer layers on every rank (tagged input).

    Raises ConfigError when `n` < 1 or a rank has no recognised layers.
    """
    if n < 1:
        raise ConfigError(f"--layers must be at least 1, not {n}")
    ranks = []
    for r in ets.ranks:
        seg = segment(r)
        if seg.layers == 0:
            raise ConfigError(f"rank {r.rank}: no transformer layers recognised to add or remove")
        nodes = assemble(_pieces(r, seg, n), source_procs(r.nodes))
        ranks.append(RankEt(r.rank, r.metadata, nodes))
    return ets.with_ranks(ranks)
