"""Load-time checks of one rank's graph: no cycles (the scheduler relies on it), and notes
(not errors) for the signs that a foreign file was cut short (`cut_short_notes`), a schema
version no reader knows (`version_notes`) and a node longer than its whole measured step
(`overlong_notes`).

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

from collections.abc import Sequence

import numpy as np

from lumos.converters.chakra.dag import blocked_nodes
from lumos.converters.chakra.node_rules import KNOWN_VERSIONS
from lumos.converters.chakra.stream import ET_SCHEMA_VERSION
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


def version_notes(graphs: Sequence[RankGraph]) -> list[str]:
    """A note naming the rank files whose Chakra schema version no reader knows (read as
    the format lumos writes; `et validate` warns the same)."""
    unknown = [g for g in graphs if g.et_version and g.et_version not in KNOWN_VERSIONS]
    if not unknown:
        return []
    first = unknown[0]
    versions = sorted({g.et_version for g in unknown})
    more = f" and {len(unknown) - 1} more rank file(s)" if len(unknown) > 1 else ""
    return [
        f"{first.source or f'rank {first.rank}'}{more}: Chakra schema version "
        f"{', '.join(map(repr, versions))} is not one lumos knows "
        f"({', '.join(sorted(KNOWN_VERSIONS))}); read as {ET_SCHEMA_VERSION}, so a field "
        "that version changed would be misread"
    ]


def overlong_notes(g: RankGraph) -> list[str]:
    """A note naming the longest node of a rank whose recorded duration is longer than the
    rank's whole measured step (`measured_step_ns`), likely a unit slip or a clock jump.
    A note, not an error: a kernel launched late in a short CPU step may run past it (the
    GPU behind the CPU), so a long one is not proof of damage; the replay keeps it."""
    step = g.measured_step_ns
    if not step or step <= 0 or not len(g):
        return []
    dur = np.where(g.dur_ns >= 0, g.dur_ns, g.dur_us_ns)
    longer = np.flatnonzero(dur > step)
    if not len(longer):
        return []
    i = int(longer[np.argmax(dur[longer])])
    more = f" ({len(longer)} nodes in all)" if len(longer) > 1 else ""
    return [
        f"{g.source or f'rank {g.rank}'}: {g.where(i)} lasts {int(dur[i]):,} ns, longer than "
        f"the rank's whole measured step ({step:,} ns){more}: likely a unit slip or a clock "
        "jump in the trace; the simulated step is at least that long"
    ]
