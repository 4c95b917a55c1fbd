"""Blocks of generated nodes: column lists while built, numpy arrays once frozen.

A `Block` is a run of nodes with dependencies between its own nodes (local indices).
Generators build a block once per distinct piece of work — one model chunk's forward or
backward for one micro-batch, a pipeline transfer, a bucket's gradient reduce — and
`Graph` stacks frozen blocks into a rank's node list, shifting local dependencies by the
block's offset and adding the few dependencies between blocks. Stream order (the previous
node on the same stream) is added once for the whole rank when it is finished.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lumos.errors import SimulationError
from lumos.simulator.graph import COLL, COMP, RECV, SEND

COMPUTE, TP_STREAM, DP_STREAM, PP_SEND, PP_RECV, CP_SEND, CP_RECV = 7, 21, 22, 23, 24, 25, 26
HOST = 27  # the framework's CPU thread, where its host work gates the GPU (zero3_tensor)
EP_STREAM = 28  # expert-parallel token all-to-alls (moe)
SYNC_STREAM = 29  # the host's waits for the device (dropless MoE routing counts: moe_meta)
COUNTS_STREAM = 30  # the MoE dispatcher's token-count all-gathers (their own communicator)
MOE_HOST = 31  # the host issuing a Megatron-Core MoE layer's work (moe_host)
STREAM_ROLES = {
    COMPUTE: "compute",
    TP_STREAM: "tp comm",
    DP_STREAM: "dp comm",
    PP_SEND: "pp send",
    PP_RECV: "pp recv",
    CP_SEND: "cp send",
    CP_RECV: "cp recv",
    HOST: "host",
    EP_STREAM: "ep comm",
    SYNC_STREAM: "host sync",
    COUNTS_STREAM: "ep counts",
    MOE_HOST: "moe host",
}
#: group slots of a generated rank (`RankGraph.groups` order): EP exchanges tokens, EDP
#: (expert data parallel) reduces expert gradients
TP, CP, DP, EMB, EP, EDP = 0, 1, 2, 3, 4, 5
COLUMNS = ("type", "stream", "dur", "flops", "nbytes", "ctype", "csize", "group", "peer", "tag")


class Names:
    """Interned node names shared by every block of one generation."""

    def __init__(self) -> None:
        self.table: dict[str, int] = {}
        self._list: list[str] = []

    def __call__(self, name: str) -> int:
        index = self.table.setdefault(name, len(self.table))
        if index == len(self._list):
            self._list.append(name)
        return index

    def as_list(self) -> list[str]:
        """The names by index: one list shared by every rank of the generation (append-only;
        a copy per rank cost 3.4 MB a stage for a 16,000-layer model: 4,000 stages, 13 GB)."""
        return self._list


@dataclass(frozen=True, slots=True)
class Frozen:
    """A finished block: one int64 array per column, `name` ids, local dependency pairs."""

    cols: dict[str, np.ndarray]
    name: np.ndarray
    dep_dst: np.ndarray
    dep_src: np.ndarray
    marks: dict[str, int]
    first_compute: int = -1
    last_compute: int = -1

    def __len__(self) -> int:
        return len(self.name)


class Block:
    """Append-only builder of one block."""

    def __init__(self, names: Names) -> None:
        self.names = names
        self.cols: dict[str, list[int]] = {c: [] for c in COLUMNS}
        self.name: list[int] = []
        self.deps: list[tuple[int, int]] = []
        self.marks: dict[str, int] = {}
        self.last_compute = -1

    def _add(self, name: str, **values: float) -> int:
        idx = len(self.name)
        self.name.append(self.names(name))
        defaults: dict[str, float] = {
            "type": COMP,
            "stream": COMPUTE,
            "dur": 0,
            "flops": 0,
            "nbytes": 0,
        }
        defaults |= {"ctype": -1, "csize": 0, "group": -1, "peer": -1, "tag": -1}
        defaults |= values
        for c in COLUMNS:
            self.cols[c].append(round(defaults[c]))
        return idx

    def compute(
        self, name: str, dur: float, flops: float, nbytes: float, waits: tuple[int, ...] = ()
    ) -> int:
        """A kernel on the compute stream (after the previous one) waiting for `waits`."""
        idx = self._add(name, dur=dur, flops=flops, nbytes=nbytes)
        self.deps.extend((idx, w) for w in waits if w >= 0)
        self.last_compute = idx
        return idx

    def side(
        self, name: str, stream: int, dur: float, nbytes: float, waits: tuple[int, ...]
    ) -> int:
        """Work on a side stream (not the compute stream) after the nodes `waits`."""
        idx = self._add(name, stream=stream, dur=dur, nbytes=nbytes)
        self.deps.extend((idx, w) for w in waits if w >= 0)
        return idx

    def coll(
        self,
        name: str,
        stream: int,
        ctype: int,
        size: int,
        group: int,
        after: int | tuple[int, ...],
    ) -> int:
        """A collective on `stream` issued after node(s) `after` (-1: no producer here)."""
        idx = self._add(name, type=COLL, stream=stream, ctype=ctype, csize=size, group=group)
        for a in (after,) if isinstance(after, int) else after:
            if a >= 0:
                self.deps.append((idx, a))
        return idx

    def p2p(
        self, name: str, send: bool, stream: int, size: int, peer: int, tag: int, after: int
    ) -> int:
        """A send (or receive) of `size` bytes with `peer`, after node `after`."""
        kind = SEND if send else RECV
        idx = self._add(name, type=kind, stream=stream, csize=size, peer=peer, tag=tag)
        if after >= 0:
            self.deps.append((idx, after))
        return idx

    def mark(self, key: str, idx: int) -> None:
        """Remember a node's local index under `key` (e.g. the end of a layer)."""
        self.marks[key] = idx

    def freeze(self) -> Frozen:
        try:
            cols = {c: np.asarray(v, np.int64) for c, v in self.cols.items()}
        except OverflowError:  # a plan with sizes no GPU holds (mbs x seq in the billions)
            raise SimulationError(
                "a FLOP or byte count or a duration of the generated step exceeds 64 bits: "
                "the plan's sizes (mbs x seq x hidden) are too large, or the hardware's "
                "rates (peaks, HBM bandwidth) too small"
            ) from None
        pairs = np.asarray(self.deps, np.int64).reshape(-1, 2)
        comp = np.flatnonzero((cols["type"] == COMP) & (cols["stream"] == COMPUTE))
        first, last = (int(comp[0]), int(comp[-1])) if comp.size else (-1, -1)
        name = np.asarray(self.name, np.int32)
        return Frozen(cols, name, pairs[:, 0], pairs[:, 1], self.marks, first, last)
