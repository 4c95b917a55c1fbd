"""Outputs: all or nothing, through symlinks, never over devices, with the umask's modes.

Each test names the hostile case it pins down: a full disk (a write failing with ENOSPC
midway), a device or folder where the file should go, a symlink, `-o -`, a prefix that
climbs out of the output folder, `--force` over a folder lumos did not write.
"""

from __future__ import annotations

import errno
import os
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from lumos.cli.main import cli
from lumos.converters.chakra.stream import EtWriter, read_et
from lumos.errors import OutputError
from lumos.outputs import atomic_write
from lumos.proto import pb
from lumos.staging import safe_name, staging_dir
from tests.converters.chakra.test_rank_sets import write_set


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if "lumos-" in p.name or p.suffix == ".tmp")


def test_disk_full_midway_leaves_nothing(tmp_path: Path) -> None:
    target = tmp_path / "out.json"
    with (
        pytest.raises(OutputError, match=r"out\.json: cannot write: no space left on device"),
        atomic_write(target) as f,
    ):
        f.write(b"x" * 10)
        raise OSError(errno.ENOSPC, "No space left on device")
    assert not target.exists() and leftovers(tmp_path) == []


@pytest.fixture
def small_tmpfs(tmp_path: Path) -> Iterator[Path]:
    """A 64 KiB tmpfs (needs root and CAP_SYS_ADMIN; skipped elsewhere)."""
    mnt = tmp_path / "full"
    mnt.mkdir()
    if (
        os.geteuid() != 0
        or subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mnt)], capture_output=True
        ).returncode
    ):
        pytest.skip("cannot mount a tmpfs here")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", str(mnt)], check=False)


def test_real_full_disk_is_one_error_and_no_partial_file(small_tmpfs: Path) -> None:
    write_set(small_tmpfs.parent / "set", 1)
    big = small_tmpfs.parent / "big.json"
    big.write_text(
        '{"metadata": {"version": "0.0.4"}, "nodes": ['
        + ",".join(
            f'{{"id": "{i}", "name": "{"n" * 200}", "type": "COMP_NODE"}}' for i in range(1, 2000)
        )
        + "]}"
    )
    for args in (
        ["et", "from-json", str(big), "-o", str(small_tmpfs / "x.0.et")],
        [
            "et",
            "to-json",
            str(small_tmpfs.parent / "set" / "t.0.et"),
            "-o",
            str(small_tmpfs / "a.json"),
        ],
    ):
        (small_tmpfs / "filler").write_bytes(b"\0" * (60 << 10)) if "to-json" in args else None
        result = CliRunner().invoke(cli, args)
        if "to-json" in args and result.exit_code == 0:
            continue  # the small JSON fitted next to the filler
        assert result.exit_code == 6, result.output
        assert "no space left on device" in result.output and "Traceback" not in result.output
        assert leftovers(small_tmpfs) == [] and not list(small_tmpfs.glob("x.0.et"))


def test_et_writer_error_leaves_no_temp_file(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError), EtWriter(tmp_path / "a.0.et") as writer:
        writer.write(pb.Node(id=1, name="n", type=pb.COMP_NODE))
        raise RuntimeError("stop")
    assert list(tmp_path.iterdir()) == []


def test_symlink_output_writes_its_target(tmp_path: Path) -> None:
    real = tmp_path / "real.json"
    real.write_bytes(b"old")
    link = tmp_path / "link.json"
    link.symlink_to(real)
    with atomic_write(link) as f:
        f.write(b"new")
    assert link.is_symlink() and real.read_bytes() == b"new"


@pytest.mark.parametrize("special", ["/dev/null", "/dev/full"])
def test_device_node_is_never_replaced(special: str) -> None:
    with pytest.raises(OutputError, match="special file"), atomic_write(special) as f:
        f.write(b"x")
    assert stat.S_ISCHR(os.stat(special).st_mode)


def test_directory_target_is_a_clean_error(tmp_path: Path) -> None:
    with pytest.raises(OutputError, match="is a directory"), atomic_write(tmp_path) as f:
        f.write(b"x")


def test_files_and_folders_respect_the_umask(tmp_path: Path) -> None:
    old = os.umask(0o027)
    try:
        with atomic_write(tmp_path / "f.json") as f:
            f.write(b"{}")
        folder = staging_dir(tmp_path / "bundle")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "f.json").stat().st_mode) == 0o640
    assert stat.S_IMODE(folder.stat().st_mode) == 0o750


@pytest.mark.parametrize("prefix", ["../../x", "a/b", "..", "", "x\0y"])
def test_prefix_cannot_escape_the_output_folder(prefix: str) -> None:
    with pytest.raises(OutputError, match="plain file name"):
        safe_name(prefix)


def test_convert_refuses_an_escaping_prefix(tmp_path: Path) -> None:
    capture = Path(__file__).parent / "data" / "captures" / "ddp"
    result = CliRunner().invoke(
        cli, ["convert", str(capture), "-o", str(tmp_path / "o"), "--prefix", "../../x"]
    )
    assert result.exit_code == 6 and "plain file name" in result.output
    assert not (tmp_path / "o").exists() and list(tmp_path.parent.glob("x.*.et")) == []


def test_to_json_dash_is_stdout(tmp_path: Path) -> None:
    write_set(tmp_path, 1)
    result = CliRunner().invoke(cli, ["et", "to-json", str(tmp_path / "t.0.et"), "-o", "-"])
    assert result.exit_code == 0
    lines = result.output.strip().splitlines()
    assert len(lines) == 3 and '"metadata"' in lines[0]  # metadata + 2 nodes, JSON Lines
    assert not (Path.cwd() / "-").exists()


def test_from_json_dash_is_refused_not_a_file_named_dash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_set(tmp_path, 1)
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    assert runner.invoke(cli, ["et", "to-json", "t.0.et", "-o", "a.json"]).exit_code == 0
    result = runner.invoke(cli, ["et", "from-json", "a.json", "-o", "-"])
    assert result.exit_code == 6 and not Path("-").exists()


def test_et_graph_is_atomic_and_streams_dot(tmp_path: Path) -> None:
    write_set(tmp_path, 2)
    result = CliRunner().invoke(cli, ["et", "graph", str(tmp_path / "t"), "-o", "-"])
    assert result.exit_code == 0 and result.output.count("->") == 2
    (tmp_path / "g.dot").symlink_to("/dev/null")  # a link to a device: refused, not replaced
    bad = CliRunner().invoke(
        cli, ["et", "graph", str(tmp_path / "t"), "-o", str(tmp_path / "g.dot")]
    )
    assert bad.exit_code == 6 and "special file" in bad.output


def test_from_json_nodes_null_is_a_clean_error(tmp_path: Path) -> None:
    doc = tmp_path / "a.json"
    doc.write_text('{"metadata": {"version": "0.0.4"}, "nodes": [null]}')
    result = CliRunner().invoke(cli, ["et", "from-json", str(doc), "-o", str(tmp_path / "a.et")])
    assert result.exit_code == 3 and "node #0" in result.output
    assert not (tmp_path / "a.et").exists() and leftovers(tmp_path) == []


def test_from_json_keeps_node_count_true_after_edits(tmp_path: Path) -> None:
    write_set(tmp_path, 1)
    runner = CliRunner()
    js = tmp_path / "a.json"
    assert (
        runner.invoke(cli, ["et", "to-json", str(tmp_path / "t.0.et"), "-o", str(js)]).exit_code
        == 0
    )
    text = js.read_text()
    cut = text[: text.index(",\n")] + "]}\n"  # drop the second node by hand
    js.write_text(cut)
    out = tmp_path / "b.0.et"
    assert runner.invoke(cli, ["et", "from-json", str(js), "-o", str(out)]).exit_code == 0
    _, nodes = read_et(out)
    assert len(nodes) == 1


def test_export_force_deletes_only_a_bundle_lumos_wrote(tmp_path: Path) -> None:
    write_set(tmp_path / "set", 2)
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "thesis.tex").write_text("precious")
    args = ["export", "astra-sim", str(tmp_path / "set" / "t"), "--hw", "h100", "--force"]
    refused = CliRunner().invoke(cli, [*args, "-o", str(mine)])
    assert refused.exit_code == 5 and "not a bundle lumos wrote" in refused.output
    assert (mine / "thesis.tex").read_text() == "precious"
    bundle = tmp_path / "bundle"
    assert CliRunner().invoke(cli, [*args, "-o", str(bundle)]).exit_code == 0
    again = CliRunner().invoke(cli, [*args, "-o", str(bundle)])
    assert again.exit_code == 0 and (bundle / ".lumos-bundle").is_file()


def test_dev_stdout_on_a_pipe_is_a_special_file(tmp_path: Path) -> None:
    """`-o /dev/stdout` with stdout a pipe: the link resolves to `pipe:[N]`, no real path;
    it said 'no such file or directory'. It is a FIFO: refused as a special file."""
    read, write = os.pipe()
    try:
        with (
            pytest.raises(OutputError, match="special file"),
            atomic_write(f"/proc/self/fd/{write}") as f,
        ):
            f.write(b"x")
    finally:
        os.close(read)
        os.close(write)
    assert leftovers(tmp_path) == []


def test_bundle_run_sh_and_files_respect_the_umask(tmp_path: Path) -> None:
    """run.sh was chmod 0755 whatever the umask; now 0777 less the umask, like the rest."""
    write_set(tmp_path / "set", world=2)
    old = os.umask(0o027)
    try:
        result = CliRunner().invoke(
            cli, ["export", "astra-sim", str(tmp_path / "set" / "t"), "--hw", "h100",
                  "-o", str(tmp_path / "b")],
        )  # fmt: skip
    finally:
        os.umask(old)
    assert result.exit_code == 0, result.output
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in (tmp_path / "b").rglob("*")}
    assert modes.pop("run.sh") == 0o750
    assert modes.pop("workload") == 0o750
    assert set(modes.values()) == {0o640}, modes
    assert stat.S_IMODE((tmp_path / "b").stat().st_mode) == 0o750


def test_export_force_keeps_files_the_bundle_did_not_hold(tmp_path: Path) -> None:
    """A lumos bundle with a user's file added (a run's log in it, notes): `--force`
    deleted the whole folder. Now it names the file and refuses; a bundle holding only
    what lumos wrote (rank files by the manifest's prefix) is still replaced."""
    write_set(tmp_path / "set", 2)
    bundle = tmp_path / "bundle"
    args = ["export", "astra-sim", str(tmp_path / "set" / "t"), "--hw", "h100", "--force"]
    assert CliRunner().invoke(cli, [*args, "-o", str(bundle)]).exit_code == 0
    for extra in ("astra.log", "workload/t.7.et"):
        (bundle / extra).write_text("mine")
        refused = CliRunner().invoke(cli, [*args, "-o", str(bundle)])
        assert refused.exit_code == 5 and extra in refused.output, refused.output
        assert (bundle / extra).read_text() == "mine"
        (bundle / extra).unlink()
    assert CliRunner().invoke(cli, [*args, "-o", str(bundle)]).exit_code == 0


def test_sweep_table_writes_like_every_other_output(tmp_path: Path) -> None:
    """The sweep's table and Pareto page used their own mkstemp temporaries (`.t.csv.XXXX`,
    never swept after a kill) and replaced a symlink; they go through atomic_write now."""
    from lumos.simulator.sweep.table import write_atomic

    real = tmp_path / "real.csv"
    real.write_text("old")
    (tmp_path / "t.csv").symlink_to(real)
    write_atomic(tmp_path / "t.csv", b"new")
    assert (tmp_path / "t.csv").is_symlink() and real.read_text() == "new"
    with pytest.raises(OutputError, match="is a directory"):
        write_atomic(tmp_path, b"x")
    assert leftovers(tmp_path) == []


def test_a_set_on_a_full_disk_names_its_folder_not_the_staging_one(small_tmpfs: Path) -> None:
    """Issue 11 item 9 ('errors name a temp path that no longer exists'): convert on a full
    disk said `.conv.1761.5f6823.lumos-staging/trace.0.et: cannot write`."""
    capture = Path(__file__).parent / "data" / "captures" / "ddp"
    (small_tmpfs / "filler").write_bytes(b"\0" * (60 << 10))
    for jobs in ("1", "2"):
        result = CliRunner().invoke(
            cli, ["convert", str(capture), "-o", str(small_tmpfs / "conv"), "-j", jobs]
        )
        assert result.exit_code == 6, result.output
        assert f"{small_tmpfs / 'conv' / 'trace.0.et'}: cannot write: no space" in result.output
        assert "lumos-staging" not in result.output
        assert sorted(p.name for p in small_tmpfs.iterdir()) == ["filler"]
