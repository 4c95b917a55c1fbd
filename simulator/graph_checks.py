"""Load-time checks of one rank's graph: no cycles (the scheduler relies on it), and the
signs that a foreign file was cut short (`cut_short_notes`, a note, not an error).

(Dangling dependencies and duplicate ids are refused while the graph is built; collective
sequences and send/recv pairing are checked across ranks in `rendezvous`.) Nodes listed
after all their dependencies — what every producer we know writes — pass in one
vectorised comparison. Otherwise every cycle has a dependency on a later node, and lies
within the index windows those dependencies span (together they form one interval around
the cycle): a topological sort of just those windows clears the usual case (a converted
trace's stream syncs wait for a copy listed after them: 800 dependencies in a 405k-node
rank, windows of a few nodes each); only if it finds a cycle does the whole rank's sort
name the nodes on and behind it.
"""

from __future__ import annotations

import numpy as np

from lumos.converters.chakra.dag import blocked_nodes
from lumos.converters.chakra.truncation import cut_signs, is_step_name
from lumos.simulator.distinct import distinct
from lumos.simulator.graph import RankGraph

MAX_LISTED = 5


def cycle_problems(g: RankGraph) -> list[str]:
    """One problem per rank with a cycle, naming some nodes on (or behind) it."""
    n = len(g)
    owner = np.repeat(np.arange(n), np.diff(g.dep_ptr))
    later = g.dep_idx >= owner
    if not later.any() or not _windows_cycle(n, g.dep_idx.astype(np.int64), owner, later):
        return []
    blocked = blocked_nodes(n, g.dep_idx.astype(np.int64), owner)
    if not any(blocked):
        return []
    stuck = [i for i in range(n) if blocked[i]]
    names = ", ".join(g.where(i) for i in stuck[:MAX_LISTED])
    return [f"rank {g.rank}: dependency cycle among {len(stuck)} nodes, e.g. {names}"]


def _windows_cycle(n: int, before: np.ndarray, after: np.ndarray, later: np.ndarray) -> bool:
    """Whether the nodes between each `later` dependency's two ends hold a cycle."""
    edge = np.bincount(after[later], minlength=n + 1) - np.bincount(
        before[later] + 1, minlength=n + 1
    )
    inside = np.cumsum(edge[:n]) > 0
    keep = inside[before] & inside[after]
    index = np.cumsum(inside) - 1
    return any(blocked_nodes(int(inside.sum()), index[before[keep]], index[after[keep]]))


def drop_forward_deps(g: RankGraph) -> int:
    """Remove dependencies on nodes with a later (or equal) id, in place; how many.

    What is left points only backwards, so it is acyclic.
    """
    owner = np.repeat(np.arange(len(g)), np.diff(g.dep_ptr))
    keep = g.dep_idx < owner
    g.dep_idx = g.dep_idx[keep]
    g.dep_ptr = np.concatenate(([0], np.cumsum(np.bincount(owner[keep], minlength=len(g)))))
    return int((~keep).sum())


def cut_short_notes(g: RankGraph) -> list[str]:
    """Why a foreign rank file (no `node_count`) looks cut short at a frame boundary, one
    note per sign (`converters.chakra.truncation`); none for files that state a count."""
    if g.node_count is not None or not len(g):
        return []
    # the names the nodes use, not the whole table (a generated step shares one table of
    # every rank's names: 400,000 for 16,000 layers, read once per rank was 36 s at PP 250)
    used = distinct(g.name_idx).tolist()
    step_names = {k: g.names[k] for k in used if is_step_name(g.names[k])}
    steps = {
        int(p): step_names[int(g.name_idx[p])]
        for p in np.flatnonzero(np.isin(g.name_idx, list(step_names)))
    }
    missing = np.zeros(0, np.int64)  # dangling dependencies stop the load before this
    where = g.source or f"rank {g.rank}"
    return [f"{where}: {sign}" for sign in cut_signs(g.ids, steps, g.start_ns, g.dur_ns, missing)]
