"""The unit every what-if edit works on: all ranks of a trace as in-memory Chakra ETs.

An `EtSet` holds, per rank, the ET's metadata and its nodes (protobuf objects, in id
order). Edits never modify an `EtSet`: they build a new one (`with_ranks`), so the base
trace stays usable for the side-by-side comparison. From here a set is written back as
`<prefix>.<rank>.et` files, turned into the simulator's graphs, or simulated.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from lumos.converters.chakra import conventions as cv
from lumos.converters.chakra.attrs import get_attr, set_attr
from lumos.converters.chakra.files import find_et_sources
from lumos.converters.chakra.set_output import rank_set_output
from lumos.converters.chakra.stream import EtReader, with_node_count, write_et
from lumos.errors import LumosError, TraceFormatError
from lumos.limits import MAX_NODES, MAX_RANK_NODES
from lumos.proto import pb
from lumos.simulator.et_columns import check_stated
from lumos.simulator.graph import RankGraph
from lumos.simulator.graph_build import graph_from_et
from lumos.simulator.load import resolve_groups
from lumos.simulator.result import SimResult
from lumos.simulator.run import SimOptions, simulate


@dataclass(frozen=True, slots=True)
class RankEt:
    """One rank's ET: its global rank, metadata and nodes (ascending ids)."""

    rank: int
    metadata: pb.GlobalMetadata
    nodes: tuple[pb.Node, ...]


@dataclass(frozen=True, slots=True)
class EtSet:
    """Every rank of a trace, sorted by rank; `source` names where it was read from."""

    ranks: tuple[RankEt, ...]
    source: str = ""

    @property
    def world_size(self) -> int:
        return len(self.ranks)

    def rank(self, rank: int) -> RankEt:
        """The ET of one global rank. Raises KeyError when it is not in the set."""
        for r in self.ranks:
            if r.rank == rank:
                return r
        raise KeyError(rank)

    def with_ranks(self, ranks: Sequence[RankEt]) -> EtSet:
        """A new set with these ranks (metadata `rank`/`world_size` made consistent)."""
        fixed = []
        for r in sorted(ranks, key=lambda r: r.rank):
            meta = pb.GlobalMetadata()
            meta.CopyFrom(r.metadata)
            set_attr(meta, cv.META_RANK, r.rank, "int64_val")
            set_attr(meta, cv.META_WORLD_SIZE, len(ranks), "int64_val")
            fixed.append(replace(r, metadata=meta))
        return EtSet(tuple(fixed), self.source)


def load_etset(target: str | Path) -> EtSet:
    """Read every `<prefix>.<rank>.et` of a folder (or prefix, file, tar) into memory.

    Raises TraceFormatError when nothing is found or a file cannot be read.
    """
    sources = find_et_sources(target)
    if not sources:
        raise TraceFormatError(str(target), "no <prefix>.<rank>.et files found")
    ranks: list[RankEt] = []
    held = 0  # nodes of the ranks read so far
    for source in sources:
        with source.open() as reader:
            check_stated(reader.node_count, source.path)  # before a node is parsed
            if reader.node_count is not None:
                _check_step(held + reader.node_count, source.path)
            nodes = _nodes(reader, source.path, held)
        held += len(nodes)
        ranks.append(RankEt(source.rank, reader.metadata, nodes))
    return EtSet(tuple(sorted(ranks, key=lambda r: r.rank)), str(target))


def _check_step(count: int, path: str) -> None:
    MAX_NODES.check(count, f"{path}: nodes of the traced step up to this rank, held whole to edit")


def _nodes(reader: EtReader, path: str, held: int) -> tuple[pb.Node, ...]:
    """Every node of `reader`, refusing the rank past `MAX_RANK_NODES`, or the step past
    `MAX_NODES` with the `held` nodes of the ranks before, as it is read: a what-if holds
    every rank's nodes as protobuf messages (~1 KB a node, three times `simulate`'s peak:
    scripts/whatif_memory.py), and a 9-million-node file took every byte it could."""
    limit = min(MAX_RANK_NODES.value, MAX_NODES.value - held)
    nodes = []
    for node in reader:
        nodes.append(node)
        if len(nodes) > limit:
            MAX_RANK_NODES.check(len(nodes), f"{path}: nodes of one rank's ET")
            _check_step(held + len(nodes), path)
    return tuple(nodes)


def rank_files(ets: EtSet) -> dict[int, str]:
    """Each rank's file, when the set was read from files (else none)."""
    if not ets.source:
        return {}
    try:
        return {s.rank: s.path for s in find_et_sources(ets.source)}
    except LumosError:
        return {}


def write_etset(
    ets: EtSet, out_dir: str | Path, prefix: str = "whatif", *, force: bool = False
) -> list[Path]:
    """Write `<out_dir>/<prefix>.<rank>.et` for every rank, all at once; return the paths.

    Each file states its rank, world size, node count, a fresh `set_id` and lumos as its
    producer, so the set is checked like a converted one. Raises LumosError if `out_dir`
    already holds `<prefix>.*.et` files and `force` is off (or lumos did not write them),
    OutputError if the set cannot be written (`converters.chakra.set_output`).
    """
    from lumos import __version__

    set_id = "whatif-" + secrets.token_hex(6)
    names = [f"{prefix}.{r.rank}.et" for r in ets.ranks]
    with rank_set_output(out_dir, prefix, force=force) as stage:
        for r, name in zip(ets.ranks, names, strict=True):
            meta = with_node_count(r.metadata, len(r.nodes))
            set_attr(meta, cv.META_SET_ID, set_id, "string_val")
            set_attr(meta, cv.META_PRODUCER, f"lumos {__version__} whatif", "string_val")
            write_et(stage / name, meta, r.nodes)
    return [Path(out_dir) / name for name in names]


def process_groups(ets: EtSet) -> dict[str, tuple[int, ...]]:
    """The union of every rank's metadata `process_groups` ({pg_name: ranks})."""
    groups: dict[str, tuple[int, ...]] = {}
    for r in ets.ranks:
        text = get_attr(r.metadata, cv.META_PROCESS_GROUPS)
        if text:
            groups.update(cv.parse_process_groups(text)[0])  # malformed: none (validate says)
    return groups


def to_graphs(ets: EtSet) -> list[RankGraph]:
    """The simulator's graphs of every rank, with process groups resolved."""
    graphs = [
        graph_from_et(r.rank, r.metadata, r.nodes, f"{ets.source}#{r.rank}") for r in ets.ranks
    ]
    resolve_groups(graphs)
    return graphs


def simulate_etset(ets: EtSet, options: SimOptions | None = None) -> SimResult:
    """Simulate every rank of the set (replay by default: the ETs' own durations; a
    stream's first op held past its launch is held relative to when it can start)."""
    return simulate(to_graphs(ets), options or SimOptions(align_ranks=False, relative_holds=True))
