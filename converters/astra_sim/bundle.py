"""Writing an ASTRA-sim bundle folder, all or nothing.

Everything goes into a temporary sibling folder first: workload ETs (each stating its node
count; written rank by rank as the export yields them, so no more than one rank's nodes
are held at once), the four config files, `run.sh` with the exact ASTRA-sim command line, a README
and the manifest (`manifest.MARKER`: world size and every rank's node count). The pre-flight then loads that
folder as ASTRA-sim would; only when it passes is the folder renamed into place, so a
refused export never leaves a partial bundle behind.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from lumos.converters.astra_sim.config import (
    AstraCommGroups,
    AstraMemoryConfig,
    AstraNetworkConfig,
    AstraSystemConfig,
)
from lumos.converters.astra_sim.config_files import (
    dump_astra_comm_groups,
    dump_astra_memory,
    dump_astra_network,
    dump_astra_system,
)
from lumos.converters.astra_sim.manifest import MARKER, Manifest, read_manifest, write_manifest
from lumos.converters.astra_sim.preflight import PreflightReport, preflight_bundle
from lumos.converters.astra_sim.run_script import WORKLOAD_DIR, run_script
from lumos.converters.chakra.attrs import get_attr
from lumos.converters.chakra.stream import with_node_count, write_et
from lumos.errors import ExportError
from lumos.outputs import umask
from lumos.proto import pb
from lumos.staging import staging_dir


@dataclass(frozen=True, slots=True)
class BundleFiles:
    """Everything a bundle holds, ready to write.

    `workloads` is consumed once, rank by rank, each rank's nodes written before the next
    is asked for (an exporter yields them as it maps them); `comm_groups` is called after
    the last rank, since mapping the ranks numbers the groups.
    """

    prefix: str
    workloads: Iterable[tuple[pb.GlobalMetadata, Sequence[pb.Node]]]
    system: AstraSystemConfig
    network: AstraNetworkConfig
    memory: AstraMemoryConfig
    comm_groups: Callable[[], AstraCommGroups]
    backend: str = "congestion-unaware"


def write_bundle(
    out_dir: str | Path,
    files: BundleFiles,
    readme: Callable[[PreflightReport], str],
    *,
    force: bool = False,
) -> PreflightReport:
    """Write, pre-flight and move a bundle into `out_dir`; returns the pre-flight report.

    Raises ExportError (and leaves nothing behind) if the pre-flight fails, if consuming
    `files.workloads` raises (a rank the exporter refuses), or if
    `out_dir` exists and `force` is not set, or is set but `out_dir` is not a bundle
    lumos wrote (no `MARKER` file): --force never deletes a folder of the user's.
    """
    target = Path(os.path.realpath(out_dir))
    if target.exists() and not force:
        raise ExportError(f"{out_dir} exists; pass --force to replace it")
    if target.exists() and not (target / MARKER).is_file():
        raise ExportError(
            f"{out_dir} exists and is not a bundle lumos wrote (no {MARKER} in it); "
            "refusing to delete it, even with --force: choose another -o"
        )
    foreign = _foreign_files(target) if target.exists() else []
    if foreign:
        raise ExportError(
            f"{out_dir} holds files the bundle lumos wrote did not ({', '.join(foreign[:3])}"
            f"{', ...' if len(foreign) > 3 else ''}); refusing to delete them, even with "
            "--force: move them out or choose another -o"
        )
    tmp = staging_dir(target)
    try:
        _write_files(tmp, files)
        try:
            report = preflight_bundle(tmp)
        except ExportError as exc:  # name the bundle asked for, not the staging folder
            raise ExportError(str(exc).replace(str(tmp), str(out_dir))) from None
        (tmp / "README.md").write_text(readme(report))
        if target.exists():
            old = target.with_name(f".{target.name}.old")
            shutil.rmtree(old, ignore_errors=True)
            target.rename(old)
            tmp.rename(target)
            shutil.rmtree(old, ignore_errors=True)
        else:
            tmp.rename(target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return report


def _write_files(folder: Path, files: BundleFiles) -> None:
    counts: list[int] = []
    producer = "lumos"
    for rank, (metadata, nodes) in enumerate(files.workloads):
        meta = with_node_count(metadata, len(nodes))
        write_et(folder / WORKLOAD_DIR / f"{files.prefix}.{rank}.et", meta, nodes)
        if not counts:
            producer = str(get_attr(metadata, "producer", "lumos"))
        counts.append(len(nodes))
        del nodes  # before the next rank is mapped: one rank's nodes held at once
    write_manifest(folder, Manifest(producer, files.prefix, len(counts), tuple(counts)))
    dump_astra_system(files.system, folder / "system.json")
    dump_astra_network(files.network, folder / "network.yml")
    dump_astra_memory(files.memory, folder / "memory.json")
    dump_astra_comm_groups(files.comm_groups(), folder / "comm_group.json")
    script = folder / "run.sh"
    script.write_text(run_script(files.prefix, len(counts), files.backend))
    script.chmod(0o777 & ~umask())  # executable, as the umask allows


_BUNDLE_FILES = {MARKER, "README.md", "system.json", "network.yml", "memory.json"}
_BUNDLE_FILES |= {"comm_group.json", "run.sh", WORKLOAD_DIR}


def _foreign_files(bundle: Path) -> list[str]:
    """Files in a bundle lumos wrote that the export did not write (a run's log, notes):
    `--force` must not delete them. Rank files are told by the manifest's prefix."""
    manifest = read_manifest(bundle, [])
    ranks = {f"{manifest.prefix}.{r}.et" for r in range(manifest.world_size)} if manifest else None
    found = [p.name for p in bundle.iterdir() if p.name not in _BUNDLE_FILES]
    workload = bundle / WORKLOAD_DIR
    if workload.is_dir():
        found += [
            f"{WORKLOAD_DIR}/{p.name}"
            for p in workload.iterdir()
            if (p.name not in ranks if ranks is not None else p.suffix != ".et")
        ]
    return sorted(found)
