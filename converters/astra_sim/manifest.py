"""The manifest of an export bundle: who wrote it, its world size and every rank's nodes.

`.lumos-bundle` (JSON) marks a folder as a bundle lumos wrote — `--force` replaces only
such folders — and states what the bundle must hold: the workload prefix, the world
size and the node count of every rank file. ASTRA-sim opens the files the network's NPU
count names and never notices a rank file that was deleted, added, or cut short at a
frame boundary; the pre-flight (`export astra-sim-check`, astra mode on a bundle's
workload) compares the files with the manifest and refuses a bundle that lost any part.
A bundle without a manifest (hand-made, or older than it) is checked without one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

MARKER = ".lumos-bundle"
_NOTE = "written by lumos export astra-sim; --force may replace this folder"


@dataclass(frozen=True, slots=True)
class Manifest:
    """What an exported bundle holds."""

    producer: str
    prefix: str
    world_size: int
    node_counts: tuple[int, ...]  # by rank

    def to_json(self) -> str:
        return json.dumps(
            {
                "note": _NOTE,
                "producer": self.producer,
                "prefix": self.prefix,
                "world_size": self.world_size,
                "node_counts": list(self.node_counts),
            },
            indent=1,
        )


def write_manifest(folder: Path, manifest: Manifest) -> None:
    """Write `.lumos-bundle` into a bundle folder (a staging folder: no atomic rename)."""
    (folder / MARKER).write_text(manifest.to_json() + "\n")


def read_manifest(bundle: Path, problems: list[str]) -> Manifest | None:
    """The bundle's manifest; None if it has none (or an old plain-text marker).

    A manifest that is JSON but malformed is a problem appended to `problems`.
    """
    path = bundle / MARKER
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError):
        return None
    except ValueError:
        return None  # the plain-text marker of older exports
    try:
        counts = tuple(int(n) for n in data["node_counts"])
        world = int(data["world_size"])
        prefix = str(data["prefix"])
        if world != len(counts) or world < 1 or min(counts) < 0:
            raise ValueError("world_size and node_counts disagree")
    except (KeyError, TypeError, ValueError) as exc:
        problems.append(f"{path}: malformed bundle manifest ({exc}); re-export the bundle")
        return None
    return Manifest(str(data.get("producer", "")), prefix, world, counts)


def manifest_problems(
    manifest: Manifest, workload: Path, prefix: str, counts: dict[int, int]
) -> list[str]:
    """How the workload files (`counts`: rank -> nodes read) differ from the manifest."""
    where = f"{workload.parent / MARKER}"
    problems: list[str] = []
    if prefix != manifest.prefix:
        problems.append(
            f"{workload}: holds {prefix}.*.et but the bundle manifest ({where}) says "
            f"{manifest.prefix}.*.et"
        )
    missing = [r for r in range(manifest.world_size) if r not in counts]
    if missing:
        problems.append(
            f"{workload}: {len(missing)} of the bundle's {manifest.world_size} rank files are "
            f"missing: {', '.join(map(str, missing[:10]))}{' ...' if len(missing) > 10 else ''}"
            f" (manifest {where}); re-export the bundle"
        )
    extra = sorted(r for r in counts if r >= manifest.world_size)
    if extra:
        problems.append(
            f"{workload}: rank file(s) {', '.join(map(str, extra[:10]))} are not part of the "
            f"bundle (its manifest says {manifest.world_size} ranks); remove them"
        )
    for rank, count in sorted(counts.items()):
        if rank < manifest.world_size and count != manifest.node_counts[rank]:
            problems.append(
                f"{workload}/{prefix}.{rank}.et: holds {count} nodes but the bundle manifest "
                f"says {manifest.node_counts[rank]} (cut short or edited); re-export, or "
                f"delete {where} if the edit was on purpose"
            )
    return problems
