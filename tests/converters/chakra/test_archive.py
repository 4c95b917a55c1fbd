"""Hostile tar archives: every reader of a tar gives one clear error or a sound result.

Hand-built with the layout of a real rank-set tar (`<prefix>.<rank>.et` members, as
ASTRA-sim ships `resnet_dp.tar`) and of a tar of a capture folder: a tar cut inside a
member (was `internal error: ReadError`, exit 70), a member header claiming 3 GB, a
compressed tar expanding a thousandfold (was > 60 s), members that are links, devices
or FIFOs, names with `..` or absolute paths, duplicate names.
"""

from __future__ import annotations

import io
import os
import tarfile
import zlib
from pathlib import Path

import pytest
from click.testing import CliRunner

from lumos.cli.main import cli
from lumos.converters.chakra import archive
from tests.converters.chakra.test_rank_sets import write_set

COMMANDS = (["et", "validate"], ["et", "info"], ["simulate"])


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.output + (result.stderr if result.stderr_bytes else "")


def _members(tmp_path: Path) -> list[bytes]:
    folder = write_set(tmp_path / "set", 2)
    return [(folder / f"t.{r}.et").read_bytes() for r in range(2)]


def _tar(path: Path, members: list[tuple[str, bytes | None, dict[str, object]]]) -> Path:
    with tarfile.open(path, "w") as tar:
        for name, data, fields in members:
            info = tarfile.TarInfo(name)
            for key, value in fields.items():
                setattr(info, key, value)
            if data is None:
                tar.addfile(info)
            else:
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return path


def _padded(data: bytes) -> int:
    return 512 + -(-len(data) // 512) * 512


@pytest.mark.parametrize("where", ["first-member", "second-member", "second-header"])
def test_tar_cut_inside_a_member_is_one_error(tmp_path: Path, where: str) -> None:
    e0, e1 = _members(tmp_path)
    whole = _tar(tmp_path / "set.tar", [("t.0.et", e0, {}), ("t.1.et", e1, {})]).read_bytes()
    cut = {
        "first-member": 512 + len(e0) // 2,
        "second-member": _padded(e0) + 512 + len(e1) // 2,
        "second-header": _padded(e0) + 100,  # reads as the end: rank 1 is missing
    }[where]
    archive_path = tmp_path / "cut.tar"
    archive_path.write_bytes(whole[:cut])
    for command in COMMANDS if where != "second-header" else COMMANDS[::2]:
        code, out = run(*command, str(archive_path))
        assert code in (1, 3) and "internal error" not in out and "cut.tar" in out, out


def test_member_claiming_3_gb_is_refused_from_its_header(tmp_path: Path) -> None:
    e0, _ = _members(tmp_path)
    head = _tar(tmp_path / "one.tar", [("t.0.et", e0, {})]).read_bytes()[: _padded(e0)]
    info = tarfile.TarInfo("t.1.et")
    info.size = 3 << 30
    path = tmp_path / "huge.tar"
    path.write_bytes(head + info.tobuf(tarfile.GNU_FORMAT) + bytes(4096))
    code, out = run("simulate", str(path))
    assert code == 3 and "tar cut short: member 't.1.et' says 3,221,225,472 bytes" in out


def test_compressed_tar_bomb_is_a_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A .tar.gz whose member headers add up to > MAX_GZIP_RATIO x its size is refused
    before a member is read (the floor is lowered from 64 MB to keep the test small)."""
    monkeypatch.setattr(archive, "GZIP_RATIO_AFTER", 1 << 20)
    info = tarfile.TarInfo("t.1.et")
    info.size = 8 << 20
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    data = info.tobuf(tarfile.GNU_FORMAT) + bytes(info.size + 1024)
    path = tmp_path / "bomb.tar.gz"
    path.write_bytes(packer.compress(data) + packer.flush())
    for command in COMMANDS:
        code, out = run(*command, str(path))
        assert code == 7 and "LUMOS_MAX_GZIP_RATIO" in out, out
    jbomb = tmp_path / "capture.tar.gz"  # a convert input: a Kineto member of spaces
    info = tarfile.TarInfo("rank0.kineto.json")
    info.size = 8 << 20
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    body = b'{"traceEvents":[' + b" " * (info.size - 18) + b"]}" + bytes(1024)
    jbomb.write_bytes(packer.compress(info.tobuf(tarfile.GNU_FORMAT) + body) + packer.flush())
    code, out = run("convert", str(jbomb), "-o", str(tmp_path / "out"))
    assert code == 7 and "LUMOS_MAX_GZIP_RATIO" in out and not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "fields",
    [
        {"type": tarfile.SYMTYPE, "linkname": "/etc/passwd"},
        {"type": tarfile.SYMTYPE, "linkname": "t.0.et"},
        {"type": tarfile.LNKTYPE, "linkname": "t.0.et"},
        {"type": tarfile.LNKTYPE, "linkname": "/etc/passwd"},
        {"type": tarfile.FIFOTYPE},
        {"type": tarfile.CHRTYPE, "devmajor": 1, "devminor": 5},
    ],
    ids=["symlink-out", "symlink-in", "hardlink", "hardlink-out", "fifo", "device"],
)
def test_links_devices_and_fifos_are_never_ranks(tmp_path: Path, fields: dict[str, object]) -> None:
    e0, _ = _members(tmp_path)
    path = _tar(tmp_path / "links.tar", [("t.0.et", e0, {}), ("t.1.et", None, fields)])
    for command in (["et", "validate"], ["simulate"]):
        code, out = run(*command, str(path))
        assert code == 1 and "ranks are missing: 1" in out, out


def test_member_names_climbing_out_write_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    e0, e1 = _members(tmp_path)
    work = tmp_path / "a" / "b"
    work.mkdir(parents=True)
    monkeypatch.chdir(work)
    for names in (("../../t.0.et", "../../t.1.et"), ("/tmp/lumos-x/t.0.et", "/tmp/lumos-x/t.1.et")):
        path = _tar(tmp_path / "climb.tar", [(names[0], e0, {}), (names[1], e1, {})])
        for command in COMMANDS:
            code, out = run(*command, str(path))
            assert code == 0, out
        assert not (tmp_path / "t.0.et").exists() and not Path("/tmp/lumos-x").exists()
    assert sorted(os.listdir(tmp_path)) == ["a", "climb.tar", "set"]


@pytest.mark.parametrize("second", ["t.1.et", "other/t.1.et"])
def test_duplicate_member_names_are_refused(tmp_path: Path, second: str) -> None:
    e0, e1 = _members(tmp_path)
    path = _tar(tmp_path / "dup.tar", [("t.0.et", e0, {}), ("t.1.et", e1, {}), (second, e0, {})])
    for command in COMMANDS:
        code, out = run(*command, str(path))
        assert code == 3 and "rank appears twice" in out, out


def test_convert_on_a_tar_cut_inside_a_member(tmp_path: Path) -> None:
    capture = Path(__file__).parents[2] / "data" / "captures" / "ddp"
    path = tmp_path / "capture.tar"
    with tarfile.open(path, "w") as tar:
        for child in sorted(capture.iterdir()):
            tar.add(child, arcname=child.name)
    path.write_bytes(path.read_bytes()[:150_000])
    code, out = run("convert", str(path), "-o", str(tmp_path / "out"))
    assert code == 3 and "tar cut short" in out and not (tmp_path / "out").exists()


@pytest.mark.parametrize("keep", [8, 40, -60])
def test_compressed_tar_cut_anywhere_is_one_error(tmp_path: Path, keep: int) -> None:
    """Fuzz finding: `tarfile.is_tarfile` raised EOFError on a .tar.gz cut inside its gzip
    header (internal error, exit 70) before any lumos check ran."""
    e0, e1 = _members(tmp_path)
    whole = tmp_path / "set.tar.gz"
    with tarfile.open(whole, "w:gz") as tar:
        for name, data in (("t.0.et", e0), ("t.1.et", e1)):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    cut = tmp_path / "cut.tar.gz"
    cut.write_bytes(whole.read_bytes()[:keep])
    for command in COMMANDS:
        code, out = run(*command, str(cut))
        assert code in (1, 3) and "internal error" not in out and "cut.tar.gz" in out, out
