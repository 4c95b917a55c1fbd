"""An exported bundle states its world size and every rank's node count (`.lumos-bundle`),
and the pre-flight — `export astra-sim-check` and astra mode on the bundle's workload —
refuses a bundle that lost a rank file, gained one, or holds a file cut short.

ASTRA-sim itself opens the files its network names and runs whatever nodes they hold, so
none of these would stop it: it would print a time for a different job.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from lumos.cli.main import cli
from lumos.converters.chakra.attrs import get_attr
from lumos.converters.chakra.stream import EtReader, read_et, write_et
from tests.converters.astra_sim.test_export import all_reduce, export, gpu, write_trace


@pytest.fixture
def bundle(tmp_path: Path) -> Path:
    ranks = [[gpu(1), all_reduce(2, deps=(1,)), gpu(3, deps=(2,))] for _ in range(3)]
    export(write_trace(tmp_path / "in", ranks), tmp_path / "b")
    return tmp_path / "b"


def check(bundle: Path) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["export", "astra-sim-check", str(bundle)])
    return result.exit_code, result.output


def astra_mode(bundle: Path) -> tuple[int, str]:
    args = ["simulate", str(bundle / "workload"), "--mode", "astra", "--allow-partial",
            "--astra-sim-system", str(bundle / "system.json"),
            "--astra-sim-network", str(bundle / "network.yml"),
            "--comm-groups", str(bundle / "comm_group.json")]  # fmt: skip
    result = CliRunner().invoke(cli, args)
    return result.exit_code, result.output


def rewrite_without(path: Path, drop_last: int) -> None:
    """The file as a foreign tool would leave it after cutting nodes: no node_count."""
    meta, nodes = read_et(path)
    kept = [a for a in meta.attr if a.name != "node_count"]
    del meta.attr[:]
    meta.attr.extend(kept)
    write_et(path, meta, nodes[: len(nodes) - drop_last])


def test_bundle_manifest_states_world_size_and_node_counts(bundle: Path) -> None:
    manifest = json.loads((bundle / ".lumos-bundle").read_text())
    assert manifest["world_size"] == 3 and manifest["prefix"] == "t"
    assert manifest["producer"].startswith("lumos")
    for rank in range(3):
        with EtReader(bundle / "workload" / f"t.{rank}.et") as reader:
            count = sum(1 for _ in reader)
            assert get_attr(reader.metadata, "node_count") == count
        assert manifest["node_counts"][rank] == count
    assert check(bundle)[0] == 0
    assert astra_mode(bundle)[0] == 0


def test_bundle_missing_a_rank_file_is_refused(bundle: Path) -> None:
    (bundle / "workload" / "t.1.et").unlink()
    code, out = check(bundle)
    assert code == 5 and "1 of the bundle's 3 rank files are missing: 1" in out


def test_bundle_with_an_extra_rank_file_is_refused(bundle: Path) -> None:
    shutil.copy(bundle / "workload" / "t.2.et", bundle / "workload" / "t.3.et")
    code, out = check(bundle)
    assert code == 5 and "rank file(s) 3 are not part of the bundle" in out


def test_bundle_file_cut_at_a_frame_boundary_is_refused(bundle: Path) -> None:
    path = bundle / "workload" / "t.0.et"
    with EtReader(path) as reader:
        head = reader.metadata.ByteSize()
        first = next(iter(reader)).ByteSize()
    path.write_bytes(path.read_bytes()[: 1 + head + 1 + first])  # metadata + one node
    code, out = check(bundle)
    assert code == 5 and "holds 1 nodes but its metadata says" in out


def test_bundle_file_edited_short_is_refused_by_the_manifest(bundle: Path) -> None:
    rewrite_without(bundle / "workload" / "t.2.et", drop_last=1)
    manifest = json.loads((bundle / ".lumos-bundle").read_text())
    code, out = check(bundle)
    want = f"t.2.et: holds {manifest['node_counts'][2] - 1} nodes but the bundle manifest says"
    assert code == 5 and want in out
    code, out = astra_mode(bundle)
    assert code == 1 and want in out


def test_bundle_without_a_manifest_is_checked_without_one(bundle: Path) -> None:
    (bundle / ".lumos-bundle").write_text("written by an older lumos\n")  # old marker
    rewrite_without(bundle / "workload" / "t.2.et", drop_last=0)
    code, out = check(bundle)
    assert code == 0 and "OK, 3 ranks" in out
