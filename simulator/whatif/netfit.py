"""The network as the trace measured it: latency and bus bandwidth fitted per group.

A collective's recorded time (without the wait for late peers where the trace tells it)
is its transfer plus whatever else held it: a peer that arrived late inside the call, a
core it waited for on a busy host (gloo runs on CPU threads). For each process group the
collectives observed on it fit the ring cost `time = steps(n)·α + bytes·share(n)/busbw`
on their lower envelope (least squares, then again on the points at or under the line
until it settles: the fastest instances are the transfer; α, 1/busbw ≥ 0; one size seen:
α = 0 and the fastest bytes rate). An edit re-prices the transfer and keeps the rest
(`retime`: the measured time plus the line's difference between the new and old group
size or bytes; a group of one moves nothing and waits for no one). A resized or new group
reuses the fit of the group it replaces, and a collective nothing was measured for is
priced from the fit (`FittedPricer`, a `CollectivePricer`).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

from lumos.proto import pb
from lumos.simulator.network.api import ALL_GATHER, ALL_REDUCE, ALL_TO_ALL, REDUCE_SCATTER
from lumos.simulator.whatif import nodes as nd
from lumos.simulator.whatif.etset import EtSet, process_groups
from lumos.simulator.whatif.groups import Members, members_of


def ring_terms(comm_type: int, size: float, n: int) -> tuple[float, float]:
    """(latency steps, bytes each rank moves) of a ring collective on `n` ranks."""
    if n <= 1:
        return 0.0, 0.0
    if comm_type == ALL_REDUCE:
        return 2.0 * (n - 1), 2.0 * size * (n - 1) / n
    if comm_type == ALL_GATHER:
        return float(n - 1), size * (n - 1)
    if comm_type in (REDUCE_SCATTER, ALL_TO_ALL):
        return float(n - 1), size * (n - 1) / n
    return float(n - 1), float(size)


@dataclass(frozen=True, slots=True)
class LinkFit:
    """α (ns per step) and 1/busbw (ns per byte)."""

    alpha_ns: float
    ns_per_byte: float

    def time_ns(self, comm_type: int, size: float, n: int) -> float:
        steps, moved = ring_terms(comm_type, size, n)
        return steps * self.alpha_ns + moved * self.ns_per_byte

    def retime(
        self, measured: float, comm_type: int, size: float, n_old: int, n_new: int, size_new: float
    ) -> float:
        """A collective measured at `measured` ns on `n_old` ranks moving `size` bytes,
        on `n_new` ranks moving `size_new`: its transfer re-priced, the rest kept (≥ 0)."""
        if n_new <= 1:
            return 0.0
        delta = self.time_ns(comm_type, size_new, n_new) - self.time_ns(comm_type, size, n_old)
        return max(0.0, measured + delta)


def _line(a: np.ndarray, y: np.ndarray) -> LinkFit:
    """Least squares with α ≥ 0, 1/busbw > 0 (else no latency and the mean rate)."""
    if len({float(x) for x in a[:, 1]}) >= 2:
        (alpha, beta), *_ = np.linalg.lstsq(a, y, rcond=None)
        if alpha >= 0 and beta > 0:
            return LinkFit(float(alpha), float(beta))
    moved = a[:, 1].sum()
    return LinkFit(0.0, float(y.sum() / moved) if moved > 0 else 0.0)


def _fit(points: list[tuple[int, int, int, int]]) -> LinkFit:
    """The lower envelope of the points (see module doc)."""
    a = np.asarray([ring_terms(t, s, n) for t, s, n, _ in points], float)
    y = np.asarray([d for *_, d in points], float)
    keep = np.ones(len(y), bool)
    fit = _line(a, y)
    for _ in range(len(y)):
        under = keep & (a @ (fit.alpha_ns, fit.ns_per_byte) >= y * (1 - 1e-9))
        if under.sum() == keep.sum() or len(set(a[under, 1].tolist())) < 2:
            break
        keep = under
        fit = _line(a[keep], y[keep])
    if len(set(a[:, 1].tolist())) < 2:  # one size: its fastest rate
        moved = a[:, 1]
        rates = y[moved > 0] / moved[moved > 0]
        fit = LinkFit(0.0, float(rates.min()) if rates.size else 0.0)
    return fit


@dataclass(slots=True)
class NetworkFit:
    """Fits per group, and one over all groups for groups never seen."""

    groups: dict[Members, LinkFit] = field(default_factory=dict)
    overall: LinkFit = LinkFit(0.0, 0.0)

    def for_group(self, members: Members) -> LinkFit:
        return self.groups.get(members, self.overall)


def fit_network(ets: EtSet) -> NetworkFit:
    """Fit every multi-rank group's collectives (rank-minimum time per instance)."""
    groups, world = process_groups(ets), ets.world_size
    per: dict[Members, dict[int, tuple[int, int, int]]] = defaultdict(dict)
    for r in ets.ranks:
        counters: dict[Members, int] = defaultdict(int)
        for n in r.nodes:
            if n.type != pb.COMM_COLL_NODE:
                continue
            m = members_of(n, groups, world)
            k = counters[m]
            counters[m] += 1
            item = (
                nd.int_attr(n, "comm_type", 0),
                nd.int_attr(n, "comm_size", 0),
                nd.comm_duration(n),
            )
            prev = per[m].get(k)
            per[m][k] = item if prev is None or item[2] < prev[2] else prev
    fit = NetworkFit()
    everything: list[tuple[int, int, int, int]] = []
    for m, items in per.items():
        pts = [(t, s, len(m), d) for t, s, d in items.values() if s > 0 and d > 0 and len(m) > 1]
        if pts:
            fit.groups[m] = _fit(pts)
            everything += pts
    if everything:
        fit.overall = _fit(everything)
    return fit
