"""`lumos export astra-sim`: per-rank ETs + a hardware config → a bundle ASTRA-sim runs.

Resolves the trace's rank files, derives the network/system/memory configs (from our
hardware configs, or ASTRA-sim files the user gives), maps every rank's workload
(`astra_export`), assigns communicator-group ids (`astra_groups`), and writes the bundle
through the pre-flight (`astra_bundle`). Library entry point: `export_astra_sim`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lumos.converters.astra_sim.bundle import BundleFiles, write_bundle
from lumos.converters.astra_sim.config import AstraCommGroups, AstraNetworkConfig, AstraSystemConfig
from lumos.converters.astra_sim.config_files import (
    load_astra_network,
    load_astra_system,
    load_pg_ranks,
)
from lumos.converters.astra_sim.graph import build_rank_graph
from lumos.converters.astra_sim.groups import GroupTable
from lumos.converters.astra_sim.hw import astra_memory, astra_network, astra_system, one_dimensional
from lumos.converters.astra_sim.nodes import Fix, Kind, classify
from lumos.converters.astra_sim.p2p_window import Carried, carried_p2p
from lumos.converters.astra_sim.preflight import PreflightReport
from lumos.converters.astra_sim.readme import render_readme
from lumos.converters.astra_sim.run_script import BACKEND_BINARY, shell_command
from lumos.converters.astra_sim.workload import ExportOptions, RankExport, check_ranks, export_rank
from lumos.converters.chakra.attrs import make_attr
from lumos.converters.chakra.conventions import META_PRODUCER, META_RANK, META_WORLD_SIZE
from lumos.converters.chakra.files import EtSource, find_et_sources
from lumos.converters.chakra.stream import ET_SCHEMA_VERSION
from lumos.errors import ConfigError, ExportError
from lumos.proto import pb

_P2P_TYPES = (pb.COMM_SEND_NODE, pb.COMM_RECV_NODE)


@dataclass(frozen=True, slots=True)
class ExportRequest:
    """What to export where, on which hardware."""

    target: str
    out_dir: Path
    hw: str | None = None
    system_file: Path | None = None
    network_file: Path | None = None
    comm_groups_file: Path | None = None
    options: ExportOptions = field(default_factory=ExportOptions)
    force: bool = False
    #: analytical backend the bundle is for: congestion-unaware or congestion-aware (1-D).
    backend: str = "congestion-unaware"


@dataclass(slots=True)
class ExportSummary:
    """What an export wrote, mapped, dropped and repaired."""

    bundle: Path
    prefix: str
    ranks: int
    source_nodes: int
    kept: dict[str, int]
    dropped: dict[str, int]
    delays: int
    delay_ns: int
    fixes: list[Fix]
    notes: list[str]
    groups: dict[str, list[int]]
    preflight: PreflightReport
    network: AstraNetworkConfig
    system: AstraSystemConfig
    backend: str = "congestion-unaware"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary (`--json`)."""
        return {
            "bundle": str(self.bundle),
            "prefix": self.prefix,
            "ranks": self.ranks,
            "source_nodes": self.source_nodes,
            "exported_nodes": self.preflight.nodes,
            "kept": self.kept,
            "dropped": self.dropped,
            "cpu_gap_delays": {"nodes": self.delays, "total_ns": self.delay_ns},
            "fixes": [str(f) for f in self.fixes],
            "notes": self.notes,
            "comm_groups": self.groups,
            "network": self.network.to_dict(),
            "backend": self.backend,
            "run": shell_command(self.prefix),
        }


def export_astra_sim(request: ExportRequest) -> ExportSummary:
    """Write an ASTRA-sim bundle for a trace. Raises ExportError / ConfigError, writes nothing."""
    if request.backend not in BACKEND_BINARY:
        raise ConfigError(
            f"unknown ASTRA-sim backend {request.backend!r}; one of {', '.join(BACKEND_BINARY)}"
        )
    sources = find_et_sources(request.target)
    world = len(sources)
    network, system, config_notes = _configs(request, world)
    check_ranks([s.rank for s in sources], network.num_npus)
    groups = GroupTable(world)
    if request.comm_groups_file is not None:
        data = load_pg_ranks(request.comm_groups_file)  # checked: ConfigError naming it
        groups.load_id_file(data, str(request.comm_groups_file))
    carried = _cross_rank_inputs(sources, groups)
    exports: list[RankExport] = []
    prefix = sources[0].prefix

    def workloads() -> Iterator[tuple[pb.GlobalMetadata, list[pb.Node]]]:
        """Each rank mapped and handed to the writer, then dropped: one rank held at once.
        A refused rank stops the writing, not the mapping: every rank's problems are
        listed, then the export (and its staging folder) is refused."""
        problems: list[str] = []
        for source in sources:
            try:
                done = _export_one(source, groups, network.npus_count, request.options, carried)
            except ExportError as exc:
                problems.append(str(exc))
                continue
            if not problems:
                yield _metadata(done.rank, world), done.nodes
            done.nodes = []  # written: keep only the rank's summary
            exports.append(done)
        if problems:
            raise ExportError(
                f"cannot export {request.target} to ASTRA-sim ({len(problems)} of {world} "
                "ranks refused; nothing written):\n"
                + "\n".join(problems[:8])
                + (f"\n... and {len(problems) - 8} more ranks" if len(problems) > 8 else "")
            )

    files = BundleFiles(
        prefix=prefix,
        workloads=workloads(),
        system=system,
        network=network,
        memory=astra_memory(),
        comm_groups=lambda: AstraCommGroups(
            tuple(sorted((gid, members) for members, gid in groups.ids.items()))
        ),
        backend=request.backend,
    )
    note = carried.note()
    made: list[ExportSummary] = []  # summed once every rank is mapped, for the README

    def readme(report: PreflightReport) -> str:
        notes = config_notes + ([note] if note else [])
        made.append(_summary(request, prefix, exports, groups, network, system, notes))
        made[0].preflight = report
        return render_readme(made[0])

    report = write_bundle(request.out_dir, files, readme, force=request.force)
    made[0].preflight = report
    return made[0]


def _export_one(
    source: EtSource,
    groups: GroupTable,
    npus_count: Sequence[int],
    options: ExportOptions,
    carried: Carried,
) -> RankExport:
    """One rank read and mapped; its source nodes are dropped on return."""
    with source.open() as reader:
        nodes = list(reader)
    graph = build_rank_graph(source.rank, source.path, nodes)
    return export_rank(graph, groups, npus_count, options, carried.of(source.rank))


def _cross_rank_inputs(sources: Sequence[EtSource], groups: GroupTable) -> Carried:
    """What mapping one rank needs from the others, streamed rank by rank: the groups every
    file declares (metadata, PyTorch pg-init nodes) and the send/recv window edges."""
    windows: list[tuple[int, pb.GlobalMetadata | None, list[pb.Node]]] = []
    for source in sources:
        declared: list[pb.Node] = []
        p2p: list[pb.Node] = []
        with source.open() as reader:
            for node in reader:
                if node.type == pb.METADATA_NODE:
                    declared.append(node)
                elif node.type in _P2P_TYPES and classify(node) in (Kind.SEND, Kind.RECV):
                    p2p.append(node)
            groups.learn(reader.metadata, declared, source.path)
        windows.append((source.rank, reader.metadata, p2p))
    return carried_p2p(windows)


def _configs(
    request: ExportRequest, world: int
) -> tuple[AstraNetworkConfig, AstraSystemConfig, list[str]]:
    notes: list[str] = []
    spec = None
    if request.hw is not None:
        from lumos.hwconfigs import load_system

        spec = load_system(request.hw)
    if request.network_file is not None:
        network = load_astra_network(request.network_file)
        notes.append(f"network.yml copied from {request.network_file}")
    elif spec is not None:
        network = astra_network(spec, world)
        notes.append(f"network.yml derived from --hw {spec.name} ({spec.description})")
    else:
        raise ConfigError(
            "give --hw (a lumos hardware config) or --astra-sim-network (an ASTRA-sim file)"
        )
    if request.system_file is not None:
        system = load_astra_system(request.system_file)
        notes.append(f"system.json copied from {request.system_file}")
    elif spec is not None:
        system = astra_system(spec, network.num_dims)
        notes.append(f"system.json derived from --hw {spec.name}")
    else:
        raise ConfigError(
            "give --hw (a lumos hardware config) or --astra-sim-system (an ASTRA-sim file)"
        )
    if request.backend == "congestion-aware" and network.num_dims > 1:
        if request.network_file is not None:
            raise ConfigError(
                f"{request.network_file}: the congestion-aware backend accepts one-dimensional "
                f"networks only ('only support 1-dim topology'); this one has "
                f"{network.num_dims}; give a 1-D network or use --astra-backend "
                "congestion-unaware"
            )
        network, note = one_dimensional(network)
        notes.append(note)
        if request.system_file is None and spec is not None:
            system = astra_system(spec, 1)
        elif system.num_dims != 1:
            raise ConfigError(
                f"{request.system_file}: lists {system.num_dims} implementations per "
                "collective; the congestion-aware backend's 1-D network needs one"
            )
    return network, system, notes


def _metadata(rank: int, world: int) -> pb.GlobalMetadata:
    from lumos import __version__

    meta = pb.GlobalMetadata(version=ET_SCHEMA_VERSION)
    meta.attr.extend(
        [
            make_attr(META_RANK, rank),
            make_attr(META_WORLD_SIZE, world),
            make_attr(META_PRODUCER, f"lumos {__version__} export astra-sim"),
        ]
    )
    return meta


def _summary(
    request: ExportRequest,
    prefix: str,
    exports: list[RankExport],
    groups: GroupTable,
    network: AstraNetworkConfig,
    system: AstraSystemConfig,
    notes: list[str],
) -> ExportSummary:
    kinds: Counter[Kind] = Counter()
    for e in exports:
        kinds.update(e.source_kinds)
    chunks, splits = system.active_chunks_per_dimension, system.preferred_dataset_splits
    if chunks < splits:
        notes.append(
            f"active-chunks-per-dimension {chunks} < preferred-dataset-splits {splits}: chunks "
            "run back to back (safe on this one-dimensional network; deadlocks with more, #370)"
        )
    return ExportSummary(
        bundle=Path(request.out_dir),
        prefix=prefix,
        ranks=len(exports),
        source_nodes=sum(kinds.values()),
        kept={k.value: n for k, n in kinds.items() if k.kept},
        dropped={k.value: n for k, n in kinds.items() if not k.kept},
        delays=sum(e.delays for e in exports),
        delay_ns=sum(e.delay_ns for e in exports),
        fixes=[f for e in exports for f in e.fixes],
        notes=notes + groups.notes,
        groups=groups.to_json(),
        preflight=PreflightReport(prefix, len(exports)),
        network=network,
        system=system,
        backend=request.backend,
    )


__all__ = ["ExportError", "ExportRequest", "ExportSummary", "export_astra_sim"]
