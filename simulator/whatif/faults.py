"""Edits: stragglers and faults — a slow rank, a degraded link or NIC, kernel jitter.

* `slow_rank`: one rank's compute takes `factor` times as long (its GPU kernels on a GPU
  trace, its CPU ops on a CPU-only one);
* `slow_link`: every collective and send/recv that involves the rank (its NIC) takes
  `factor` times as long, on every member, so the slow member's time is what the others
  wait for;
* `jitter`: every compute node's time is multiplied by a log-normal factor of mean 1 and
  the given spread, from a seeded generator (the same seed gives the same trace).
"""

from __future__ import annotations

import numpy as np

from lumos.errors import ConfigError
from lumos.proto import pb
from lumos.simulator.whatif import nodes as nd
from lumos.simulator.whatif.etset import EtSet, RankEt, process_groups
from lumos.simulator.whatif.groups import members_of


def _compute(r: RankEt) -> list[bool]:
    gpu = any(nd.on_gpu(n) and not nd.is_comm(n) for n in r.nodes)
    return [
        n.type == pb.COMP_NODE and (nd.on_gpu(n) if gpu else True) and nd.duration(n) > 0
        for n in r.nodes
    ]


def _scaled(r: RankEt, factors: list[float]) -> RankEt:
    nodes = []
    for n, f in zip(r.nodes, factors, strict=True):
        c = nd.clone(n)
        if f != 1.0:
            if nd.is_comm(c):
                nd.set_duration(c, round(nd.comm_duration(c) * f))
            else:
                nd.set_duration(c, round(nd.duration(c) * f))
        nodes.append(c)
    return RankEt(r.rank, r.metadata, tuple(nodes))


def slow_rank(ets: EtSet, rank: int, factor: float) -> EtSet:
    """Rank `rank`'s compute `factor` times slower. Raises ConfigError for an absent rank
    or a factor <= 0."""
    if factor <= 0:
        raise ConfigError(f"--slow-rank factor must be positive, not {factor}")
    if rank not in {r.rank for r in ets.ranks}:
        _absent(rank, ets)
    out = []
    for r in ets.ranks:
        if r.rank != rank:
            out.append(r)
            continue
        out.append(_scaled(r, [factor if c else 1.0 for c in _compute(r)]))
    return ets.with_ranks(out)


def slow_link(ets: EtSet, rank: int, factor: float) -> EtSet:
    """Communication touching `rank` `factor` times slower (on every member)."""
    if factor <= 0:
        raise ConfigError(f"--slow-link factor must be positive, not {factor}")
    if rank not in {r.rank for r in ets.ranks}:
        _absent(rank, ets)
    groups, world = process_groups(ets), ets.world_size
    out = []
    for r in ets.ranks:
        factors = []
        for n in r.nodes:
            if n.type == pb.COMM_COLL_NODE:
                hit = rank in members_of(n, groups, world)
            elif n.type in (pb.COMM_SEND_NODE, pb.COMM_RECV_NODE):
                peers = {r.rank, nd.int_attr(n, "comm_src"), nd.int_attr(n, "comm_dst")}
                hit = rank in peers
            else:
                hit = False
            factors.append(factor if hit else 1.0)
        out.append(_scaled(r, factors))
    return ets.with_ranks(out)


def jitter(ets: EtSet, sigma: float, seed: int = 0) -> EtSet:
    """Log-normal jitter of spread `sigma` (mean 1) on every compute node."""
    if sigma < 0:
        raise ConfigError(f"--jitter must be >= 0, not {sigma}")
    rng = np.random.default_rng(seed)
    out = []
    for r in ets.ranks:
        mask = _compute(r)
        draws = rng.lognormal(-sigma * sigma / 2, sigma, len(mask)) if sigma else np.ones(len(mask))
        out.append(_scaled(r, [float(d) if c else 1.0 for c, d in zip(mask, draws, strict=True)]))
    return ets.with_ranks(out)


def _absent(rank: int, ets: EtSet) -> None:
    have = [r.rank for r in ets.ranks]
    raise ConfigError(f"rank {rank} is not in the trace (ranks {have[0]}..{have[-1]})")
