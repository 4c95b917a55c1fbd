"""Communicator groups for ASTRA-sim: who is in each collective's group, and its id.

ASTRA-sim looks a collective's `pg_name` up in `comm_group.json` ({"<id>": [ranks]}) with
`std::stoi`; `""` and `"0"` mean all ranks, so id 0 is reserved. A trace names groups its
own way (PyTorch names, or ids of an input comm-group file), so the export resolves each
collective's member ranks, gives every distinct sub-group a fresh id ≥ 1 and writes
whole-world collectives without `pg_name` (ASTRA-sim then runs them over every network
dimension; a sub-group always runs as a one-dimensional ring).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import orjson

from lumos.converters.chakra.attrs import get_attr
from lumos.converters.chakra.conventions import (
    META_PROCESS_GROUPS,
    PG_RANKS,
    parse_process_groups,
)
from lumos.errors import ConfigError, ExportError
from lumos.proto import pb

_STOI = re.compile(r"^\s*([+-]?\d+)")
PG_INIT = "## process_group:init ##"


def stoi(text: str) -> int | None:
    """What C++ `std::stoi` reads from `text` (its leading integer), or None."""
    match = _STOI.match(text)
    return int(match[1]) if match else None


@dataclass(slots=True)
class GroupTable:
    """Known groups of a trace by name, and the ids the export assigns to sub-groups."""

    world: int
    by_name: dict[str, tuple[int, ...]] = field(default_factory=dict)
    #: from a user's comm-group file: ASTRA-sim id -> members.
    by_id: dict[int, tuple[int, ...]] = field(default_factory=dict)
    ids: dict[tuple[int, ...], int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def learn(self, metadata: pb.GlobalMetadata, nodes: Sequence[pb.Node], source: str) -> None:
        """Record the groups a rank's file declares (metadata attr, PyTorch pg-init node).

        Raises ExportError naming `source` if its `process_groups` is malformed.
        """
        declared = get_attr(metadata, META_PROCESS_GROUPS)
        if declared is not None and declared != "":
            groups, why = parse_process_groups(declared)
            if why is not None:
                raise ExportError(
                    f"{source}: metadata process_groups {why}: {str(declared)[:80]!r} "
                    "(`lumos et validate` lists every problem)"
                )
            for name, ranks in groups.items():
                self._name(name, ranks)
        for node in nodes:
            if node.type == pb.METADATA_NODE and node.name == PG_INIT and node.inputs.values:
                self._pg_init(node.inputs.values)

    def load_id_file(self, groups: Mapping[str, Sequence[int]], source: str) -> None:
        """Use an input comm-group file ({"id": [ranks]}) for numeric `pg_name`s."""
        for key, ranks in groups.items():
            gid = stoi(key)
            if gid is None:
                raise ConfigError(f"{source}: comm-group key {key!r} is not an integer")
            self.by_id[gid] = tuple(sorted(int(r) for r in ranks)) or tuple(range(self.world))
            if gid == 0:
                self.notes.append(
                    f'{source} defines group "0", an id ASTRA-sim reserves for all ranks '
                    '(pg_name "0" never reaches it; "0.0" does, via std::stoi); '
                    "the bundle renumbers every sub-group from 1"
                )

    def members(self, rank: int, node: pb.Node) -> tuple[int, ...]:
        """Member ranks of a collective, sorted. Raises ExportError if unknown."""
        listed = get_attr(node, PG_RANKS)
        pg_name = get_attr(node, "pg_name")
        pg = "" if pg_name is None else str(pg_name)
        if listed:
            found = tuple(sorted(int(r) for r in listed))
        elif pg in self.by_name:
            found = self.by_name[pg]
        elif pg in ("", "0"):
            found = tuple(range(self.world))
        elif (gid := stoi(pg)) is not None and gid in self.by_id:
            found = self.by_id[gid]
        else:
            raise ExportError(
                f"rank {rank} node {node.id} {node.name!r}: pg_name {pg!r} names no known "
                "group (no pg_ranks attribute, no process_groups metadata); pass the "
                "trace's comm-group file with --comm-groups"
            )
        if rank not in found:
            raise ExportError(
                f"rank {rank} node {node.id} {node.name!r}: rank {rank} is not a member of its "
                f"group {pg!r} {list(found)}; fix pg_name / pg_ranks"
            )
        bad = [r for r in found if not 0 <= r < self.world]
        if bad:
            raise ExportError(
                f"rank {rank} node {node.id} {node.name!r}: group {pg!r} names ranks {bad} "
                f"outside 0..{self.world - 1}"
            )
        return found

    def group_id(self, members: tuple[int, ...]) -> int | None:
        """Id of a sub-group (assigned on first use, from 1); None for all ranks."""
        if len(members) == self.world:
            return None
        if members not in self.ids:
            self.ids[members] = len(self.ids) + 1
        return self.ids[members]

    def to_json(self) -> dict[str, list[int]]:
        """comm_group.json content."""
        return {str(gid): list(members) for members, gid in self.ids.items()}

    def _name(self, name: str, ranks: Sequence[int]) -> None:
        members = tuple(sorted(int(r) for r in ranks)) or tuple(range(self.world))
        self.by_name.setdefault(name, members)

    def _pg_init(self, values: str) -> None:
        try:
            parsed = orjson.loads(values)
            if isinstance(parsed, list) and parsed and isinstance(parsed[0], str):
                parsed = orjson.loads(parsed[0])
        except ValueError:
            return
        for item in parsed if isinstance(parsed, list) else []:
            if isinstance(item, dict) and "pg_name" in item:
                ranks = item.get("ranks") or []
                if isinstance(ranks, list) and all(type(r) is int and r >= 0 for r in ranks):
                    self._name(str(item["pg_name"]), ranks)


def involved_dims(members: Sequence[int], npus_count: Sequence[int]) -> list[bool]:
    """Network dimensions a group spans: those where its ranks' digits differ.

    Dimension 0 is the innermost digit of a rank (ASTRA-sim's numbering).
    """
    spans = [False] * len(npus_count)
    first = members[0]
    for rank in members[1:]:
        a, b = first, rank
        for dim, size in enumerate(npus_count):
            if a % size != b % size:
                spans[dim] = True
            a //= size
            b //= size
    return spans
