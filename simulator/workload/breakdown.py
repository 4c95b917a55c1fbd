"""Where a generated step's time goes, on its slowest rank.

Compute = time the compute stream is busy. Exposed communication is counted per class
in a fixed order — TP, CP, EP (mixture-of-experts all-to-alls and the host's waits for the
routing counts), MoE host (the host issuing a Megatron-Core MoE layer's work after its
wait, `moe_host`), DP, PP — as the time that class's transfers add to the union
of everything counted before it (compute included): so overlapped communication costs
nothing and no second is counted twice. A transfer is active from when its rendezvous
completes (`start + wait`) to its end. The rest of the step is pipeline bubble (idle).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from lumos.simulator.graph import RankGraph
from lumos.simulator.result import RankResult
from lumos.simulator.workload.block import (
    COMPUTE,
    COUNTS_STREAM,
    CP_RECV,
    CP_SEND,
    DP_STREAM,
    EP_STREAM,
    HOST,
    MOE_HOST,
    PP_RECV,
    PP_SEND,
    SYNC_STREAM,
    TP_STREAM,
)
from lumos.simulator.workload.moe_host import CHAINED_SUFFIX, POST_SUFFIX

CLASSES: tuple[tuple[str, tuple[int, ...]], ...] = (
    ("tp", (TP_STREAM,)),
    ("cp", (CP_SEND, CP_RECV)),
    ("ep", (EP_STREAM, COUNTS_STREAM, SYNC_STREAM)),  # with the routing counts' gathers, waits
    ("host", (MOE_HOST,)),
    ("dp", (DP_STREAM, HOST)),  # host work appears only as ZeRO-3's (zero3_tensor)
    ("pp", (PP_SEND, PP_RECV)),
)


@dataclass(frozen=True, slots=True)
class Breakdown:
    """Seconds of one step on its slowest rank."""

    rank: int
    compute_s: float
    exposed_tp_s: float
    exposed_cp_s: float
    exposed_dp_s: float
    exposed_pp_s: float
    bubble_s: float
    exposed_ep_s: float = 0.0
    exposed_host_s: float = 0.0  # the host issuing MoE layers (moe_host), past all above

    def to_json(self) -> dict[str, float | int]:
        return {k: round(v, 6) if isinstance(v, float) else v for k, v in asdict(self).items()}


def _measure(starts: np.ndarray, ends: np.ndarray) -> int:
    """Length of the union of intervals [starts, ends)."""
    keep = ends > starts
    s, e = starts[keep], ends[keep]
    if not s.size:
        return 0
    order = np.argsort(s, kind="stable")
    s, e = s[order], np.maximum.accumulate(e[order])
    gaps = np.maximum(s[1:] - e[:-1], 0)
    return int(e[-1] - s[0] - gaps.sum())


def _after_waits(g: RankGraph) -> np.ndarray:
    """The host thread's nodes issuing after a wait in their block (`moe_host.post` and the
    next layer's `pre`): only there has the GPU nothing queued but what the host issues. Its running ahead elsewhere
    (before the copy, the backward, during pipeline warm-up) shows where the GPU waits for
    something else, so it is not counted as the host's (it is compute, communication or
    bubble)."""
    on = g.stream == MOE_HOST
    if not on.any():
        return on
    post = [i for i, n in enumerate(g.names) if n.endswith((POST_SUFFIX, CHAINED_SUFFIX))]
    return on & np.isin(g.name_idx, post)


def breakdown(g: RankGraph, r: RankResult) -> Breakdown:
    """The breakdown of rank `r` (simulated from graph `g`)."""
    t = r.tasks
    active_start = t.start_ns + t.wait_ns
    stream = g.stream
    starts = [active_start[stream == COMPUTE]]
    ends = [t.end_ns[stream == COMPUTE]]
    base = _measure(starts[0], ends[0])
    out = {"compute": base}
    for name, streams in CLASSES:
        mask = np.isin(stream, streams) if name != "host" else _after_waits(g)
        starts.append(active_start[mask])
        ends.append(t.end_ns[mask])
        now = _measure(np.concatenate(starts), np.concatenate(ends))
        out[name] = now - base
        base = now
    total = r.iteration_time_ns
    return Breakdown(
        r.rank,
        out["compute"] / 1e9,
        out["tp"] / 1e9,
        out["cp"] / 1e9,
        out["dp"] / 1e9,
        out["pp"] / 1e9,
        max(total - base, 0) / 1e9,
        out["ep"] / 1e9,
        out["host"] / 1e9,
    )
