"""Finding the per-rank `.et` files of a trace: `<prefix>.<rank>.et` in a folder or a tar.

Users point lumos at a folder, a prefix (`out/gpt`), one file, or a tar of per-rank files
(as ASTRA-sim ships `resnet_dp.tar`); every command resolves them the same way here.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from lumos.converters.chakra.archive import is_tar, open_tar, read_member
from lumos.converters.chakra.compressed import decompressing
from lumos.converters.chakra.stream import EtReader
from lumos.errors import RankSetError, TraceFormatError
from lumos.leftovers import in_stale_staging
from lumos.outputs import is_link_loop

RANK_FILE = re.compile(r"^(?P<prefix>.+)\.(?P<rank>\d+)\.et(?:\.gz)?$")


@dataclass(frozen=True, slots=True)
class EtSource:
    """One rank's `.et`: a file on disk, or a member of a tar archive."""

    prefix: str
    rank: int
    path: str  # file path, or "archive.tar:member"
    archive: str | None = None
    member: str | None = None

    def open(self) -> EtReader:
        """Open the stream for reading (members of a tar are read into memory)."""
        if self.archive is None:
            return EtReader(self.path)
        data = read_member(self.archive, self.member or "", self.path)
        return EtReader(self.path, stream=decompressing(io.BytesIO(data), self.path))


def _parse_name(name: str) -> tuple[str, int] | None:
    match = RANK_FILE.match(name)
    if match is None:
        return None
    return match["prefix"], int(match["rank"])


def _from_tar(path: Path) -> list[EtSource]:
    out = []
    with open_tar(path) as tar:
        for member in tar.getmembers():
            base = Path(member.name).name
            parsed = _parse_name(base)
            if member.isfile() and parsed and not base.startswith("._"):
                out.append(
                    EtSource(parsed[0], parsed[1], f"{path}:{member.name}", str(path), member.name)
                )
    return out


#: names of raw PyTorch traces (host ET / Kineto JSON), which need `lumos convert` first
_RAW_SUFFIXES = (".json", ".json.gz", ".jsonl", ".pt.trace.json")


def find_et_sources(target: str | Path) -> list[EtSource]:
    """Resolve a folder, prefix, file or tar into per-rank sources, sorted by rank.

    Raises TraceFormatError if nothing matches, or a folder holds several prefixes
    (the message lists them so the user can pick one); RankSetError for a staging folder
    (the unfinished output of a killed run).
    """
    path = Path(target)
    if in_stale_staging(path):
        raise RankSetError(
            [
                f"{target}: is in the hidden staging folder of a lumos run that was killed "
                "before it finished, not a rank set; run the command that writes it again (the next "
                "writer into its folder removes it)"
            ]
        )
    if is_link_loop(path):
        raise TraceFormatError(
            str(target), "a symbolic link loop (its links point at each other), not a trace"
        )
    found: list[EtSource] = []
    if path.name.endswith(_RAW_SUFFIXES) or (
        path.is_dir()
        and not any(_parse_name(c.name) for c in path.iterdir())
        and any(c.name.endswith(_RAW_SUFFIXES) for c in path.iterdir())
    ):
        raise TraceFormatError(
            str(target),
            "PyTorch traces (JSON), not Chakra ETs: run `lumos convert` on them first, "
            "then use the folder it writes",
        )
    if path.is_file() and (is_tar(path) and not path.name.endswith((".et", ".et.gz"))):
        found = _from_tar(path)
    elif path.is_file():
        parsed = _parse_name(path.name)
        prefix, rank = parsed if parsed else (path.stem, 0)
        found = [EtSource(prefix, rank, str(path))]
    elif path.is_dir():
        for child in sorted(path.iterdir()):
            parsed = _parse_name(child.name)
            if parsed and child.is_file():
                found.append(EtSource(parsed[0], parsed[1], str(child)))
    else:
        parent = path.parent if str(path.parent) else Path(".")
        if parent.is_dir():
            for child in sorted(parent.iterdir()):
                parsed = _parse_name(child.name)
                if parsed and parsed[0] == path.name and child.is_file():
                    found.append(EtSource(parsed[0], parsed[1], str(child)))
    if not found:
        raise TraceFormatError(str(target), "no Chakra ET files (<prefix>.<rank>.et) found")
    prefixes = sorted({s.prefix for s in found})
    if len(prefixes) > 1:
        raise TraceFormatError(
            str(target),
            "several traces here; pass one prefix: "
            + ", ".join(str(path / p) if path.is_dir() else p for p in prefixes),
        )
    found.sort(key=lambda s: s.rank)
    ranks = [s.rank for s in found]
    if len(set(ranks)) != len(ranks):
        raise TraceFormatError(str(target), f"rank appears twice: {ranks}")
    return found


def iter_sources(targets: list[str]) -> Iterator[EtSource]:
    """Resolve several command-line targets in order."""
    for target in targets:
        yield from find_et_sources(target)
