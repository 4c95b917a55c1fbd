"""Symmetry folding: simulate one rank of each set of interchangeable ranks.

Data-parallel replicas (and often tensor-parallel peers) run identical graphs; by
symmetry they have identical simulated times, so one representative per class suffices —
512 ranks become a few dozen. Classes come from colour refinement: ranks start coloured
by a hash of everything that affects timing (node types, processors, durations, gaps,
dependencies, communication types/sizes/tags, sync attributes, start offset of aligned
ranks — not names, ids or peer
numbers); then each rank's colour is refined by the colours of its collective groups'
members and its send/recv peers, until stable. A folding is used only when it is exact:
for every representative and every group it belongs to, each member's representative is
itself a member (so a folded collective still meets every class it would have met).
Exactness also assumes the pricer charges equal-shaped groups equally (true for replay);
a placement-aware pricer's charges per rank can be given as extra `keys`.
"""

from __future__ import annotations

import hashlib
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from lumos.simulator.graph import COLL, RECV, SEND, RankGraph

_TIMING_FIELDS = (
    "type",
    "is_cpu_op",
    "stream",
    "tid",
    "dur_ns",
    "dur_us_ns",
    "gap_ns",
    "start_ns",
    "dep_ptr",
    "dep_idx",
    "comm_type",
    "comm_size",
    "comm_tag",
    "comm_seq",
    "comm_dur_ns",
    "group",
    "sync_kind",
    "sync_stream",
    "sync_event",
)
MAX_ROUNDS = 16


@dataclass(frozen=True, slots=True)
class Folding:
    """`rep[rank]` = the simulated rank standing for `rank`; `simulated` sorted."""

    rep: dict[int, int]
    simulated: list[int]
    reason: str = ""

    @property
    def folded(self) -> bool:
        return len(self.simulated) < len(self.rep)


def identity(graphs: Sequence[RankGraph], reason: str = "") -> Folding:
    ranks = [g.rank for g in graphs]
    return Folding({r: r for r in ranks}, sorted(ranks), reason)


def _timing_key(g: RankGraph, offset: int) -> tuple:
    """A cheap key of everything that affects timing: sizes, dtypes and a CRC of each
    field (equal graphs have equal keys; `_same_timing` settles the rare collision)."""
    parts: list[object] = [offset, tuple(len(grp) for grp in g.groups)]
    for name in _TIMING_FIELDS:
        arr = np.ascontiguousarray(getattr(g, name))
        parts.append((arr.dtype.str, arr.shape, zlib.crc32(arr.view(np.uint8).data)))
    return tuple(parts)


def _same_timing(a: RankGraph, b: RankGraph) -> bool:
    return all(np.array_equal(getattr(a, name), getattr(b, name)) for name in _TIMING_FIELDS)


def _intern(keys: list[bytes]) -> list[int]:
    table: dict[bytes, int] = {}
    return [table.setdefault(k, len(table)) for k in keys]


def _base_colours(graphs: Sequence[RankGraph], start: Mapping[int, int]) -> list[int]:
    """Class ids, numbered in order of first appearance, of ranks with identical timing
    inputs (the start colours of the refinement)."""
    classes: dict[tuple, list[tuple[int, RankGraph]]] = {}
    count = 0
    out = []
    for g in graphs:
        bucket = classes.setdefault(_timing_key(g, start.get(g.rank, 0)), [])
        colour = next((c for c, rep in bucket if _same_timing(g, rep)), None)
        if colour is None:
            colour, count = count, count + 1
            bucket.append((colour, g))
        out.append(colour)
    return out


def find_folding(
    graphs: Sequence[RankGraph],
    offsets: Mapping[int, int] | None = None,
    fold_keys: Mapping[int, bytes] | None = None,
) -> Folding:
    """The coarsest exact folding colour refinement finds (identity if none).

    `offsets`: each rank's start time (aligned ranks); ranks starting at different times
    are never folded together. `fold_keys`: per rank, what else must be equal for two ranks
    to fold (a pricer that charges by placement: what it charges each rank's transfers).
    """
    by_rank = {g.rank: g for g in graphs}
    start = offsets or {}
    base = _base_colours(graphs, start)
    if fold_keys is not None:
        extra = [fold_keys.get(r, b"") for r in by_rank]
        base = _intern([b"%d|" % c + k for c, k in zip(base, extra, strict=True)])
    colour = dict(zip(by_rank, base, strict=True))
    p2p = {g.rank: np.nonzero((g.type == SEND) | (g.type == RECV))[0] for g in graphs}
    colls = {g.rank: np.nonzero(g.type == COLL)[0] for g in graphs}
    classes = len(set(colour.values()))
    for _ in range(MAX_ROUNDS):
        group_sig: dict[tuple[int, ...], int] = {}
        keys = []
        for r, g in by_rank.items():
            sigs = []
            for grp in g.groups:
                ms = tuple(sorted(colour[m] for m in grp if m in colour))
                sigs.append(group_sig.setdefault(ms, len(group_sig)))
            sig_arr = np.asarray(sigs, np.int64)[g.group[colls[r]]] if sigs else np.zeros(0)
            peers = [colour.get(int(p), -1) for p in g.comm_peer[p2p[r]].tolist()]
            h = hashlib.blake2b(digest_size=16)
            h.update(colour[r].to_bytes(8, "little"))
            h.update(np.asarray(sig_arr, np.int64).tobytes())
            h.update(np.asarray(peers, np.int64).tobytes())
            keys.append(h.digest())
        colour = dict(zip(by_rank, _intern(keys), strict=True))
        now = len(set(colour.values()))
        if now == classes:
            break
        classes = now
    first: dict[int, int] = {}
    for r in sorted(by_rank):
        first.setdefault(colour[r], r)
    rep = {r: first[colour[r]] for r in by_rank}
    simulated = sorted(set(rep.values()))
    for r in simulated:
        for grp in by_rank[r].groups:
            members = set(grp)
            for m in grp:
                if m in rep and rep[m] not in members:
                    return identity(
                        graphs,
                        f"not exact: rank {m} of group {list(grp)} is represented by "
                        f"rank {rep[m]}, outside the group",
                    )
    return Folding(rep, simulated)
