"""Stacking frozen blocks into one rank's `RankGraph` (numpy throughout).

`Pieces.add` appends a block and makes its first compute node (or its first node) wait
for given global nodes (and a node marked `AFTER_PREVIOUS_COMPUTE` for the rank's
previous compute); `finish` concatenates the columns, shifts each block's local
dependencies, adds stream order (each node after the previous node on its stream),
resolves the peer placeholders of shared blocks, and builds the CSR predecessor lists.
"""

from __future__ import annotations

import numpy as np

from lumos.simulator.graph import RankGraph
from lumos.simulator.workload.block import COLUMNS, Frozen

#: a block mark: this node waits for the rank's previous compute node (a blocking start)
AFTER_PREVIOUS_COMPUTE = "after_previous_compute"


class Pieces:
    """The blocks of one rank in issue order."""

    def __init__(self) -> None:
        self.blocks: list[Frozen] = []
        self.starts: list[int] = []
        self.n = 0
        self.extra: list[tuple[int, int]] = []
        self._last_compute = -1

    def add(self, blk: Frozen, first_waits: list[int] | tuple[int, ...] = ()) -> int:
        """Append `blk`; return its first node's global index."""
        start = self.n
        head = start + max(blk.first_compute, 0)
        self.extra.extend((head, w) for w in first_waits if w >= 0)
        blocking = blk.marks.get(AFTER_PREVIOUS_COMPUTE, -1)
        if blocking >= 0 and self._last_compute >= 0:
            self.extra.append((start + blocking, self._last_compute))
        if blk.last_compute >= 0:
            self._last_compute = start + blk.last_compute
        self.blocks.append(blk)
        self.starts.append(start)
        self.n += len(blk)
        return start

    def last_compute(self) -> int:
        return self._last_compute

    def finish(
        self,
        rank: int,
        names: list[str],
        groups: list[tuple[int, ...]],
        peers: dict[int, int],
    ) -> tuple[RankGraph, np.ndarray, np.ndarray]:
        """The rank's graph and its per-node FLOPs and bytes."""
        cols = {c: np.concatenate([b.cols[c] for b in self.blocks]) for c in COLUMNS}
        name = np.concatenate([b.name for b in self.blocks])
        starts = np.asarray(self.starts, np.int64)
        lens = np.asarray([len(b.dep_dst) for b in self.blocks], np.int64)
        shift = np.repeat(starts, lens)
        dst = [np.concatenate([b.dep_dst for b in self.blocks]) + shift]
        src = [np.concatenate([b.dep_src for b in self.blocks]) + shift]
        if self.extra:
            pairs = np.asarray(self.extra, np.int64)
            dst.append(pairs[:, 0])
            src.append(pairs[:, 1])
        stream = cols["stream"]
        order = np.argsort(stream, kind="stable")
        same = stream[order][1:] == stream[order][:-1]
        dst.append(order[1:][same])
        src.append(order[:-1][same])
        d, s = np.concatenate(dst), np.concatenate(src)
        key = np.sort(d * self.n + s)
        key = key[np.concatenate(([True], key[1:] != key[:-1]))]  # drop duplicate edges
        d, s = key // self.n, key % self.n
        ptr = np.zeros(self.n + 1, np.int64)
        np.cumsum(np.bincount(d, minlength=self.n), out=ptr[1:])
        peer = cols["peer"].copy()
        for placeholder, real in peers.items():
            peer[peer == placeholder] = real
        g = RankGraph.from_arrays(
            rank,
            self.n,
            names=names,
            name_idx=name,
            type=cols["type"].astype(np.int8),
            stream=stream,
            dur_ns=cols["dur"],
            comm_type=cols["ctype"],
            comm_size=cols["csize"],
            comm_peer=peer,
            comm_tag=cols["tag"],
            group=cols["group"].astype(np.int32),
            dep_ptr=ptr,
            dep_idx=s.astype(np.int32),
            pg_labels=[],
        )
        g.groups = groups
        return g, cols["flops"], cols["nbytes"]
