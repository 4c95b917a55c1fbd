"""Synthetic GPT-like training steps as `RankGraph`s, for benchmarks and folding tests.

Ranks are laid out tensor-parallel fastest, then pipeline stage, then data-parallel
replica (`rank = (dp * pp_size + stage) * tp_size + tp`). Each rank has one CPU thread
launching kernels on a compute stream and a communication stream: per micro-batch and
layer, forward and backward kernels with tensor-parallel all-reduces between them
(cross-stream edges both ways); activations and gradients travel between stages by
send/recv (GPipe order: all forwards, then all backwards); the step ends with bucketed
data-parallel all-reduces, a device synchronize and an optimizer kernel. All replicas of
a stage are identical, as in real data parallelism, so they fold.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lumos.simulator.graph import COLL, COMP, RECV, SEND, RankGraph, SyncKind

CPU_TID, COMPUTE_STREAM, COMM_STREAM = 1, 7, 20
TP_GROUP, DP_GROUP = 0, 1
US = 1000


@dataclass(frozen=True, slots=True)
class StepShape:
    """Parallelism and size of the synthetic step."""

    tp: int = 2
    pp: int = 2
    dp: int = 2
    layers_per_stage: int = 2
    microbatches: int = 2
    fwd_kernels: int = 6
    dp_buckets: int = 4

    @property
    def world(self) -> int:
        return self.tp * self.pp * self.dp


class _Builder:
    def __init__(self) -> None:
        self.cols: dict[str, list[int]] = {
            k: []
            for k in (
                "type",
                "stream",
                "tid",
                "dur_ns",
                "gap_ns",
                "comm_type",
                "comm_size",
                "peer_offset",
                "comm_tag",
                "group",
                "sync_kind",
            )
        }
        self.deps: list[list[int]] = []
        self.last: dict[int, int] = {}

    def add(self, deps: list[int], **values: int) -> int:
        idx = len(self.deps)
        defaults = {"type": COMP, "stream": -1, "tid": -1, "gap_ns": 0, "comm_type": -1}
        defaults |= {"comm_size": 0, "peer_offset": 0, "comm_tag": -1, "group": -1}
        defaults |= {"sync_kind": 0}
        defaults |= values
        for key, col in self.cols.items():
            col.append(defaults[key])
        self.deps.append(deps)
        return idx

    def cpu(self, dur: int, deps: tuple[int, ...] = (), **values: int) -> int:
        prev = self.last.get(-1)
        own = [prev] if prev is not None else []
        idx = self.add(own + list(deps), tid=CPU_TID, dur_ns=dur, gap_ns=US, **values)
        self.last[-1] = idx
        return idx

    def gpu(self, stream: int, dur: int, deps: tuple[int, ...] = (), **values: int) -> int:
        launch = self.cpu(4 * US)
        prev = self.last.get(stream)
        own = [launch] + ([prev] if prev is not None else [])
        idx = self.add(own + list(deps), stream=stream, dur_ns=dur, **values)
        self.last[stream] = idx
        return idx


def _stage_template(shape: StepShape, stage: int) -> _Builder:
    b = _Builder()
    t = shape.tp
    tp_ar = {"type": COLL, "comm_type": 0, "comm_size": 8 << 20, "group": TP_GROUP}
    for phase, tag in (("fwd", 0), ("bwd", 1)):
        scale = 1 if phase == "fwd" else 2
        first_stage = stage == 0 if phase == "fwd" else stage == shape.pp - 1
        last_stage = stage == shape.pp - 1 if phase == "fwd" else stage == 0
        step = t if phase == "fwd" else -t
        for _ in range(shape.microbatches):
            dep: tuple[int, ...] = ()
            if not first_stage:
                recv = b.gpu(
                    COMM_STREAM,
                    30 * US,
                    type=RECV,
                    comm_size=4 << 20,
                    peer_offset=-step,
                    comm_tag=tag,
                )
                dep = (recv,)
            for _ in range(shape.layers_per_stage):
                for k in range(shape.fwd_kernels * scale):
                    kern = b.gpu(COMPUTE_STREAM, (20 + 15 * (k % 3)) * US, dep)
                    dep = ()
                    if k % 3 == 2:
                        ar = b.gpu(COMM_STREAM, 60 * US, (kern,), **tp_ar)
                        dep = (ar,)
            if not last_stage:
                b.gpu(
                    COMM_STREAM,
                    30 * US,
                    (b.last[COMPUTE_STREAM],),
                    type=SEND,
                    comm_size=4 << 20,
                    peer_offset=step,
                    comm_tag=tag,
                )
    buckets = [
        b.gpu(
            COMM_STREAM,
            400 * US,
            (b.last[COMPUTE_STREAM],),
            type=COLL,
            comm_type=0,
            comm_size=100 << 20,
            group=DP_GROUP,
        )
        for _ in range(shape.dp_buckets)
    ]
    b.cpu(2 * US, tuple(buckets), sync_kind=int(SyncKind.DEVICE))
    b.gpu(COMPUTE_STREAM, 300 * US)
    return b


def _template_arrays(b: _Builder) -> dict[str, np.ndarray]:
    arrays = {
        k: np.asarray(v, np.int8 if k in ("type", "sync_kind") else np.int64)
        for k, v in b.cols.items()
    }
    arrays["dep_ptr"] = np.concatenate(([0], np.cumsum([len(d) for d in b.deps])))
    arrays["dep_idx"] = np.asarray([x for d in b.deps for x in d], np.int32)
    return arrays


def synthetic_step(shape: StepShape) -> list[RankGraph]:
    """One `RankGraph` per rank of the step (arrays shared between identical ranks)."""
    templates = [_template_arrays(_stage_template(shape, s)) for s in range(shape.pp)]
    graphs = []
    t, p = shape.tp, shape.pp
    for rank in range(shape.world):
        tp_i, stage, dp_i = rank % t, (rank // t) % p, rank // (t * p)
        a = templates[stage]
        base = (dp_i * p + stage) * t
        tp_group = tuple(range(base, base + t))
        dp_group = tuple((d * p + stage) * t + tp_i for d in range(shape.dp))
        is_p2p = (a["type"] == SEND) | (a["type"] == RECV)
        peer = np.where(is_p2p, rank + a["peer_offset"], -1)
        g = RankGraph.from_arrays(
            rank,
            len(a["type"]),
            type=a["type"],
            stream=a["stream"],
            tid=a["tid"],
            dur_ns=a["dur_ns"],
            gap_ns=a["gap_ns"],
            dep_ptr=a["dep_ptr"],
            dep_idx=a["dep_idx"],
            comm_type=a["comm_type"],
            comm_size=a["comm_size"],
            comm_peer=peer,
            comm_tag=a["comm_tag"],
            group=a["group"].astype(np.int32),
            sync_kind=a["sync_kind"],
            pg_labels=[],
        )
        g.groups = [tp_group, dp_group]
        g.world_size = shape.world
        graphs.append(g)
    return graphs
