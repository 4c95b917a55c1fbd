"""Validation of Chakra ETs: the rules ASTRA-sim and mlc-chakra rely on, checked once.

Per file: unique ids, every dependency resolvable in the same file, no cycles, no
all-default node (its empty frame ends the file for the reference reader), standard
attributes in the value fields other tools read, communication nodes that carry what a
simulator needs. Across the ranks of one trace: every process group's members issue the
same collectives in the same order with the same sizes. Each problem names the file,
the node id and the node name, so it can be found and fixed.
"""

from __future__ import annotations

import enum
from array import array
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from lumos.converters.chakra.attrs import STANDARD_FIELDS, attr_field, attr_value
from lumos.converters.chakra.dag import blocked_nodes, one_cycle
from lumos.converters.chakra.files import EtSource
from lumos.errors import TraceFormatError
from lumos.proto import pb

COMM_TYPES = set(pb.CollectiveCommType.values())
P2P_TYPES = (pb.COMM_SEND_NODE, pb.COMM_RECV_NODE)
#: Collective signature as compared across ranks: (comm_type, comm_size).
Signature = tuple[int, int | None]


class Severity(enum.Enum):
    ERROR = "error"
    WARNING = "warning"


@dataclass(frozen=True, slots=True)
class Problem:
    """One rule broken by one node (or file)."""

    code: str
    severity: Severity
    path: str
    message: str
    node_id: int | None = None
    node_name: str | None = None

    def __str__(self) -> str:
        where = "" if self.node_id is None else f" node {self.node_id} {self.node_name!r}:"
        return f"{self.path}:{where} {self.message} [{self.code}]"


@dataclass(slots=True)
class FileCheck:
    """What validating one rank's file found."""

    source: EtSource
    nodes: int = 0
    problems: list[Problem] = field(default_factory=list)
    #: pg_name -> the collectives this rank issued in that group, in file order.
    collectives: dict[str, list[tuple[int, str, Signature]]] = field(default_factory=dict)


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


def _check_attrs(node: pb.Node, path: str, out: list[Problem]) -> dict[str, object]:
    values: dict[str, object] = {}
    for attr in node.attr:
        which = attr_field(attr)
        values[attr.name] = attr_value(attr)
        want = STANDARD_FIELDS.get(attr.name)
        if want is not None and which is not None and which != want:
            out.append(
                Problem(
                    "attr-type",
                    Severity.ERROR,
                    path,
                    f"attribute {attr.name!r} is {which}; readers expect {want}"
                    + (" (ASTRA-sim reads it as 0)" if attr.name == "comm_size" else ""),
                    node.id,
                    node.name,
                )
            )
    return values


def _check_comm(node: pb.Node, attrs: dict[str, object], path: str, out: list[Problem]) -> None:
    def bad(code: str, msg: str) -> None:
        out.append(Problem(code, Severity.ERROR, path, msg, node.id, node.name))

    if attrs.get("is_cpu_op") is True:
        bad("comm-cpu", "communication node has is_cpu_op=true (ASTRA-sim rejects it)")
    if node.type == pb.COMM_COLL_NODE:
        comm_type = attrs.get("comm_type")
        if comm_type is None:
            bad("comm-type-missing", "collective without comm_type")
        elif comm_type not in COMM_TYPES:
            bad("comm-type-unknown", f"comm_type {comm_type} is not a CollectiveCommType")
    if "comm_size" not in attrs:
        bad("comm-size-missing", "communication node without comm_size (bytes)")
    # A send names its destination, a receive its source (the other end is this rank).
    if node.type == pb.COMM_SEND_NODE and "comm_dst" not in attrs:
        bad("p2p-peer-missing", "send without comm_dst")
    if node.type == pb.COMM_RECV_NODE and "comm_src" not in attrs:
        bad("p2p-peer-missing", "receive without comm_src")
    if node.type in P2P_TYPES and "comm_tag" not in attrs:
        bad("p2p-peer-missing", "send/recv without comm_tag (ASTRA-sim matches on it)")


def check_file(source: EtSource) -> FileCheck:
    """Validate one rank's file, streaming its nodes once."""
    check = FileCheck(source)
    path = source.path
    problems = check.problems
    ids = array("Q")
    dep_from = array("Q")  # node index
    dep_to = array("Q")  # dependency id
    names: list[str] = []
    with source.open() as reader:
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
            attrs = _check_attrs(node, path, problems)
            if node.type in (pb.COMM_COLL_NODE, *P2P_TYPES):
                _check_comm(node, attrs, path, problems)
            if node.type == pb.COMM_COLL_NODE:
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
    return check


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


def validate_sources(sources: Iterable[EtSource]) -> ValidationReport:
    """Validate every rank's file, then the cross-rank collective sequences."""
    files = []
    for source in sources:
        try:
            files.append(check_file(source))
        except TraceFormatError as exc:
            fc = FileCheck(source)
            fc.problems.append(Problem("unreadable", Severity.ERROR, source.path, str(exc)))
            files.append(fc)
    return ValidationReport(files, check_cross_rank(files))
