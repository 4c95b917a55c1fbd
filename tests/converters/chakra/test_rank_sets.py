"""Rank sets are self-describing: missing, foreign, mislabelled or mixed ranks are refused.

Hand-made sets with the metadata lumos writes (rank, world_size, node_count, set_id), and
foreign sets without it; validate, simulate and export must all refuse the same sets.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from lumos.cli.main import cli
from lumos.converters.chakra.attrs import make_attr
from lumos.converters.chakra.files import find_et_sources
from lumos.converters.chakra.rankset import check_rank_set
from lumos.converters.chakra.stream import EtReader, with_node_count, write_et
from lumos.converters.chakra.validate import validate_sources
from lumos.errors import RankSetError, TraceFormatError
from lumos.proto import pb


def rank_nodes(rank: int) -> list[pb.Node]:
    """A compute node and an all-reduce over everyone, as our converter writes them."""
    comp = pb.Node(id=1, name=f"gemm{rank}", type=pb.COMP_NODE, duration_micros=10)
    comp.attr.extend([make_attr("is_cpu_op", False), make_attr("dur_ns", 10_000)])
    coll = pb.Node(id=2, name="allreduce", type=pb.COMM_COLL_NODE, duration_micros=5)
    coll.data_deps.append(1)
    coll.attr.extend(
        [
            make_attr("is_cpu_op", False),
            make_attr("comm_type", pb.ALL_REDUCE),
            make_attr("comm_size", 1 << 20),
        ]
    )
    return [comp, coll]


def write_set(
    folder: Path,
    world: int,
    *,
    ranks: list[int] | None = None,
    set_id: str | None = "run-a",
    meta_rank: dict[int, int] | None = None,
    own_meta: bool = True,
) -> Path:
    """`t.<rank>.et` for `ranks` (default all) of a `world`-rank job."""
    folder.mkdir(parents=True, exist_ok=True)
    for r in range(world) if ranks is None else ranks:
        meta = pb.GlobalMetadata(version="0.0.4")
        nodes = rank_nodes(r)
        if own_meta:
            meta.attr.extend(
                [
                    make_attr("rank", (meta_rank or {}).get(r, r)),
                    make_attr("world_size", world),
                ]
            )
            if set_id is not None:
                meta.attr.append(make_attr("set_id", set_id))
            meta = with_node_count(meta, len(nodes))
        write_et(folder / f"t.{r}.et", meta, nodes)
    return folder


def codes(folder: Path, **kw: bool) -> dict[str, str]:
    report = validate_sources(find_et_sources(folder), **kw)
    return {p.code: p.severity.value for p in report.problems}


def test_complete_set_validates(tmp_path: Path) -> None:
    assert codes(write_set(tmp_path, 4)) == {}


def test_deleted_ranks_are_missing_ranks(tmp_path: Path) -> None:
    folder = write_set(tmp_path, 8)
    (folder / "t.3.et").unlink()
    (folder / "t.7.et").unlink()
    report = validate_sources(find_et_sources(folder))
    (missing,) = [p for p in report.errors if p.code == "rank-missing"]
    assert "2 of 8 ranks are missing: 3, 7" in missing.message
    assert codes(folder, allow_partial=True) == {"rank-missing": "warning"}
    with pytest.raises(RankSetError, match="3, 7"):
        check_rank_set(find_et_sources(folder))
    assert len(check_rank_set(find_et_sources(folder), allow_partial=True)) == 1


def test_rank_beyond_world_size_is_foreign(tmp_path: Path) -> None:
    folder = write_set(tmp_path, 4)
    write_set(tmp_path, 8, ranks=[6])  # a stale rank 6 of an 8-rank job
    found = codes(folder)
    assert found["rank-set"] == "error"
    with pytest.raises(RankSetError, match="disagree on the world size"):
        check_rank_set(find_et_sources(folder), allow_partial=True)


def test_files_of_two_conversions_are_not_one_set(tmp_path: Path) -> None:
    write_set(tmp_path, 4, set_id="run-a")
    write_set(tmp_path, 4, ranks=[2], set_id="run-b")
    with pytest.raises(RankSetError, match="2 different conversions"):
        check_rank_set(find_et_sources(tmp_path))


def test_rank_mislabel_names_file_and_metadata(tmp_path: Path) -> None:
    write_set(tmp_path, 2, meta_rank={1: 0})
    with pytest.raises(RankSetError, match=r"t\.1\.et: the file name says rank 1 but its metadata"):
        check_rank_set(find_et_sources(tmp_path))


def test_foreign_set_with_a_gap_is_refused(tmp_path: Path) -> None:
    write_set(tmp_path, 4, ranks=[0, 1, 3], own_meta=False)
    assert codes(tmp_path) == {"rank-missing": "error"}
    with pytest.raises(RankSetError, match="ranks 2 are missing between 0 and 3"):
        check_rank_set(find_et_sources(tmp_path))


def test_rank_set_in_a_tar_is_checked_in_one_pass(tmp_path: Path) -> None:
    import tarfile

    folder = write_set(tmp_path / "set", 4, ranks=[0, 1, 2])
    archive = tmp_path / "set.tar"
    with tarfile.open(archive, "w") as tar:
        for p in sorted(folder.iterdir()):
            tar.add(p, arcname=p.name)
    with pytest.raises(RankSetError, match="1 of 4 ranks are missing: 3"):
        check_rank_set(find_et_sources(archive))


@pytest.mark.parametrize("command", ["simulate", "compare", "export"])
def test_commands_refuse_an_incomplete_set(tmp_path: Path, command: str) -> None:
    folder = write_set(tmp_path / "set", 4)
    (folder / "t.2.et").unlink()
    args = {
        "simulate": ["simulate", str(folder / "t")],
        "compare": ["compare", str(folder / "t")],
        "export": ["export", "astra-sim", str(folder / "t"), "-o", str(tmp_path / "b")],
    }[command] + (["--hw", "h100"] if command == "export" else [])
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 1, result.output
    assert "1 of 4 ranks are missing: 2" in result.output
    assert not (tmp_path / "b").exists()


def test_simulate_allow_partial_runs_the_ranks_present(tmp_path: Path) -> None:
    folder = write_set(tmp_path, 4, ranks=[0, 1])
    result = CliRunner().invoke(cli, ["simulate", str(folder / "t"), "--allow-partial", "--json"])
    assert result.exit_code == 0, result.output
    assert "2 of 4 ranks are missing" in result.output  # the warning, on stderr


def test_file_cut_at_a_frame_boundary_is_an_error(tmp_path: Path) -> None:
    folder = write_set(tmp_path, 1)
    path = folder / "t.0.et"
    with EtReader(path) as reader:
        head = reader.metadata.ByteSize()
    data = path.read_bytes()
    # keep the metadata and the first node only: a valid framing, one node short
    first_node = rank_nodes(0)[0].ByteSize()
    path.write_bytes(data[: 1 + head + 1 + first_node])
    with (
        pytest.raises(TraceFormatError, match="holds 1 nodes but its metadata says 2"),
        EtReader(path) as reader,
    ):
        list(reader)
    assert codes(folder) == {"unreadable": "error"}


@pytest.mark.parametrize("bomb", ["metadata-world", "name-rank", "foreign-name-rank"])
def test_world_size_or_rank_of_a_billion_is_a_limit_not_24_gb(tmp_path: Path, bomb: str) -> None:
    """Audit finding: an ET set whose metadata says world_size 1e9 (or a file named
    `t.99999999999.et`) made every command list the missing ranks one by one: 24 GB,
    killed after 40 s. The header is held to LUMOS_MAX_RANKS; the gaps are counted as
    runs. Run in a child under a 2 GB address-space cap, so a regression fails, not the
    machine."""
    import resource
    import subprocess
    import sys

    if bomb == "metadata-world":
        folder = write_set(tmp_path / "s", 10**9, ranks=[0, 1])
    else:
        folder = write_set(tmp_path / "s", 2, own_meta=bomb == "name-rank")
        (folder / "t.1.et").rename(folder / "t.99999999999.et")
    lumos = Path(sys.executable).with_name("lumos")

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))

    for args in (["simulate", str(folder / "t")], ["et", "validate", str(folder)]):
        done = subprocess.run(
            [str(lumos), *args], capture_output=True, text=True, timeout=60, preexec_fn=cap
        )
        said = done.stdout + done.stderr  # validate reports on stdout
        assert done.returncode in (1, 7) and "LUMOS_MAX_RANKS" in said, said


def test_info_on_an_incomplete_set_warns(tmp_path: Path) -> None:
    """`et info` printed '6 rank(s)' for an 8-rank set missing two, without a word; it
    describes (exit 0) but now warns as validate would refuse."""
    folder = write_set(tmp_path, 8, ranks=[0, 1, 2, 4, 5, 7])
    result = CliRunner().invoke(cli, ["et", "info", str(folder)])
    assert result.exit_code == 0
    assert "warning: 2 of 8 ranks are missing: 3, 6" in result.stderr


@pytest.mark.parametrize("command", ["simulate", "compare"])
def test_simulate_refuses_our_own_file_cut_at_a_frame_boundary(
    tmp_path: Path, command: str
) -> None:
    """Audit finding: simulate's column reader never compared the nodes read with the
    metadata's node_count. With every rank cut at the same node (or one rank alone), no
    collective count differs, and a 40-node rank cut to 20 simulated as 218 us, exit 0."""
    folder = write_set(tmp_path, 2)
    for rank in range(2):
        path = folder / f"t.{rank}.et"
        with EtReader(path) as reader:
            head = reader.metadata.ByteSize()
        first_node = rank_nodes(rank)[0].ByteSize()
        path.write_bytes(path.read_bytes()[: 1 + head + 1 + first_node])  # 1 of 2 nodes
    result = CliRunner().invoke(cli, [command, str(folder / "t")])
    assert result.exit_code == 3
    assert "holds 1 nodes but its metadata says 2: the file was cut short" in result.output
