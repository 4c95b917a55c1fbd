"""Validation of Chakra ETs: the rules ASTRA-sim and mlc-chakra rely on, checked once.

Per file: unique ids, every dependency resolvable in the same file, no cycles, no
all-default node (its empty frame ends the file for the reference reader), standard
attributes in the value fields other tools read, communication nodes that carry what a
simulator needs; a foreign file (no `node_count`) that looks cut short is a warning
(`truncation`). Across the ranks of one trace: every process group's members issue the
same collectives in the same order with the same sizes. Each problem names the file,
the node id and the node name, so it can be found and fixed.
"""

from __future__ import annotations

from array import array
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from lumos.converters.chakra import conventions as cv
from lumos.converters.chakra.dag import blocked_nodes, one_cycle
from lumos.converters.chakra.files import EtSource
from lumos.converters.chakra.node_rules import (
    P2P_TYPES,
    Problem,
    Severity,
    check_attrs,
    check_comm,
    check_metadata,
)
from lumos.converters.chakra.rankset import RankHeader, header_of, rank_set_problems
from lumos.converters.chakra.truncation import cut_signs, is_step_name
from lumos.errors import LumosError
from lumos.proto import pb

#: Collective signature as compared across ranks: (comm_type, comm_size).
Signature = tuple[int, int | None]

__all__ = ["FileCheck", "Problem", "Severity", "ValidationReport", "check_file", "validate_sources"]


@dataclass(slots=True)
class FileCheck:
    """What validating one rank's file found."""

    source: EtSource
    nodes: int = 0
    problems: list[Problem] = field(default_factory=list)
    #: pg_name -> the collectives this rank issued in that group, in file order.
    collectives: dict[str, list[tuple[int, str, Signature]]] = field(default_factory=dict)
    header: RankHeader | None = None
    groups: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class ValidationReport:
    """Problems of every file and the cross-rank checks."""

    files: list[FileCheck]
    cross_rank: list[Problem]

    @property
    def problems(self) -> list[Problem]:
        return [p for f in self.files for p in f.problems] + self.cross_rank

    @property
    def errors(self) -> list[Problem]:
        return [p for p in self.problems if p.severity is Severity.ERROR]


def check_file(source: EtSource, world: int | None = None) -> FileCheck:
    """Validate one rank's file, streaming its nodes once.

    `world` (the job's rank count) bounds peer ranks when the metadata does not say it.
    """
    check = FileCheck(source)
    path = source.path
    problems = check.problems
    ids = array("Q")
    dep_from = array("Q")  # node index
    dep_to = array("Q")  # dependency id
    names: list[str] = []
    timing = _Timing()
    with source.open() as reader:
        check.header = header_of(source, reader.metadata)
        check.groups = check_metadata(reader.metadata, path, problems)
        counted = any(a.name == "node_count" for a in reader.metadata.attr)
        world = check.header.world_size or world
        for index, node in enumerate(reader):
            if node.ByteSize() == 0:
                problems.append(
                    Problem(
                        "empty-node",
                        Severity.ERROR,
                        path,
                        f"node #{index} is all-default: the reference reader stops the file here",
                    )
                )
            ids.append(node.id)
            names.append(node.name)
            for dep in node.data_deps:
                dep_from.append(index)
                dep_to.append(dep)
            for dep in node.ctrl_deps:
                dep_from.append(index)
                dep_to.append(dep)
            attrs = check_attrs(node, path, problems)
            if not counted:
                timing.add(index, node, attrs)
            if node.type in (pb.COMM_COLL_NODE, *P2P_TYPES):
                check_comm(node, attrs, path, world, problems)
            if node.type == pb.COMM_COLL_NODE and not _local(attrs):
                group = str(attrs.get("pg_name", "") or "")
                size = attrs.get("comm_size")
                comm_type = attrs.get("comm_type")
                sig = (
                    comm_type if isinstance(comm_type, int) else -1,
                    size if isinstance(size, int) else None,
                )
                check.collectives.setdefault(group, []).append((node.id, node.name, sig))
    check.nodes = len(ids)
    if check.nodes == 0:
        problems.append(Problem("no-nodes", Severity.ERROR, path, "file has no nodes"))
        return check
    _check_graph(np.frombuffer(ids, dtype=np.uint64), dep_from, dep_to, names, path, problems)
    if not counted:  # a foreign file: only its graph can say it was cut short
        node_ids = np.frombuffer(ids, dtype=np.uint64).astype(np.int64)
        targets = np.frombuffer(dep_to, dtype=np.uint64).astype(np.int64)
        missing = np.setdiff1d(targets, node_ids)
        start, dur = timing.arrays()
        for sign in cut_signs(node_ids, timing.steps, start, dur, missing):
            problems.append(Problem("cut-short", Severity.WARNING, path, sign))
    return check


class _Timing:
    """Recorded start and duration (ns) of every node, and the ProfilerStep nodes."""

    def __init__(self) -> None:
        self.start = array("q")
        self.dur = array("q")
        self.steps: dict[int, str] = {}

    def add(self, index: int, node: pb.Node, attrs: dict[str, object]) -> None:
        start, dur = attrs.get("start_ns"), attrs.get("dur_ns")
        if not isinstance(start, int) or isinstance(start, bool):
            start = node.start_time_micros * 1000 if node.start_time_micros else -1
        if not isinstance(dur, int) or isinstance(dur, bool):
            dur = node.duration_micros * 1000
        self.start.append(max(min(start, 1 << 62), -1))
        self.dur.append(max(min(dur, 1 << 62), -1))
        if is_step_name(node.name):
            self.steps[index] = node.name

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        return np.frombuffer(self.start, np.int64), np.frombuffer(self.dur, np.int64)


def _check_graph(
    ids: np.ndarray, dep_from: array, dep_to: array, names: list[str], path: str, out: list[Problem]
) -> None:
    order = np.argsort(ids, kind="stable")
    sorted_ids = ids[order]
    dup = np.flatnonzero(sorted_ids[1:] == sorted_ids[:-1])
    for d in dup[:50]:
        i = int(order[d + 1])
        out.append(
            Problem(
                "dup-id",
                Severity.ERROR,
                path,
                "id used by more than one node",
                int(ids[i]),
                names[i],
            )
        )
    if len(dup):
        return  # edges are ambiguous; cycles cannot be checked meaningfully
    src = np.frombuffer(dep_from, dtype=np.uint64).astype(np.int64)
    tgt_ids = np.frombuffer(dep_to, dtype=np.uint64)
    pos = np.searchsorted(sorted_ids, tgt_ids)
    pos_clipped = np.minimum(pos, len(sorted_ids) - 1)
    found = sorted_ids[pos_clipped] == tgt_ids
    for k in np.flatnonzero(~found)[:50]:
        i = int(src[k])
        out.append(
            Problem(
                "dangling-dep",
                Severity.ERROR,
                path,
                f"depends on id {int(tgt_ids[k])}, which is not in the file",
                int(ids[i]),
                names[i],
            )
        )
    missing = int((~found).sum())
    if missing > 50:
        out.append(
            Problem(
                "dangling-dep",
                Severity.ERROR,
                path,
                f"... {missing - 50} more dangling dependencies",
            )
        )
    dst = order[pos_clipped[found]].astype(np.int64)  # index of the dependency node
    _check_cycles(len(ids), dst, src[found], ids, names, path, out)


def _check_cycles(
    n: int,
    before: np.ndarray,
    after: np.ndarray,
    ids: np.ndarray,
    names: list[str],
    path: str,
    out: list[Problem],
) -> None:
    """Report one explicit cycle of the edges before[k] -> after[k], if any."""
    blocked_flags = blocked_nodes(n, before, after)
    if not any(blocked_flags):
        return
    cycle, core = one_cycle(n, before, after, blocked_flags)
    blocked = sum(blocked_flags)
    shown = " -> ".join(f"{int(ids[i])} {names[i]!r}" for i in cycle[:8])
    more = f" -> ... ({len(cycle)} nodes)" if len(cycle) > 8 else ""
    i0 = cycle[0]
    out.append(
        Problem(
            "cycle",
            Severity.ERROR,
            path,
            f"dependency cycle: {shown}{more} -> back to {int(ids[i0])}; {core} node(s) lie on "
            f"cycles and {blocked - core} more wait behind them, so none of them can ever run",
            int(ids[i0]),
            names[i0],
        )
    )


def _local(attrs: dict[str, Any]) -> bool:
    """A collective of a one-rank group (no `pg_name`, `pg_ranks` one rank: a generated
    expert-data-parallel group of one) involves no other rank: no cross-rank check."""
    ranks = attrs.get(cv.PG_RANKS)
    return not attrs.get("pg_name") and isinstance(ranks, list) and len(ranks) == 1


def _group_members(checks: Sequence[FileCheck]) -> dict[str, list[FileCheck]]:
    members: dict[str, list[FileCheck]] = defaultdict(list)
    everyone = list(checks)
    for check in checks:
        for group in check.collectives:
            if group not in ("", "0"):
                members[group].append(check)
    members[""] = everyone
    return members


def check_cross_rank(checks: Sequence[FileCheck]) -> list[Problem]:
    """Every member of a group must issue the same collectives in the same order."""
    out: list[Problem] = []
    if len(checks) < 2:
        return out
    for group, members in _group_members(checks).items():
        seqs = [
            m.collectives.get(group, []) + (m.collectives.get("0", []) if group == "" else [])
            for m in members
        ]
        ref, ref_check = seqs[0], members[0]
        label = f"group {group!r}" if group else "the all-ranks group"
        for seq, check in zip(seqs[1:], members[1:], strict=True):
            for k, (mine, theirs) in enumerate(zip(seq, ref, strict=False)):
                if mine[2] != theirs[2]:
                    out.append(
                        Problem(
                            "coll-mismatch",
                            Severity.ERROR,
                            check.source.path,
                            f"collective #{k} of {label} is (type, bytes)={mine[2]} but rank "
                            f"{ref_check.source.rank} issues {theirs[2]} ({theirs[1]!r})",
                            mine[0],
                            mine[1],
                        )
                    )
                    break
            else:
                if len(seq) != len(ref):
                    out.append(
                        Problem(
                            "coll-count",
                            Severity.ERROR,
                            check.source.path,
                            f"issues {len(seq)} collectives in {label}; rank "
                            f"{ref_check.source.rank} issues {len(ref)}",
                        )
                    )
    return out


def validate_sources(
    sources: Iterable[EtSource], *, allow_partial: bool = False
) -> ValidationReport:
    """Validate every rank's file, then the rank set and the cross-rank collective sequences.

    Missing ranks are errors unless `allow_partial` (then warnings).
    """
    files = []
    listed = list(sources)
    world = max((s.rank for s in listed), default=-1) + 1
    for source in listed:
        try:
            files.append(check_file(source, world))
        except LumosError as exc:
            fc = FileCheck(source)
            text = str(exc).removeprefix(f"{source.path}: ")  # the problem names the file
            fc.problems.append(Problem("unreadable", Severity.ERROR, source.path, text))
            files.append(fc)
    cross = _rank_set(files, allow_partial) + _same_members(files)
    return ValidationReport(files, cross + check_cross_rank(files))


def _rank_set(files: list[FileCheck], allow_partial: bool) -> list[Problem]:
    headers = [f.header or RankHeader(f.source, None, None, None) for f in files]
    errors, missing = rank_set_problems(headers)
    where = files[0].source.path if files else ""
    out = [Problem("rank-set", Severity.ERROR, where, e) for e in errors]
    severity = Severity.WARNING if allow_partial else Severity.ERROR
    return out + [Problem("rank-missing", severity, where, m) for m in missing]


def _some(names: list[str]) -> str:
    """At most 8 names, and how many more (a trace may declare a million groups)."""
    return f"{names[:8]}" + (f" and {len(names) - 8:,} more" if len(names) > 8 else "")


def _same_members(files: list[FileCheck]) -> list[Problem]:
    """Two process groups with the same members are two communicators, yet a simulator
    that matches collectives by members takes them for one (warning)."""
    by_members: dict[tuple[int, ...], set[str]] = defaultdict(set)
    for f in files:
        for name, ranks in f.groups.items():
            by_members[tuple(sorted(ranks))].add(name)
    return [
        Problem(
            "pg-same-members",
            Severity.WARNING,
            files[0].source.path,
            f"process groups {_some(sorted(names))} have the same members {list(members)[:8]}; "
            "their collectives are matched by group name here, by members in simulation",
        )
        for members, names in by_members.items()
        if len(names) > 1 and len(members) > 1
    ]
