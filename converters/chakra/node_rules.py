"""The per-node and per-file rules of the validator: fields, types, ranges, metadata.

Each rule looks at one node (or a file's metadata) and appends `Problem`s; the graph and
cross-rank rules stay in `validate`. What a reader would silently misread is an error
(an attribute in the wrong value field, a negative size or duration, a node type no
reader knows, a peer rank outside the job); what is merely unusual is a warning.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

from lumos.converters.chakra.attrs import STANDARD_FIELDS, attr_field, attr_value
from lumos.converters.chakra.conventions import parse_process_groups
from lumos.proto import pb

COMM_TYPES = set(pb.CollectiveCommType.values())
NODE_TYPES = set(pb.NodeType.values())
P2P_TYPES = (pb.COMM_SEND_NODE, pb.COMM_RECV_NODE)
#: Chakra schema versions of GlobalMetadata.version that readers know.
KNOWN_VERSIONS = frozenset({"0.0.4", "0.0.3", "0.0.2", "0.0.1", "1.0.0", "1.0.1", "1.1.0"})
#: Our own attributes whose value field is fixed (conventions.NODE_ATTRS).
OWN_FIELDS = {
    "dur_ns": "int64_val",
    "start_ns": "int64_val",
    "gap_ns": "int64_val",
    "comm_dur_ns": "int64_val",
    "copy_after_ns": "int64_val",
    "pg_ranks": "int64_list",
}
#: Attributes that hold a size or time and must not be negative.
NON_NEGATIVE = (
    "comm_size",
    "dur_ns",
    "gap_ns",
    "comm_dur_ns",
    "copy_after_ns",
    "num_ops",
    "tensor_size",
)


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


def check_attrs(node: pb.Node, path: str, out: list[Problem]) -> dict[str, object]:
    """Attributes in the value field readers expect, sizes and times not negative."""
    values: dict[str, object] = {}
    for attr in node.attr:
        which = attr_field(attr)
        value = attr_value(attr)
        values[attr.name] = value
        want = STANDARD_FIELDS.get(attr.name) or OWN_FIELDS.get(attr.name)
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
        elif attr.name in NON_NEGATIVE and isinstance(value, (int, float)) and value < 0:
            out.append(
                Problem(
                    "negative",
                    Severity.ERROR,
                    path,
                    f"attribute {attr.name!r} is negative ({value})",
                    node.id,
                    node.name,
                )
            )
    if node.type not in NODE_TYPES:
        out.append(
            Problem(
                "node-type-unknown",
                Severity.ERROR,
                path,
                f"node type {node.type} is not a Chakra NodeType (readers drop or reject it)",
                node.id,
                node.name,
            )
        )
    return values


def check_comm(
    node: pb.Node, attrs: dict[str, object], path: str, world: int | None, out: list[Problem]
) -> None:
    """What a simulator needs of a communication node; peers inside the job."""

    def bad(code: str, msg: str) -> None:
        out.append(Problem(code, Severity.ERROR, path, msg, node.id, node.name))

    if attrs.get("is_cpu_op") is True:
        bad("comm-cpu", "communication node has is_cpu_op=true (ASTRA-sim rejects it)")
    if node.type == pb.COMM_COLL_NODE:
        comm_type = attrs.get("comm_type")
        if comm_type is None:
            bad("comm-type-missing", "collective without comm_type")
        elif not isinstance(comm_type, int) or comm_type not in COMM_TYPES:
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
    for key in ("comm_src", "comm_dst"):
        peer = attrs.get(key)
        if isinstance(peer, int) and (peer < 0 or (world is not None and peer >= world)):
            bad("p2p-peer-unknown", f"{key} {peer} is not a rank of this {world}-rank job")
    members = attrs.get("pg_ranks")
    if isinstance(members, list) and world is not None:
        outside = [r for r in members if not 0 <= r < world]
        if outside:
            bad("pg-ranks-unknown", f"pg_ranks lists {outside[:5]}, not ranks of the job")


def check_metadata(meta: pb.GlobalMetadata, path: str, out: list[Problem]) -> dict[str, Any]:
    """The file's schema version and `process_groups` (JSON {name: [ranks]}).

    Returns the process groups (empty if absent or malformed).
    """
    if meta.version and meta.version not in KNOWN_VERSIONS:
        out.append(
            Problem(
                "version-unknown",
                Severity.WARNING,
                path,
                f"schema version {meta.version!r} is not one readers know "
                f"({', '.join(sorted(KNOWN_VERSIONS))})",
            )
        )
    groups: dict[str, Any] = {}
    for attr in meta.attr:
        if attr.name != "process_groups":
            continue
        value, reason = parse_process_groups(attr_value(attr) or "")
        if reason is not None:
            out.append(
                Problem(
                    "process-groups-malformed",
                    Severity.ERROR,
                    path,
                    f"metadata process_groups {reason}: {str(attr_value(attr))[:80]!r}",
                )
            )
        else:
            groups = value
    return groups
