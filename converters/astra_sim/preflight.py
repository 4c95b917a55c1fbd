"""Pre-flight of an ASTRA-sim bundle: load it as ASTRA-sim would, refuse what would fail.

Reads the bundle's own files (workload ETs, system JSON, network YAML, remote-memory and
comm-group JSON) and checks every rule whose breach makes ASTRA-sim stop, throw, hang or
report nothing (docs/export.md lists them), and, for a bundle lumos wrote, that every rank
file its manifest lists is there, whole (`manifest`). Every problem names the rank, node
id and name, and what to change; all problems are reported together in one ExportError.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from lumos.converters.astra_sim.config import AstraNetworkConfig, AstraSystemConfig, MemoryType
from lumos.converters.astra_sim.config_files import (
    load_astra_memory,
    load_astra_network,
    load_astra_system,
)
from lumos.converters.astra_sim.crossrank import (
    collective_sequences,
    find_hang,
    group_of,
    pair_point_to_point,
)
from lumos.converters.astra_sim.graph import RankGraph, build_rank_graph, topo_order
from lumos.converters.astra_sim.groups import involved_dims, stoi
from lumos.converters.astra_sim.manifest import manifest_problems, read_manifest
from lumos.converters.astra_sim.nodes import SIMULATED_COLLECTIVES
from lumos.converters.chakra.attrs import attr_field, get_attr
from lumos.converters.chakra.files import find_et_sources
from lumos.errors import ConfigError, ExportError, LumosError
from lumos.proto import pb

RUNNABLE = (pb.COMP_NODE, pb.COMM_COLL_NODE, pb.COMM_SEND_NODE, pb.COMM_RECV_NODE)
INT32_FIELDS = ("comm_src", "comm_dst", "comm_tag")
_COMM = (pb.COMM_COLL_NODE, pb.COMM_SEND_NODE, pb.COMM_RECV_NODE)


@dataclass(slots=True)
class PreflightReport:
    """What a bundle that passed holds."""

    prefix: str
    ranks: int
    nodes: int = 0
    compute: int = 0
    collectives: int = 0
    sends: int = 0
    recvs: int = 0
    groups: int = 0
    warnings: list[str] = field(default_factory=list)


def preflight_bundle(bundle: str | Path) -> PreflightReport:
    """Check a bundle folder. Raises ExportError listing every problem found."""
    root = Path(bundle)
    problems: list[str] = []
    network, system = _configs(root, problems)
    groups = _comm_groups(root / "comm_group.json", problems)
    report = check_workload(root / "workload", network, system, groups, problems, bundle=True)
    _raise(root, problems)
    report.groups = len(groups)
    return report


def preflight_workload(
    workload: str | Path,
    network: AstraNetworkConfig,
    system: AstraSystemConfig,
    groups: dict[int, tuple[int, ...]],
) -> PreflightReport:
    """The rules whose breach stops the real binary (a throw, a rank that never
    finishes, a 0-cycle run) on any workload: what lumos's astra mode refuses too.
    Raises ExportError listing every problem found."""
    problems: list[str] = []
    report = check_workload(workload, network, system, groups, problems, bundle=False)
    _raise(Path(workload), problems)
    return report


def _raise(root: Path, problems: list[str]) -> None:
    if problems:
        shown = "\n  ".join(problems[:25])
        more = f"\n  ... and {len(problems) - 25} more" if len(problems) > 25 else ""
        raise ExportError(
            f"pre-flight of {root} failed, ASTRA-sim would not run it: {len(problems)} "
            f"problem(s)\n  {shown}{more}"
        )


def check_workload(
    workload: str | Path,
    network: AstraNetworkConfig | None,
    system: AstraSystemConfig | None,
    groups: dict[int, tuple[int, ...]],
    problems: list[str],
    *,
    bundle: bool,
) -> PreflightReport:
    """Append to `problems` every rule the workload breaks; `bundle` adds the rules an
    export holds itself to (no CPU, metadata or memory nodes)."""
    try:
        sources = find_et_sources(workload)
    except LumosError as exc:
        raise ExportError(f"{workload}: {exc}") from None
    report = PreflightReport(sources[0].prefix, len(sources))
    if network is not None and network.num_npus != len(sources):
        problems.append(
            f"network.yml has {network.num_npus} NPUs but {Path(workload).name}/ has "
            f"{len(sources)} rank "
            "files (ASTRA-sim opens one per NPU)"
        )
    manifest = read_manifest(Path(workload).parent, problems)
    counts: dict[int, int] = {}
    graphs: list[RankGraph] = []  # slim: comm nodes whole, the rest id, name and type
    work = False
    for expected, source in enumerate(sources):
        if source.rank != expected and manifest is None:
            problems.append(f"{source.path}: rank file {expected} is missing before it")
            break
        try:
            with source.open() as reader:
                nodes = list(reader)
        except LumosError as exc:  # cut short (its node_count), bad framing
            problems.append(str(exc))
            continue
        counts[source.rank] = len(nodes)
        try:
            graph = build_rank_graph(source.rank, source.path, nodes)
            topo_order(graph, [(0, p) for p in range(len(nodes))])
        except ExportError as exc:
            problems.append(str(exc))
            continue
        _check_nodes(graph, network, system, groups, len(sources), problems, report, bundle)
        work = work or _has_work(graph, system)
        graphs.append(_slim(graph))
        del nodes, graph  # before the next rank is read
    if manifest is not None:
        problems += manifest_problems(manifest, Path(workload), report.prefix, counts)
    if len(graphs) == len(sources) and not problems:
        seqs, mismatch = collective_sequences(graphs, groups)
        pairs, unpaired = pair_point_to_point(graphs)
        problems += mismatch + unpaired
        hang = None if problems else find_hang(graphs, seqs, pairs)
        if hang:
            problems.append(hang)
        if not work:
            problems.append(
                "nothing to simulate: every compute node lasts 0 µs and no collective or "
                "send/recv moves a byte, so ASTRA-sim reports a 0-cycle run; export a trace "
                "with measured durations, or num_ops/tensor_size with roofline enabled"
            )
    return report


def _configs(
    root: Path, problems: list[str]
) -> tuple[AstraNetworkConfig | None, AstraSystemConfig | None]:
    network = system = None
    try:
        network = load_astra_network(root / "network.yml")
        system = load_astra_system(root / "system.json")
        memory = load_astra_memory(root / "memory.json")
    except ConfigError as exc:
        problems.append(str(exc))
        return network, system
    if memory.memory_type is not MemoryType.NO_MEMORY_EXPANSION:
        problems.append("memory.json: memory-type must be NO_MEMORY_EXPANSION for an export")
    if system.num_dims != network.num_dims:
        problems.append(
            f"system.json lists {system.num_dims} implementation(s) per collective but "
            f"network.yml has {network.num_dims} dimension(s); give one entry per dimension"
        )
    chunks, splits = system.active_chunks_per_dimension, system.preferred_dataset_splits
    if chunks < splits and network.num_dims > 1:
        problems.append(
            f"system.json: active-chunks-per-dimension {chunks} < preferred-dataset-splits "
            f"{splits} on a {network.num_dims}-dimensional network deadlocks ASTRA-sim "
            f"(issue #370); set active-chunks-per-dimension to {splits}"
        )
    return network, system


def _comm_groups(path: Path, problems: list[str]) -> dict[int, tuple[int, ...]]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        problems.append(f"{path}: cannot read: {exc}")
        return {}
    groups: dict[int, tuple[int, ...]] = {}
    for key, members in data.items():
        gid = stoi(key)
        if gid is None or gid < 1:
            problems.append(
                f"{path}: group id {key!r} is reserved or not an integer (ASTRA-sim treats "
                "pg_name '0' as all ranks); number groups from 1"
            )
            continue
        groups[gid] = tuple(sorted(int(r) for r in members))
    return groups


def _check_nodes(
    graph: RankGraph,
    network: AstraNetworkConfig | None,
    system: AstraSystemConfig | None,
    groups: dict[int, tuple[int, ...]],
    world: int,
    problems: list[str],
    report: PreflightReport,
    bundle: bool,
) -> None:
    if not graph.nodes:
        problems.append(f"{graph.path}: no nodes (ASTRA-sim needs at least one per rank)")
    roofline = system is not None and system.roofline_enabled
    for pos, node in enumerate(graph.nodes):
        where = graph.label(pos)
        report.nodes += 1
        if node.type in (pb.MEM_LOAD_NODE, pb.MEM_STORE_NODE) or (
            bundle and node.type not in RUNNABLE
        ):
            problems.append(
                f"{where}: {pb.NodeType.Name(node.type)} in an export breaks ASTRA-sim "
                "(memory nodes are fatal with NO_MEMORY_EXPANSION); re-export to drop it"
            )
            continue
        is_comm = node.type in (pb.COMM_COLL_NODE, pb.COMM_SEND_NODE, pb.COMM_RECV_NODE)
        if get_attr(node, "is_cpu_op") and (bundle or is_comm):
            problems.append(
                f"{where}: is_cpu_op=true (ASTRA-sim throws on a CPU comm node and CPU nodes "
                "skew its statistics); set is_cpu_op=false or drop the node"
            )
        if node.type == pb.COMP_NODE:
            report.compute += 1
            if roofline and not (get_attr(node, "tensor_size") and get_attr(node, "num_ops")):
                problems.append(
                    f"{where}: roofline is enabled but the node has no num_ops/tensor_size "
                    "(ASTRA-sim skips it in 0 ns); set both or disable roofline"
                )
            continue
        if is_comm:
            _check_comm(graph, pos, network, groups, world, problems, report, bundle)


def _check_comm(
    graph: RankGraph,
    pos: int,
    network: AstraNetworkConfig | None,
    groups: dict[int, tuple[int, ...]],
    world: int,
    problems: list[str],
    report: PreflightReport,
    bundle: bool,
) -> None:
    node, where = graph.nodes[pos], graph.label(pos)
    size_attr = next((a for a in node.attr if a.name == "comm_size"), None)
    size = get_attr(node, "comm_size")
    comm_type = get_attr(node, "comm_type")
    p2p = node.type != pb.COMM_COLL_NODE
    if size_attr is None:
        problems.append(
            f"{where}: no comm_size (ASTRA-sim reads it before anything else, so the rank never "
            "finishes: 'unreleased nodes', exit 0; a BROADCAST too); set comm_size (int64 "
            "bytes)"
        )
    elif attr_field(size_attr) != "int64_val":
        problems.append(
            f"{where}: comm_size stored as {attr_field(size_attr)} (readers that read int64 see "
            "0, issue #224); store it as int64_val"
        )
    elif not isinstance(size, int) or size < 0 or (p2p and size == 0):
        problems.append(
            f"{where}: comm_size={size!r}; a send/recv needs a positive size, a collective one "
            ">= 0 (int64 bytes)"
        )
    if node.type == pb.COMM_COLL_NODE:
        report.collectives += 1
        if comm_type not in SIMULATED_COLLECTIVES and comm_type != pb.BROADCAST:
            problems.append(
                f"{where}: comm_type {comm_type!r} is not one ASTRA-sim runs (ALL_REDUCE, "
                "ALL_GATHER, ALL_TO_ALL, REDUCE_SCATTER; BROADCAST by duration)"
            )
        _check_group(graph, pos, network, groups, world, problems, bundle)
        return
    is_send = node.type == pb.COMM_SEND_NODE
    report.sends += is_send
    report.recvs += not is_send
    own_name = "comm_src" if is_send else "comm_dst"
    for name in INT32_FIELDS:
        found = next((a for a in node.attr if a.name == name), None)
        if found is None and name == own_name:
            continue  # ASTRA-sim fills in the issuing rank
        if found is None or attr_field(found) != "int32_val":
            problems.append(f"{where}: {name} missing or not int32_val; ASTRA-sim needs it")
    own = get_attr(node, "comm_src" if is_send else "comm_dst")
    if own is not None and own != graph.rank:
        problems.append(
            f"{where}: {'send' if is_send else 'recv'} issued by rank {graph.rank} but names "
            f"rank {own} as its {'source' if is_send else 'destination'} (ASTRA-sim throws)"
        )


def _check_group(
    graph: RankGraph,
    pos: int,
    network: AstraNetworkConfig | None,
    groups: dict[int, tuple[int, ...]],
    world: int,
    problems: list[str],
    bundle: bool,
) -> None:
    node, where = graph.nodes[pos], graph.label(pos)
    name = str(get_attr(node, "pg_name", "") or "")
    if name not in ("", "0"):
        gid = stoi(name)
        if gid is None or gid not in groups:
            problems.append(
                f"{where}: pg_name {name!r} is not in comm_group.json (ASTRA-sim exits: "
                "'communicator group not found'); add the group or fix pg_name"
            )
            return
        if bundle and name != str(gid):  # runs (std::stoi), but an export writes the id
            problems.append(f"{where}: pg_name {name!r} is read as {gid} by ASTRA-sim; write {gid}")
    members = group_of(node, world, groups)
    if graph.rank not in members:
        problems.append(f"{where}: rank {graph.rank} is not in its group {list(members)}")
        return
    dims = get_attr(node, "involved_dim")
    if network is not None and dims is not None:
        want = involved_dims(members, network.npus_count)
        if list(dims) != want:
            problems.append(
                f"{where}: involved_dim {list(dims)} does not match the {network.num_dims}-"
                f"dimensional network (the group spans {want})"
            )


def _has_work(graph: RankGraph, system: AstraSystemConfig | None) -> bool:
    roofline = system is not None and system.roofline_enabled
    for node in graph.nodes:
        if node.type == pb.COMP_NODE:
            if node.duration_micros > 0 or (roofline and get_attr(node, "num_ops")):
                return True
        elif node.type == pb.COMM_COLL_NODE and get_attr(node, "comm_type") == pb.BROADCAST:
            if node.duration_micros > 0:
                return True
        elif (get_attr(node, "comm_size") or 0) > 0:
            return True
    return False


def _slim(graph: RankGraph) -> RankGraph:
    """What the cross-rank checks read of a checked rank (`crossrank`): its dependencies,
    its comm nodes whole, and only id, name and type of the rest (named in a hang), so the
    job's compute nodes are not all held at once."""
    nodes = [
        n if n.type in _COMM else pb.Node(id=n.id, name=n.name, type=n.type) for n in graph.nodes
    ]
    return RankGraph(graph.rank, graph.path, nodes, graph.deps)
