"""Writing a rank set (`<prefix>.<rank>.et` for every rank) all at once, over only our own.

Every command that writes a rank set — `convert`, `whatif -o`, `estimate -o` — goes
through `rank_set_output`: the overwrite rule is checked before any work (an existing
set of the prefix is replaced only with `force`, and only if lumos wrote every one of its
files: their metadata carries a `set_id` or a lumos `producer`), the ranks are written
into a hidden staging folder (`lumos.staging`), and `publish` moves them into place when
all are written, deleting the prefix's earlier rank files. A failure or a kill before
that leaves the output folder as it was; the staging folder is removed then, or by the
next writer into the same place (`lumos.leftovers`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from lumos.converters.chakra.stream import EtReader
from lumos.errors import LumosError, OutputError
from lumos.outputs import describe
from lumos.staging import remove_tree, safe_name, staging_dir

RANK_FILE = re.compile(r"^(?P<prefix>.+)\.(?P<rank>\d+)\.et(?:\.gz)?$")


def rank_files(folder: Path, prefix: str) -> list[Path]:
    """The `<prefix>.<rank>.et[.gz]` files directly in `folder` (none if it is absent)."""
    if not folder.is_dir():
        return []
    found = []
    for child in sorted(folder.iterdir()):
        match = RANK_FILE.match(child.name)
        if match and match["prefix"] == prefix and child.is_file():
            found.append(child)
    return found


def written_by_lumos(path: Path) -> bool:
    """Whether an ET's metadata says lumos wrote it (a `set_id`, or a lumos `producer`)."""
    try:
        with EtReader(path) as reader:
            attrs = {a.name: a for a in reader.metadata.attr}
    except (LumosError, OSError):
        return False
    producer = attrs.get("producer")
    return "set_id" in attrs or (producer is not None and producer.string_val.startswith("lumos"))


def check_set_output(out: Path, prefix: str, *, force: bool, prefix_option: bool = True) -> None:
    """The overwrite rule of a rank-set output; changes nothing.

    Raises OutputError if `out` is a file; LumosError (a refusal) if it already holds
    `<prefix>.*.et` files and `force` is not set, or if any of them was not written by
    lumos (even with `force`: the user's own files are never deleted). `prefix_option`:
    whether the command has a `--prefix` to suggest (`estimate` writes a fixed prefix).
    """
    safe_name(prefix)
    real = Path(os.path.realpath(out))
    if real.exists() and not real.is_dir():
        raise OutputError(f"{out}: exists and is not a folder")
    existing = rank_files(real, prefix)
    if existing and not force:
        raise LumosError(f"{out} already holds {prefix}.*.et files; pass --force to replace them")
    foreign = [p.name for p in existing if not written_by_lumos(p)]
    if foreign:
        raise LumosError(
            f"{out} holds {', '.join(foreign[:5])}{' ...' if len(foreign) > 5 else ''} that "
            "lumos did not write (no set_id or lumos producer in the metadata); refusing to "
            "replace them, even with --force: choose another folder"
            + (" or --prefix" if prefix_option else "")
        )


def stage_for(out: Path) -> Path:
    """A fresh staging folder for a set written into `out`.

    Raises OutputError if `out` is a file, or nothing can be created there.
    """
    real = Path(os.path.realpath(out))
    if real.exists() and not real.is_dir():
        raise OutputError(f"{out}: exists and is not a folder")
    if real.is_dir():
        return staging_dir(real, inside=real)
    return staging_dir(real)


def publish(stage: Path, out: Path, prefix: str) -> None:
    """Move the staged rank files into `out`, replacing the prefix's earlier rank files.

    Raises OutputError if the files cannot be moved.
    """
    real = Path(os.path.realpath(out))
    try:
        if stage.parent != real and not real.exists():
            stage.rename(real)
            return
        new = {p.name for p in stage.iterdir()}
        for child in rank_files(real, prefix):
            if child.name not in new:
                child.unlink()
        for name in sorted(new):
            os.replace(stage / name, real / name)
    except OSError as exc:
        raise OutputError(f"{out}: cannot write the rank set: {describe(exc)}") from None


@contextmanager
def rank_set_output(
    out: str | os.PathLike[str], prefix: str, *, force: bool, prefix_option: bool = True
) -> Iterator[Path]:
    """`with rank_set_output(out, prefix, force=f) as stage:` write the ranks into `stage`;
    they appear in `out` together when the block ends without an error, else not at all.

    Raises as `check_set_output`; OutputError if the set cannot be written.
    """
    target = Path(out)
    check_set_output(target, prefix, force=force, prefix_option=prefix_option)
    stage = stage_for(target)
    try:
        try:
            yield stage
        except OutputError as exc:  # name the folder asked for, not the staging one
            raise OutputError(str(exc).replace(str(stage), str(target))) from None
        publish(stage, target, prefix)
    finally:
        remove_tree(stage)
