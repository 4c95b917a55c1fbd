"""Blocking launches: calls that let their GPU op onto its stream before they return.

A synchronous `cudaMemcpy`, or a `cudaMemcpyAsync` to or from pageable memory, queues its
copy as it begins and returns only once the copy is (or its staging is) done: as
recorded, the op starts inside the call (so do many kernels, whose CUPTI launch record
ends after the kernel began). Replay releases such an op onto its stream at
`early_latency` after the call's start, and a copy call whose one early op ended, as
recorded, before the call returned waits for that op's stream like a stream sync
(`waits`): it ends when the op ends plus the time it ran after it, so a what-if that
shortens the kernel before the copy shortens the call, and one that lengthens the copy
lengthens it. That time is the call's `copy_after_ns`, written by the converter from the
recorded times; an ET written before has it from its durations (as recorded unless a
what-if edited the copy)."""

from __future__ import annotations

import numpy as np

from lumos.simulator.graph import RankGraph

#: in the name of every runtime and driver copy call of CUDA and HIP
_COPY = "Memcpy"


def early_latency(g: RankGraph, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """Per blocking launch edge (call `src`, op `dst`, local indices): how long after the
    call's start its op enters the stream. An op with a `gap_ns` (the converter counts it
    from the later of the call's start and its stream predecessor's end) enters at once
    and waits its gap after whatever held it; one without (the first op of its stream, or
    an ET written before such gaps were kept) enters at its recorded start."""
    lead = np.maximum(g.start_ns[dst] - g.start_ns[src], 0)
    return np.where(g.gap_ns[dst] > 0, 0, lead)


def waits(g: RankGraph, src: np.ndarray, dst: np.ndarray) -> dict[int, int]:
    """Position in `src`/`dst` → the call's recorded time after its op ended, for the
    blocking copy calls (`cudaMemcpy*`, `hipMemcpy*`, `cuMemcpy*`) that have no other
    early op and returned, as recorded, no earlier than their op ended (they waited for
    it; `copy_after_ns` says so as recorded, whatever the ET's durations now). A kernel
    launch that returned after its short kernel ended did not wait for it."""
    calls, counts = np.unique(src, return_counts=True)
    single = set(calls[counts == 1].tolist())
    call_end = g.start_ns[src] + g.dur_ns[src]
    op_end = g.start_ns[dst] + g.dur_ns[dst]
    out: dict[int, int] = {}
    kept = np.fromiter((int(c) in g.copy_after for c in src.tolist()), bool, len(src))
    for k in np.flatnonzero(kept | ((op_end <= call_end) & (g.dur_ns[dst] >= 0))).tolist():
        call = int(src[k])
        if call in single and _COPY in g.name(call):
            out[k] = g.copy_after.get(call, int(call_end[k] - op_end[k]))
    return out


def returns_after_op(
    early_wait: dict[int, tuple[int, int, int]], dur: dict[int, int]
) -> dict[int, int]:
    """For the scheduler: edge id → blocking call of `Plan.early_wait`; sets each such
    call's duration in `dur` to the time it runs after its op."""
    for call, (_, after, _) in early_wait.items():
        dur[call] = after
    return {e: call for call, (e, _, _) in early_wait.items()}
