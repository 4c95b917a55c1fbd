"""Per-rank time breakdown of a simulated step, the way the Lumos paper reports it.

A rank's GPU-inclusive step (its start to its last work, GPU included) splits into six
disjoint parts, each instant credited to the first that applies: compute that runs while
no communication transfers (exposed compute), compute overlapped with a transfer, a
transfer with no compute under it (exposed transfer), a collective or send/recv waiting
for its peers with nothing else running (wait for peers), a stream still running the
previous step's work (backlog, `RankResult.gpu_free_ns`), and the rest — idle: the
device starved, waiting on the host or on nothing traced. Exposed communication is
transfer + wait for peers. The view is GPU-centric: compute means the rank's GPU compute
streams; a rank with no GPU processor (a CPU-only capture) uses its CPU threads instead.
Everything is interval arithmetic on sorted numpy arrays, O(n log n).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from lumos.simulator.distinct import distinct
from lumos.simulator.result import ProcKind, RankResult, SimResult

I64 = npt.NDArray[np.int64]


@dataclass(slots=True, frozen=True)
class Breakdown:
    """Where one rank's step time went; the six parts sum to `iteration_ns` (the
    GPU-inclusive step)."""

    rank: int
    iteration_ns: int
    exposed_compute_ns: int
    overlapped_ns: int
    exposed_transfer_ns: int
    peer_wait_ns: int
    backlog_ns: int
    idle_ns: int
    basis: str  # "gpu" or "cpu": which processors counted as compute

    @property
    def exposed_comm_ns(self) -> int:
        """Communication with no compute under it: transfer + wait for peers."""
        return self.exposed_transfer_ns + self.peer_wait_ns

    @property
    def compute_ns(self) -> int:
        """Time with any compute running (exposed + overlapped)."""
        return self.exposed_compute_ns + self.overlapped_ns

    @property
    def comm_ns(self) -> int:
        """Time with any transfer running (exposed + overlapped)."""
        return self.exposed_transfer_ns + self.overlapped_ns

    def parts(self) -> dict[str, int]:
        """The six parts by name, in reporting order."""
        return {
            "exposed_compute": self.exposed_compute_ns,
            "overlapped": self.overlapped_ns,
            "exposed_transfer": self.exposed_transfer_ns,
            "peer_wait": self.peer_wait_ns,
            "backlog": self.backlog_ns,
            "idle": self.idle_ns,
        }

    def to_dict(self) -> dict[str, int | str]:
        out: dict[str, int | str] = {"rank": self.rank, "iteration_time_ns": self.iteration_ns}
        out.update({f"{name}_ns": value for name, value in self.parts().items()})
        out["basis"] = self.basis
        return out


def merge_intervals(start: I64, end: I64) -> tuple[I64, I64]:
    """Union of half-open intervals [start, end) as sorted, disjoint, non-touching runs."""
    keep = end > start
    start, end = start[keep], end[keep]
    if start.size == 0:
        return start.astype(np.int64), end.astype(np.int64)
    order = np.argsort(start, kind="stable")
    s, e = start[order], end[order]
    reach = np.maximum.accumulate(e)
    # a new run begins where an interval starts after everything before it has ended
    new_run = np.empty(s.size, dtype=bool)
    new_run[0] = True
    new_run[1:] = s[1:] > reach[:-1]
    firsts = np.flatnonzero(new_run)
    lasts = np.append(firsts[1:] - 1, s.size - 1)
    return s[firsts].astype(np.int64), reach[lasts].astype(np.int64)


def covered_ns(runs: tuple[I64, I64]) -> int:
    """Total length of disjoint runs."""
    return int((runs[1] - runs[0]).sum())


def _inside(runs: tuple[I64, I64], points: I64) -> npt.NDArray[np.bool_]:
    starts, ends = runs
    idx = np.searchsorted(starts, points, side="right") - 1
    ok = idx >= 0
    result = np.zeros(points.size, dtype=bool)
    result[ok] = ends[idx[ok]] > points[ok]
    return result


def intersection_ns(a: tuple[I64, I64], b: tuple[I64, I64]) -> int:
    """Length of the overlap of two sets of disjoint runs (outputs of `merge_intervals`)."""
    if a[0].size == 0 or b[0].size == 0:
        return 0
    cuts = distinct(np.concatenate([a[0], a[1], b[0], b[1]]))
    left, width = cuts[:-1], np.diff(cuts)
    both = _inside(a, left) & _inside(b, left)
    return int(width[both].sum())


def clip(runs: tuple[I64, I64], lo: int, hi: int) -> tuple[I64, I64]:
    """Restrict disjoint runs to the window [lo, hi)."""
    s = np.clip(runs[0], lo, hi)
    e = np.clip(runs[1], lo, hi)
    keep = e > s
    return s[keep], e[keep]


def _union(*sets: tuple[I64, I64]) -> tuple[I64, I64]:
    return merge_intervals(
        np.concatenate([x[0] for x in sets]), np.concatenate([x[1] for x in sets])
    )


def breakdown_of(
    rank: int,
    window: tuple[int, int],
    compute: tuple[I64, I64],
    comm: tuple[I64, I64],
    basis: str = "gpu",
    wait: tuple[I64, I64] | None = None,
    backlog: tuple[I64, I64] | None = None,
) -> Breakdown:
    """Breakdown of one rank from raw intervals in `window`: compute, communication
    transfers (`comm`), communication waiting for peers (`wait`) and streams running the
    previous step's work (`backlog`)."""
    lo, hi = window
    none = (np.zeros(0, np.int64), np.zeros(0, np.int64))
    comp_runs = clip(merge_intervals(*compute), lo, hi)
    comm_runs = clip(merge_intervals(*comm), lo, hi)
    wait_runs = clip(merge_intervals(*(wait or none)), lo, hi)
    back_runs = clip(merge_intervals(*(backlog or none)), lo, hi)
    comp_total = covered_ns(comp_runs)
    comm_total = covered_ns(comm_runs)
    both = intersection_ns(comp_runs, comm_runs)
    busy = comp_total + comm_total - both
    with_wait = covered_ns(_union(comp_runs, comm_runs, wait_runs))
    with_backlog = covered_ns(_union(comp_runs, comm_runs, wait_runs, back_runs))
    span = hi - lo
    return Breakdown(
        rank=rank,
        iteration_ns=span,
        exposed_compute_ns=comp_total - both,
        overlapped_ns=both,
        exposed_transfer_ns=comm_total - both,
        peer_wait_ns=with_wait - busy,
        backlog_ns=with_backlog - with_wait,
        idle_ns=span - with_backlog,
        basis=basis,
    )


def rank_breakdown(rank: RankResult) -> Breakdown:
    """Breakdown of one simulated rank over [its start, its GPU-inclusive end).

    Only the active part of a task counts as compute or transfer ([start + wait, end));
    the blocked part of a collective or send/recv ([start, start + wait)) is wait for
    peers; a sync call's wait for the GPU is not (the GPU's work is what runs then).
    """
    tasks = rank.tasks
    kinds = [p.kind for p in rank.processors]
    gpu = np.array([k == ProcKind.GPU for k in kinds] + [False], dtype=bool)
    cpu = np.array([k == ProcKind.CPU for k in kinds] + [False], dtype=bool)
    meta = np.array([k == ProcKind.META for k in kinds] + [False], dtype=bool)
    is_comm = tasks.is_comm.astype(bool) & ~meta[tasks.proc]
    on_gpu = gpu[tasks.proc[~is_comm]].any()
    basis = "cpu" if not on_gpu and cpu[tasks.proc[~is_comm]].any() else "gpu"
    compute = ~is_comm & (gpu if basis == "gpu" else cpu)[tasks.proc]
    active = tasks.start_ns + tasks.wait_ns
    frees = np.asarray(list(rank.gpu_free_ns.values()), np.int64)
    return breakdown_of(
        rank.rank,
        (int(rank.start_ns), int(rank.gpu_end_ns)),
        (active[compute], tasks.end_ns[compute]),
        (active[is_comm], tasks.end_ns[is_comm]),
        basis,
        (tasks.start_ns[is_comm], active[is_comm]),
        (np.full(frees.size, rank.start_ns, np.int64), frees),
    )


def breakdown(result: SimResult) -> list[Breakdown]:
    """Breakdown of every rank of a simulated run, in rank order."""
    return [rank_breakdown(rank) for rank in result.ranks]
