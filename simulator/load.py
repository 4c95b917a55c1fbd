"""Loading every rank's ET into `RankGraph`s and resolving process-group membership.

A collective's members come, in order of precedence, from: its `pg_ranks` attribute; a
comm-group mapping the caller passes (ASTRA-sim's comm_group JSON, `{"1": [0, 1], ...}`);
the metadata `process_groups`; `""`/`"0"`/no `pg_name` = all ranks; and otherwise the set
of ranks whose ETs use that same `pg_name` (so ETs whose group ids are only labels, like
ASTRA-sim's 2-D examples, still pair correctly).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from lumos.converters.chakra.files import find_et_sources
from lumos.progress import report
from lumos.simulator.graph import COLL, RankGraph
from lumos.simulator.graph_checks import cycle_problems, drop_forward_deps
from lumos.simulator.read_ranks import read_sources

WORLD_LABELS = ("", "0")

log = logging.getLogger(__name__)


def load_graphs(
    target: str | Path,
    comm_groups: Mapping[str, Sequence[int]] | None = None,
    repair: bool = False,
    ranks: frozenset[int] | None = None,
) -> list[RankGraph]:
    """Read `<prefix>.<rank>.et` files (folder, prefix, file or tar) into graphs, by rank.

    Raises TraceFormatError for unreadable files, duplicate ids, or dangling dependencies.
    With `repair`, dangling dependencies are dropped, and a graph with a cycle loses its
    dependencies on later ids (producers list nodes in order, so a dependency on a later
    node is the suspect one — mlc-chakra's converter writes such kernel→op edges); both
    are logged as warnings. `ranks`: load only these ranks (an explicit subset; groups
    named only by "" / "0" still span the whole job).
    """
    graphs: list[RankGraph] = []
    sources = find_et_sources(target)
    job_size = max(s.rank for s in sources) + 1
    if ranks is not None:
        sources = [s for s in sources if s.rank in ranks]
    report("load", 0, len(sources), "ranks")
    for source, g in read_sources(sources, repair):
        log.info("rank %d: %d nodes from %s", source.rank, len(g), source.path)
        report("load", len(graphs) + 1, len(sources), "ranks")
        if g.dropped_deps:
            log.warning("%s: ignored %d dependencies on absent nodes", source.path, g.dropped_deps)
        if repair and cycle_problems(g):
            removed = drop_forward_deps(g)
            log.warning(
                "%s: broke cycles by ignoring %d dependencies on later nodes", source.path, removed
            )
        graphs.append(g)
    resolve_groups(graphs, comm_groups, job_size)
    return graphs


def _label_key(label: str) -> str:
    """ASTRA-sim reads pg_name as an integer id; "3.0" and "3" name the same group."""
    try:
        return str(int(float(label)))
    except ValueError:
        return label


def resolve_groups(
    graphs: Sequence[RankGraph],
    comm_groups: Mapping[str, Sequence[int]] | None = None,
    job_size: int = 0,
) -> None:
    """Fill `group`/`groups` of every collective node of every graph (in place).

    The world ("" / "0" groups) is the largest of the ranks' `world_size`, the ranks
    loaded and `job_size` (the rank files found, when only some are loaded).
    """
    world_size = max(
        [g.world_size or 0 for g in graphs]
        + [max((g.rank for g in graphs), default=-1) + 1, job_size]
    )
    world = tuple(range(world_size))
    explicit = {_label_key(k): tuple(int(r) for r in v) for k, v in (comm_groups or {}).items()}
    users: dict[str, set[int]] = {}
    for g in graphs:
        used = set(g.pg_label[(g.type == COLL) & (g.pg_label >= 0)].tolist())
        for label_idx in sorted(used):
            users.setdefault(g.pg_labels[label_idx], set()).add(g.rank)
    for g in graphs:
        interned: dict[tuple[int, ...], int] = {}
        groups: list[tuple[int, ...]] = []
        by_label: dict[int, tuple[int, ...]] = {}  # a label's members, once per rank
        for i in np.nonzero(g.type == COLL)[0].tolist():
            members = g.pg_ranks.get(i)
            if members is None:
                label_idx = int(g.pg_label[i])
                members = by_label.get(label_idx)
                if members is None:
                    label = g.pg_labels[label_idx] if label_idx >= 0 else ""
                    members = by_label[label_idx] = _members(label, explicit, g, users, world)
            gid = interned.get(members)
            if gid is None:
                gid = interned[members] = len(groups)
                groups.append(members)
            g.group[i] = gid
        g.groups = groups


def _members(
    label: str,
    explicit: dict[str, tuple[int, ...]],
    g: RankGraph,
    users: dict[str, set[int]],
    world: tuple[int, ...],
) -> tuple[int, ...]:
    key = _label_key(label)
    if key in explicit:
        return explicit[key]
    if label in g.process_groups:
        return tuple(int(r) for r in g.process_groups[label])
    if label in WORLD_LABELS:
        return world
    return tuple(sorted(users.get(label, {g.rank})))
