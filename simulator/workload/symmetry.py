"""Which generated ranks may be folded: equal graphs and equal prices.

The generator already emits one rank per (pipeline stage, CP rank); with context
parallelism the CP ranks of a stage still run identical graphs (load-balanced causal
chunks), so the simulator's folding (`lumos.simulator.fold`) can simulate one of them —
4x fewer events at CP 4. Folding compares graphs, not placement, and is exact only when
the pricer charges every member of a class what it charges the class's representative.
The network model prices by placement: a CP ring of TP 4 x CP 4 on 8-GPU nodes has two
links inside a node and two across nodes, so its ranks are interchangeable in pairs
(CP 0 with 2, 1 with 3), not all four. `price_keys` digests what each rank pays, node for
node, for each send and collective; given as the fold's extra keys, only ranks that pay
alike fold together (TP 8 x CP 4: all four; TP 4 x CP 4: two classes).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence

import numpy as np

from lumos.simulator.graph import COLL, SEND, RankGraph
from lumos.simulator.network.api import CollectivePricer

PEER_BITS = 24  # ranks and (group, type) pairs below 2**24; sizes below 2**39 bytes
TYPE_BITS = 8


def _per_node(keys: np.ndarray, price: Callable[[int], int]) -> np.ndarray:
    """`price(key)` for each entry of `keys`, calling it once per distinct key."""
    uniq, inverse = np.unique(keys, return_inverse=True)
    return np.asarray([price(k) for k in uniq.tolist()], np.int64)[inverse]


def _prices(g: RankGraph, pricer: CollectivePricer) -> np.ndarray:
    """The pricer's time of each send and each collective of `g`, in node order."""
    sends = np.flatnonzero(g.type == SEND)
    colls = np.flatnonzero(g.type == COLL)
    # one int64 key per node: size in the high bits, then the peer (or group and type)
    size_s = g.comm_size[sends].astype(np.int64)
    peer_key = (size_s << PEER_BITS) | g.comm_peer[sends].astype(np.int64)
    size_c = g.comm_size[colls].astype(np.int64)
    group = g.group[colls].astype(np.int64) + 1  # -1 (no group) -> 0
    coll_key = (size_c << PEER_BITS) | (group << TYPE_BITS) | g.comm_type[colls].astype(np.int64)
    mask = (1 << PEER_BITS) - 1

    def p2p(key: int) -> int:
        return pricer.p2p_ns(key >> PEER_BITS, g.rank, key & mask)

    def coll(key: int) -> int:
        gi = ((key & mask) >> TYPE_BITS) - 1
        ctype = key & ((1 << TYPE_BITS) - 1)
        return pricer.collective_ns(ctype, key >> PEER_BITS, g.groups[gi]) if gi >= 0 else -1

    return np.concatenate([_per_node(peer_key, p2p), _per_node(coll_key, coll)])


def price_keys(graphs: Sequence[RankGraph], pricer: CollectivePricer) -> dict[int, bytes]:
    """Per rank, a digest of what `pricer` charges each of its sends and collectives, in
    node order: the `SimOptions.fold_keys` that keep folding exact under placement."""
    out = {}
    for g in graphs:
        out[g.rank] = hashlib.blake2b(_prices(g, pricer).tobytes(), digest_size=16).digest()
    return out
